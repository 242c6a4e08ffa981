// The replay engine's event rate against a bare 4-ary-heap loop doing the
// same number of events, measured side by side in one run.
//
//   engine_rate_bench [--rounds N]
// Replays a 1024-rank training graph (TP8 PP16 DP8, 24 microbatches, 6
// layers per stage; test/daemon_test_graphs.h) rank by rank (no equivalence
// classes), then runs a loop that pops and pushes the same number of events
// on a 4-ary heap of the engine's own Event records (EventQueue, the queue
// the engine itself used until 2026-12-02; it now uses InstantEventQueue,
// which pops in the same order), holding as many pending events as the
// engine's queue held on average (ReplayStats::pending_sum), each follow-up
// a pseudo-random 1..1024 ns later, and again holding only 16 (a heap that
// stays in L1: the yardstick at its fastest). Rounds
// alternate the two, each timed by the thread's CPU clock (the build host
// is shared: wall time would count other processes); prints each round's
// rates and the median ratio engine / heap (1.0 would be an engine that
// costs nothing beyond its heap).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <time.h>

#include "daemon/engine/event_queue.h"
#include "daemon/engine/network_model.h"
#include "daemon/engine/replay_engine.h"
#include "daemon/engine/world.h"
#include "test/daemon_test_graphs.h"

namespace {

double CpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Pops `events` events from a heap that holds `pending`, pushing one
// follow-up for each; returns events/s. The checksum keeps the loop honest.
double HeapRate(uint64_t events, uint32_t pending, uint64_t* checksum) {
  prism::engine::EventQueue q;
  q.Reserve(pending + 1);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  auto next = [&x] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
  };
  for (uint32_t a = 0; a < pending; ++a)
    q.Push(prism::engine::Event{prism::Nanoseconds(static_cast<int64_t>(next() & 1023)), a, 0, {}});
  const double t0 = CpuSeconds();
  for (uint64_t i = 0; i < events; ++i) {
    const prism::engine::Event e = q.BeginPop();
    *checksum += static_cast<uint64_t>(e.time.count());
    const prism::Nanoseconds later(1 + static_cast<int64_t>(next() & 1023));
    q.Push(prism::engine::Event{e.time + later, e.actor, e.op + 1, e.time});
    q.EndPop();
  }
  return static_cast<double>(events) / (CpuSeconds() - t0);
}

// A heap this shallow stays in L1: the yardstick at its fastest.
constexpr uint32_t kShallow = 16;

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
  prism::testing::TrainingSpec spec;
  spec.dp = 8;  // TP8 PP16 DP8 = 1024 ranks
  const prism::graph::Graph g = prism::testing::TrainingGraph(spec);
  const prism::engine::NetworkModel model(prism::engine::NetworkModel::LinkFiguresFromCluster(g.cluster()));
  prism::engine::WorldOptions wopts;
  wopts.use_classes = false;
  auto world = prism::engine::BuildWorld(g, model, wopts);
  if (!world.ok()) {
    std::fprintf(stderr, "world: %s\n", std::string(world.status().message()).c_str());
    return 1;
  }
  std::printf("engine: ReplayEngine, classes off, %zu actors, its own queue (InstantEventQueue); yardstick: a bare loop "
              "that pops one event and pushes one on a 4-ary heap (EventQueue) of the same %zu-byte Event records, as "
              "many events as the engine handled; CPU time of this thread\n",
              world->actors.size(), sizeof(prism::engine::Event));
  std::vector<double> ratios, shallow_ratios;
  uint64_t checksum = 0;
  for (int round = 0; round < rounds; ++round) {
    prism::engine::ReplayEngine engine(*world, model, prism::engine::EngineOptions{});
    const double t0 = CpuSeconds();
    if (auto s = engine.Run(nullptr, nullptr); !s.ok()) {
      std::fprintf(stderr, "replay: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    const double engine_s = CpuSeconds() - t0;
    const uint64_t events = engine.stats().events;
    const double engine_rate = static_cast<double>(events) / engine_s;
    // As deep a heap as the engine's was on average while it ran.
    const uint32_t pending = static_cast<uint32_t>(std::max<uint64_t>(1, engine.stats().pending_sum / events));
    const double heap_rate = HeapRate(events, pending, &checksum);
    const double shallow_rate = HeapRate(events, kShallow, &checksum);
    ratios.push_back(engine_rate / heap_rate);
    shallow_ratios.push_back(engine_rate / shallow_rate);
    std::printf("round %d: %llu events; engine %.1f ms CPU per simulated iteration, %.2f M events/s; bare 4-ary heap: %u pending %.2f M events/s "
                "(ratio %.3f), %u pending %.2f M events/s (ratio %.3f)\n",
                round, static_cast<unsigned long long>(events),
                1e3 * engine_s / static_cast<double>(engine.stats().iteration_end.size()), engine_rate / 1e6, pending, heap_rate / 1e6,
                engine_rate / heap_rate, kShallow, shallow_rate / 1e6, engine_rate / shallow_rate);
  }
  std::sort(ratios.begin(), ratios.end());
  std::sort(shallow_ratios.begin(), shallow_ratios.end());
  std::printf("median ratio engine/heap over %d rounds: %.3f at the engine's mean queue length, %.3f at %u pending "
              "(checksum %llu)\n",
              rounds, ratios[ratios.size() / 2], shallow_ratios[ratios.size() / 2], kShallow,
              static_cast<unsigned long long>(checksum % 1000));
  return 0;
}
