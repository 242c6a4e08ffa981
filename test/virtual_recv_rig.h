// Everything a VirtualRecvComm / VirtualSendComm needs besides NCCL and
// prismd, for tests and benchmarks that drive them on the CPU: settings, a
// logger, the NIC links, the schedule book and a DaemonSession that never
// connects (events stay queued; schedules are put into `book` by hand);
// VirtualRecvRig adds an OpTracker fed by FakeNccl (NCCL's profiler front end).
#ifndef PRISM_TEST_VIRTUAL_RECV_RIG_H_
#define PRISM_TEST_VIRTUAL_RECV_RIG_H_

#include <cstdint>
#include <memory>

#include "plugin/comm.h"
#include "plugin/daemon_session.h"
#include "plugin/op_schedules.h"
#include "plugin/op_tracker.h"
#include "test/plugin_fake_nccl.h"

namespace prism::test {

// Counts finished operations and keeps the last one's summary.
class LastFinished final : public plugin::OpListener {
 public:
  void OnOpStarted(const plugin::OpInfo& info) override {}
  void OnOpFinished(const plugin::OpInfo& info, const plugin::OpSummary& summary) override {
    ++count;
    last = summary;
  }
  int count = 0;
  plugin::OpSummary last;
};

// The plugin's process-wide services for comms driven by hand: the NIC's
// links run at `link_bits_per_second` with `link_latency_ns`.
struct VirtualCommEnv {
  VirtualCommEnv(const plugin::Settings& s, uint64_t link_bits_per_second, int64_t link_latency_ns)
      : settings(s), nics(1, link_bits_per_second, link_latency_ns) {
    env.settings = &settings;
    env.logger = &logger;
    env.nics = &nics;
    env.schedules = &book;
    session = std::make_shared<plugin::DaemonSession>(env, 0);
  }
  plugin::Settings settings;
  plugin::Logger logger;
  plugin::NicLinks nics;
  plugin::OpScheduleBook book;
  plugin::CommEnv env;
  std::shared_ptr<plugin::DaemonSession> session;
};

// The same with tags from FakeNccl: this process is rank `rank` of a
// communicator of `nranks` (hash `comm_hash`). Links test/plugin_fake_nccl.cc.
struct VirtualRecvRig : VirtualCommEnv {
  VirtualRecvRig(const plugin::Settings& s, uint64_t link_bits_per_second, int64_t link_latency_ns,
                 uint64_t comm_hash, int nranks, int rank)
      : VirtualCommEnv(s, link_bits_per_second, link_latency_ns),
        tracker(&listener),
        nccl(&tracker, comm_hash, nranks, rank) {}
  LastFinished listener;
  plugin::OpTracker tracker;
  FakeNccl nccl;
};

}  // namespace prism::test

#endif  // PRISM_TEST_VIRTUAL_RECV_RIG_H_
