// How a shaped NIC's order (PRISM_LINK_ORDER, plugin/link_arbiter.h) times a
// short ring collective that starts, give or take a race, with a bandwidth-
// bound one on the same NIC: the end of a backward pass, where a TP
// all-reduce and the DP reduce-scatter start together on every rank.
//
//   link_order_bench [--gbps 2.5] [--latency-us 10] [--trials 500]
//                    [--bulk-channels 2] [--window 8] [--bulk-kib 512] [--bulk-messages 8]
//                    [--ring-channels 2] [--ring-steps 6] [--ring-kib 128]
//                    [--turnaround-us 30] [--jitter-us 200] [--spread-us 1000] [--seed 1]
//
// The NIC is LinkArbiter itself, driven in 1 us ticks. The bulk collective
// sends --bulk-messages of --bulk-kib on each of its channels' connections,
// at most --window of them posted ahead (NCCL's steps in flight), the next
// one when one completes; the short ring posts step k+1 on each of its
// channels once step k was delivered and --turnaround-us passed (the peer's
// handoff, taken to be the same on every rank). Every posting comes up to
// --jitter-us late (uniform): the proxy threads of ranks packed on one
// host's cores. The short ring starts up to --spread-us before or after the
// bulk one (uniform). Per order, over the trials: the short ring's time from
// its start to its last delivery (mean, sd, p10, median, p90, max) and the
// bulk one's mean; the first row has the short ring alone on the NIC, the
// round-robin rows take turns of whole messages (connections whose payload
// follows its header on a socket) or of 64 KiB slices (kRoundRobinSlice).
// Defaults: the bench's step-n16-tp4-2g5 at 2.5 Gbit/s, whose DP2 reduce-
// scatter of 16 MiB is one step of 8 MiB a rank, one window of eight 512 KiB
// messages on each of two channels, and whose TP all-reduce of 1 MiB over a
// ring of four is 6 steps of 128 KiB a channel.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "common/units.h"
#include "plugin/link_arbiter.h"

namespace {

using prism::Bytes;
using prism::Nanoseconds;
using prism::plugin::LinkArbiter;
using prism::plugin::LinkModel;
using prism::plugin::LinkOrder;

struct Options {
  double gbps = 2.5, latency_us = 10, turnaround_us = 30, jitter_us = 200, spread_us = 1000;
  int trials = 500, bulk_channels = 2, window = 8, bulk_kib = 512, bulk_messages = 8, ring_channels = 2,
      ring_steps = 6, ring_kib = 128;
  uint64_t seed = 1;
};

struct Trial {
  double ring_ms = 0;  // the short ring's start to its last delivery
  double bulk_ms = 0;  // the bulk one's start to its last delivery
};

// One trial: `with_bulk` false runs the short ring alone; `whole`: round-
// robin turns of whole messages (a payload behind its header on a socket),
// else of 64 KiB slices.
Trial RunTrial(const Options& o, LinkOrder order, bool whole, bool with_bulk, std::mt19937_64& rng) {
  LinkArbiter nic(prism::BitsPerSecond(static_cast<uint64_t>(o.gbps * 1e9)),
                  prism::FromMicroseconds(static_cast<int64_t>(o.latency_us)), order);
  std::uniform_int_distribution<int64_t> jitter(0, static_cast<int64_t>(o.jitter_us * 1000));
  const int64_t spread = static_cast<int64_t>(o.spread_us * 1000);
  std::uniform_int_distribution<int64_t> offset(-spread, spread);
  const int64_t bulk_start = spread;  // both start after 0
  const int64_t ring_start = with_bulk ? bulk_start + offset(rng) : 0;

  struct Post {
    int64_t at;
    uint32_t conn;
    uint64_t bytes;
    bool operator>(const Post& p) const { return at > p.at; }
  };
  std::priority_queue<Post, std::vector<Post>, std::greater<Post>> posts;
  std::vector<uint32_t> bulk, ring;
  const uint64_t bulk_bytes = uint64_t(o.bulk_kib) << 10, ring_bytes = uint64_t(o.ring_kib) << 10;
  std::vector<int> bulk_left;  // per bulk connection: messages not yet posted
  for (int c = 0; with_bulk && c < o.bulk_channels; ++c) {
    bulk.push_back(nic.AddConnection(whole));
    const int first = std::min(o.window, o.bulk_messages);
    for (int w = 0; w < first; ++w) posts.push(Post{bulk_start + jitter(rng), bulk.back(), bulk_bytes});
    bulk_left.push_back(o.bulk_messages - first);
  }
  for (int c = 0; c < o.ring_channels; ++c) {
    ring.push_back(nic.AddConnection(whole));
    posts.push(Post{ring_start + jitter(rng), ring.back(), ring_bytes});
  }
  std::vector<int> ring_steps_left(ring.size(), o.ring_steps), bulk_done(bulk.size(), 0);
  std::vector<size_t> undecided(bulk.size() + ring.size(), 0);  // per connection id
  int64_t ring_end = 0, bulk_end = 0;
  const int64_t turnaround = static_cast<int64_t>(o.turnaround_us * 1000);
  int running = static_cast<int>(ring.size() + bulk.size());
  // A connection's times in posting order: those Post gave at once, then the arbiter's.
  std::vector<std::deque<LinkModel::Times>> at_once(bulk.size() + ring.size());
  auto next = [&](uint32_t conn, int64_t t) -> std::optional<LinkModel::Times> {
    if (at_once[conn].empty()) return nic.NextDecided(conn, Nanoseconds(t));
    const LinkModel::Times m = at_once[conn].front();
    at_once[conn].pop_front();
    return m;
  };
  for (int64_t t = 0; running > 0; t += 1000) {
    while (!posts.empty() && posts.top().at <= t) {
      const Post p = posts.top();
      posts.pop();
      if (const auto m = nic.Post(p.conn, Bytes(p.bytes), Nanoseconds(p.at))) at_once[p.conn].push_back(*m);
      ++undecided[p.conn];
    }
    for (size_t c = 0; c < bulk.size(); ++c) {
      while (undecided[bulk[c]] > 0) {
        const auto m = next(bulk[c], t);
        if (!m) break;
        --undecided[bulk[c]];
        if (bulk_left[c] > 0) {
          --bulk_left[c];
          posts.push(Post{m->wire_done.count() + jitter(rng), bulk[c], bulk_bytes});
        }
        if (++bulk_done[c] == o.bulk_messages) {
          bulk_end = std::max(bulk_end, m->deliver.count());
          --running;
        }
      }
    }
    for (size_t c = 0; c < ring.size(); ++c) {
      while (undecided[ring[c]] > 0) {
        const auto m = next(ring[c], t);
        if (!m) break;
        --undecided[ring[c]];
        if (--ring_steps_left[c] == 0) {
          ring_end = std::max(ring_end, m->deliver.count());
          --running;
        } else {
          posts.push(Post{m->deliver.count() + turnaround + jitter(rng), ring[c], ring_bytes});
        }
      }
    }
  }
  Trial r;
  r.ring_ms = static_cast<double>(ring_end - ring_start) / 1e6;
  r.bulk_ms = with_bulk ? static_cast<double>(bulk_end - bulk_start) / 1e6 : 0;
  return r;
}

void PrintRow(const char* name, std::vector<Trial> trials) {
  std::sort(trials.begin(), trials.end(), [](const Trial& a, const Trial& b) { return a.ring_ms < b.ring_ms; });
  double sum = 0, sq = 0, bulk = 0;
  for (const Trial& t : trials) {
    sum += t.ring_ms;
    sq += t.ring_ms * t.ring_ms;
    bulk += t.bulk_ms;
  }
  const double n = static_cast<double>(trials.size()), mean = sum / n;
  auto q = [&](double f) { return trials[std::min(trials.size() - 1, static_cast<size_t>(f * n))].ring_ms; };
  std::printf("%-22s %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %10.3f\n", name, mean, std::sqrt(std::max(0.0, sq / n - mean * mean)),
              q(0.1), q(0.5), q(0.9), trials.back().ring_ms, bulk / n);
}

bool Parse(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const double v = std::atof(argv[i + 1]);
    if (k == "--gbps") o->gbps = v;
    else if (k == "--latency-us") o->latency_us = v;
    else if (k == "--trials") o->trials = static_cast<int>(v);
    else if (k == "--bulk-channels") o->bulk_channels = static_cast<int>(v);
    else if (k == "--window") o->window = static_cast<int>(v);
    else if (k == "--bulk-kib") o->bulk_kib = static_cast<int>(v);
    else if (k == "--bulk-messages") o->bulk_messages = static_cast<int>(v);
    else if (k == "--spread-us") o->spread_us = v;
    else if (k == "--ring-channels") o->ring_channels = static_cast<int>(v);
    else if (k == "--ring-steps") o->ring_steps = static_cast<int>(v);
    else if (k == "--ring-kib") o->ring_kib = static_cast<int>(v);
    else if (k == "--turnaround-us") o->turnaround_us = v;
    else if (k == "--jitter-us") o->jitter_us = v;
    else if (k == "--seed") o->seed = static_cast<uint64_t>(v);
    else return false;
  }
  return argc % 2 == 1 && o->gbps > 0 && o->trials > 0 && o->ring_steps > 0 && o->ring_channels > 0 &&
         o->window > 0 && o->bulk_channels > 0 && o->bulk_messages > 0 && o->spread_us >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!Parse(argc, argv, &o)) {
    std::fprintf(stderr, "usage: link_order_bench [--gbps G] [--latency-us L] [--trials N] [--bulk-channels C] "
                         "[--window W] [--bulk-kib K] [--bulk-messages M] [--ring-channels C] [--ring-steps S] [--ring-kib K] "
                         "[--turnaround-us T] [--jitter-us J] [--spread-us S] [--seed S]\n");
    return 2;
  }
  std::printf("link_order_bench: %.2f Gbit/s + %.0f us; bulk: %d channel(s) x %d messages of %d KiB, %d in flight; "
              "short ring: %d channel(s) x %d steps of %d KiB, %.0f us turnaround, starting within %.0f us of the "
              "bulk; postings up to %.0f us late; %d trials\n\n",
              o.gbps, o.latency_us, o.bulk_channels, o.bulk_messages, o.bulk_kib, o.window, o.ring_channels,
              o.ring_steps, o.ring_kib, o.turnaround_us, o.spread_us, o.jitter_us, o.trials);
  std::printf("%-22s %8s %8s %8s %8s %8s %8s %10s\n", "NIC order", "mean ms", "sd", "p10", "median", "p90", "max",
              "bulk ms");
  std::mt19937_64 rng(o.seed);
  struct Row {
    const char* name;
    LinkOrder order;
    bool whole;
  };
  const Row rows[] = {{"posted", LinkOrder::kPosted, false},
                      {"round-robin, messages", LinkOrder::kRoundRobin, true},
                      {"round-robin, slices", LinkOrder::kRoundRobin, false}};
  std::vector<Trial> alone;
  for (int i = 0; i < o.trials; ++i) alone.push_back(RunTrial(o, LinkOrder::kPosted, false, false, rng));
  PrintRow("alone on the NIC", alone);
  for (const Row& row : rows) {
    std::vector<Trial> trials;
    for (int i = 0; i < o.trials; ++i) trials.push_back(RunTrial(o, row.order, row.whole, true, rng));
    PrintRow(row.name, trials);
  }
  return 0;
}
