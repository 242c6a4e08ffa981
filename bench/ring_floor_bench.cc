// ring_floor_bench: the ring's lockstep floor (plugin/arrival.h, RingFloor)
// against a real rank whose own step time varies around the model's. One
// channel of a ring of `--members` members; the real rank's receive of step
// s is timed by ResolveArrival (MIRROR, its own send of step s plus L, held
// by the floor) and its send of step s+1 leaves `own step` after that
// receive, less L (so without a floor each step costs the rank its own
// step). Prints, per distribution of the own step and per PRISM_RING_FLOOR
// mode, the ring's end against the model's (the floor of the last step),
// the mean over `--trials` rings. Pure arithmetic: no clock, no plugin.
// "test() lateness" adds to each step the spread of how late the GPU host's
// NCCL noticed its receives (kLateByTest), the step's mean unchanged.
//
//   ring_floor_bench [--members 2048] [--kb 16.8] [--gbps 10] [--latency-us 10]
//                    [--step-cost-us 12.5] [--all-reduce] [--trials 200]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "plugin/arrival.h"

namespace {

using prism::BitsPerSecond;
using prism::Nanoseconds;
using prism::plugin::ArrivalForm;
using prism::plugin::ArrivalInput;
using prism::plugin::ResolveArrival;

struct Options {
  uint64_t members = 2048;
  double kb = 16.8;  // NCCL's bytes per rank (all-gather, reduce-scatter) or in all (all-reduce), KB
  double gbps = 10;
  double latency_us = 10;
  double step_cost_us = 12.5;
  bool all_reduce = false;
  int trials = 200;
};

// How the real rank's own step (receive to receive without a floor) is drawn,
// relative to the model's step d = W/(2h) + L + c.
struct Spread {
  const char* name;
  double mean;     // x d
  double uniform;  // +- this fraction of d, uniform
  double stall_p;  // a stall of stall_us with this probability (the mean kept)
  double stall_us;
  bool late_hist = false;  // add two draws (a Simple step's two receives) of kLateByTest, the mean kept
};

// How late NCCL's test() saw the real rank's receives from virtual peers in
// the 8192-rank train_gpt.py run of 2026-12-02 (rank 5, bundle of main
// ed475b3, prismd's prism_hybrid_receive_late_seconds{cause="test"}):
// upper bound of each bucket in us and its count; a draw is uniform in its
// bucket (the first from 0). 575,894 receives, 0.628 s in all.
struct LateBucket {
  double upper_us;
  double count;
};
constexpr LateBucket kLateByTest[] = {{10, 570373}, {50, 4781}, {100, 154}, {500, 585}, {1000, 1}};

double DrawLateUs(std::mt19937_64& rng) {
  double total = 0;
  for (const LateBucket& b : kLateByTest) total += b.count;
  std::uniform_real_distribution<double> u(0, 1);
  double x = u(rng) * total, lower = 0;
  for (const LateBucket& b : kLateByTest) {
    if (x < b.count) return lower + u(rng) * (b.upper_us - lower);
    x -= b.count;
    lower = b.upper_us;
  }
  return lower;
}

double MeanLateUs() {
  double total = 0, sum = 0, lower = 0;
  for (const LateBucket& b : kLateByTest) {
    total += b.count;
    sum += b.count * (lower + b.upper_us) / 2;
    lower = b.upper_us;
  }
  return sum / total;
}

struct Ring {
  double end_over_model_us;  // mean ring end minus the model's
  double model_us;           // the model's ring time (from the ring's start)
};

Ring Play(const Options& o, const Spread& sp, bool end_mode, uint32_t seed) {
  const BitsPerSecond bw(static_cast<int64_t>(o.gbps * 1e9));
  const Nanoseconds latency(static_cast<int64_t>(o.latency_us * 1e3));
  const Nanoseconds cost(static_cast<int64_t>(o.step_cost_us * 1e3));
  const uint64_t bytes = static_cast<uint64_t>(o.kb * 1e3);
  const Nanoseconds step_wire = prism::plugin::RingStepWireOf(o.all_reduce, bytes, o.members, bw);
  const uint32_t last = prism::plugin::RingLastStep(o.all_reduce, o.members);
  const double d = static_cast<double>(step_wire.count() / 2 + (latency + cost).count());
  const Nanoseconds start(1'000'000'000);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1), p01(0, 1);
  double sum = 0, model = 0;
  for (int t = 0; t < o.trials; ++t) {
    Nanoseconds recv_done = start, wire_end(0);
    ArrivalInput in;
    in.form = ArrivalForm::kMirror;
    in.link = {bw, latency};
    in.ring_start = start;
    in.step_cost = cost;
    in.step_wire = step_wire;
    in.ring_floor_from = end_mode ? last : 0;
    for (uint32_t s = 0; s <= last; ++s) {
      double own = sp.mean * d * (1 + sp.uniform * u(rng)) - sp.stall_p * sp.stall_us * 1e3;
      if (sp.stall_p > 0 && p01(rng) < sp.stall_p) own += sp.stall_us * 1e3;
      if (sp.late_hist) own += (DrawLateUs(rng) + DrawLateUs(rng) - 2 * MeanLateUs()) * 1e3;
      in.ring_step = s;
      in.own_send_done = recv_done + Nanoseconds(static_cast<int64_t>(std::max(0.0, own))) - latency;
      if (s == 0) in.own_send_done = start + Nanoseconds(static_cast<int64_t>(std::max(0.0, own))) - latency;
      const prism::plugin::Arrival a = ResolveArrival(in, wire_end);
      recv_done = a.done, wire_end = a.wire_end;
    }
    in.ring_step = last;
    const Nanoseconds model_end = prism::plugin::RingFloor(in);
    sum += static_cast<double>((recv_done - model_end).count()) / 1e3;
    model = static_cast<double>((model_end - start).count()) / 1e3;
  }
  return {sum / o.trials, model};
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::atof(argv[++i]) : 0.0; };
    if (a == "--members") o.members = static_cast<uint64_t>(next());
    else if (a == "--kb") o.kb = next();
    else if (a == "--gbps") o.gbps = next();
    else if (a == "--latency-us") o.latency_us = next();
    else if (a == "--step-cost-us") o.step_cost_us = next();
    else if (a == "--all-reduce") o.all_reduce = true;
    else if (a == "--trials") o.trials = static_cast<int>(next());
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  const Spread spreads[] = {
      {"at the model, exact", 1.0, 0, 0, 0},      {"at the model, +-10%", 1.0, 0.1, 0, 0},
      {"at the model, +-50%", 1.0, 0.5, 0, 0},    {"at the model, 1% stalls of 1 ms", 1.0, 0, 0.01, 1000},
      {"5% under, +-50%", 0.95, 0.5, 0, 0},       {"5% under, 1% stalls of 1 ms", 0.95, 0, 0.01, 1000},
      {"5% over, exact", 1.05, 0, 0, 0},          {"5% over, +-50%", 1.05, 0.5, 0, 0},
      {"half the model (LL empty steps)", 0.5, 0, 0, 0},
      {"at the model + test() lateness", 1.0, 0, 0, 0, true},
      {"at the model, +-50% + test() late", 1.0, 0.5, 0, 0, true},
  };
  std::printf("ring of %llu members, %s, %.1f KB, %.1f Gbit/s + %.1f us, c = %.2f us, %d trials\n",
              static_cast<unsigned long long>(o.members), o.all_reduce ? "all-reduce" : "all-gather/reduce-scatter",
              o.kb, o.gbps, o.latency_us, o.step_cost_us, o.trials);
  std::printf("%-34s %12s %14s %8s %14s %8s\n", "own step", "model us", "model: end-", "%", "end: end-", "%");
  for (const Spread& sp : spreads) {
    const Ring m = Play(o, sp, false, 1);
    const Ring e = Play(o, sp, true, 1);
    std::printf("%-34s %12.1f %14.1f %+7.2f%% %14.1f %+7.2f%%\n", sp.name, m.model_us, m.end_over_model_us,
                100 * m.end_over_model_us / m.model_us, e.end_over_model_us, 100 * e.end_over_model_us / e.model_us);
  }
  return 0;
}
