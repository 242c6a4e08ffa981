// pat_hybrid_bench: a real rank's PAT all-gather and reduce-scatter in a
// hybrid run, every peer virtual, on the CPU (test/pat_stand_in.h: the
// rank's NCCL sends its messages in the model's order, its receives timed
// by the plugin's PAT rule), against prismd's play of the same operation.
//
//   pat_hybrid_bench [--ranks 8192] [--bytes 64M] [--gbps 100] [--latency-us 5]
//                    [--step-cost-us 12.5] [--channels 2] [--late-us 1000]
//
// One row per operation, order of the real rank's sends (the play's, or its
// own: test/pat_stand_in.h, PatStandIn::own_order), real rank's own cost per
// message (0, c/2, c, 2c, with c the model's step cost) and members' lateness
// (0, --late-us): the
// model's time (lateness + play), the stand-in's without and with PAT's
// floor (PRISM_RING_LOCKSTEP=0 / 1), and the largest amount by which a
// receive completed before the model's arrival of its message.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "test/pat_stand_in.h"

namespace {

uint64_t ParseBytes(const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  const std::string unit(end);
  const double scale = unit == "K" ? 1024.0 : unit == "M" ? 1048576.0 : unit == "G" ? 1073741824.0 : 1.0;
  return static_cast<uint64_t>(x * scale);
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t ranks = 8192, channels = 2;
  uint64_t bytes = 64ull << 20;
  double gbps = 100, latency_us = 5, step_cost_us = 12.5, late_us = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--ranks") ranks = static_cast<uint32_t>(std::atoi(value.c_str()));
    else if (flag == "--bytes") bytes = ParseBytes(value);
    else if (flag == "--gbps") gbps = std::atof(value.c_str());
    else if (flag == "--latency-us") latency_us = std::atof(value.c_str());
    else if (flag == "--step-cost-us") step_cost_us = std::atof(value.c_str());
    else if (flag == "--channels") channels = static_cast<uint32_t>(std::atoi(value.c_str()));
    else if (flag == "--late-us") late_us = std::atof(value.c_str());
    else {
      std::fprintf(stderr, "pat_hybrid_bench: unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  const auto ns = [](double us) { return prism::Nanoseconds(static_cast<int64_t>(us * 1000.0 + 0.5)); };
  std::printf("PAT over %u ranks, %llu bytes, %.1f Gbit/s + %.1f us, model step cost %.1f us, %u channels\n", ranks,
              static_cast<unsigned long long>(bytes), gbps, latency_us, step_cost_us, channels);
  std::printf("%-13s %5s %8s %8s %8s %12s %12s %8s %12s %8s %10s\n", "op", "order", "real c", "late", "msgs", "model us",
              "no floor us", "diff", "floor us", "diff", "early us");
  const std::pair<bool, bool> kinds[] = {{true, false}, {true, true}, {false, false}, {false, true}};
  for (const auto& [all_gather, own_order] : kinds) {
    for (const double real_c : {0.0, step_cost_us / 2, step_cost_us, 2 * step_cost_us}) {
      for (const double late : {0.0, late_us}) {
        prism::testing::PatStandIn p;
        p.model = prism::PatShape{all_gather, ranks, prism::Bytes(bytes), channels,
                                  prism::BitsPerSecond(static_cast<uint64_t>(gbps * 1e9)), ns(latency_us + step_cost_us)};
        p.link_latency = ns(latency_us);
        p.real_step_cost = ns(real_c);
        p.members_late = ns(late);
        p.own_order = own_order;
        p.floor = false;
        const auto open = prism::testing::PlayPatStandIn(p);
        p.floor = true;
        const auto floored = prism::testing::PlayPatStandIn(p);
        if (!open || !floored) {
          std::printf("%-13s too many messages to play\n", all_gather ? "allgather" : "reducescatter");
          return 1;
        }
        const double model = open->model_end.microseconds();
        std::printf("%-13s %5s %8.1f %8.0f %8llu %12.1f %12.1f %+7.2f%% %12.1f %+7.2f%% %10.1f\n",
                    all_gather ? "allgather" : "reducescatter", own_order ? "own" : "play", real_c, late,
                    static_cast<unsigned long long>(open->messages), model, open->end.microseconds(),
                    100.0 * (open->end.microseconds() / model - 1.0), floored->end.microseconds(),
                    100.0 * (floored->end.microseconds() / model - 1.0), open->worst_early.microseconds());
      }
    }
  }
  return 0;
}
