// The wait warning of a virtual receive (VirtualRecvComm::WarnWaiting): what
// the receive waits for, in words a user can act on. Diagnostics only: no
// timing is decided here.
#include <algorithm>
#include <optional>
#include <string>

#include "plugin/clock.h"
#include "plugin/virtual_comms.h"

namespace prism::plugin {
namespace {

// An operation as NCCL ran it, for warnings: "RING/LL, 228 bytes, 1
// channel(s), comm rank 0 of 8".
std::string DescribeOp(const OpInfo& info) {
  return (info.algo_name.empty() ? std::string("?") : info.algo_name) + "/" +
         (info.proto_name.empty() ? std::string("?") : info.proto_name) + ", " + std::to_string(info.bytes) +
         " bytes, " + std::to_string(info.channels) + " channel(s), comm rank " + std::to_string(info.comm_rank) +
         " of " + std::to_string(info.comm_size);
}

}  // namespace

// What a mirrored receive's wait says about how far this rank got: its own
// last send of the operation on the channel (NCCL's kernel posts a ring
// step's send once it has read the step before) and the last receive this
// connection filled with LL/LL128 lines (too few lines, or another
// connection step's flags, leave the kernel polling).
std::string VirtualRecvComm::MirrorProgress(const Slot& slot) const {
  const int32_t sent = slot.op.op->LastSendStep(slot.op.channel);
  std::string out = "this rank's last send of the operation on channel " + std::to_string(slot.op.channel) + ": " +
                    (sent >= 0 ? "step " + std::to_string(sent) : std::string("none"));
  if (last_fill_.op_step < 0) return out + "; no LL/LL128 receive filled on this connection yet";
  return out + "; the last LL/LL128 receive filled on this connection: receive " + std::to_string(last_fill_.seq) +
         " (step " + std::to_string(last_fill_.op_step) + ", connection step " + std::to_string(last_fill_.conn_step) +
         ", flag " + std::to_string(last_fill_.conn_step + 1) + "): " + std::to_string(last_fill_.line_bytes) +
         " bytes of lines for an own send of " + std::to_string(last_fill_.own_bytes) + " bytes";
}

void VirtualRecvComm::WarnWaiting(const RecvRequest& req, const Slot& slot) {
  if (warned_waiting_ || !slot.op.valid()) return;
  warned_waiting_ = true;
  const OpInfo& info = slot.op.op->info();
  const std::string what = "receive " + std::to_string(slot.seq) + " of operation comm " +
                           std::to_string(info.comm_hash) + " kind " + std::to_string(static_cast<int>(info.kind)) +
                           " seq " + std::to_string(info.seq) + " (channel " + std::to_string(slot.op.channel) +
                           ", step " + std::to_string(slot.op.step) + ", peer " + std::to_string(info.peer) + "; " +
                           DescribeOp(info) + ")";
  const long long waited_ms = static_cast<long long>((WallNowNs() - req.waiting_since) / 1000000);
  // A ring receive waits for this rank's own send of the same step, a PAT
  // receive for its own send of the same dimension and step; either goes
  // through the plugin only when its peer is on another NCCL host. Any
  // other receive waits for prismd's schedule.
  const std::optional<OpSchedule> sched = env_.schedules->Get(OpKey::Of(info));
  const bool held = sched && sched->hold;
  const bool mirrored = !held && (sched || !env_.settings->ring_waits_for_schedule);
  const int dim = PatDimensionOf(slot.op);
  const char* kHostHint = "; if two real ranks share an NCCL host (same NCCL_HOSTID) that send does not use the "
                          "plugin: give each real rank its own NCCL_HOSTID, as `prism run` does";
  std::string why = held ? "for its virtual members to reach the operation in prismd's engine (prismd holds it: "
                           "the real rank is ahead of them; see prismd's /status)"
                         : "for prismd's schedule (is prismd's engine behind, or is this operation missing from "
                           "the graph? see prismd's log)";
  if (std::optional<OpSchedule> f = sched; f && !env_.schedules->ResolveAfter(&*f)) {
    why = "for this rank's end of its operation seq " + std::to_string(f->after.seq) + " (prismd's forecast)";
  } else if (mirrored && info.mirror_kind()) {
    why = std::string("for this rank's own send of the same ring step") + kHostHint + "; " + MirrorProgress(slot);
  } else if (mirrored && dim >= 0) {
    const int n = std::max(1, info.comm_size);
    const int delta = (1 << dim) % n;  // an all-gather sends to rank - 2^d, a reduce-scatter to rank + 2^d
    const int to = info.kind == OpKind::kAllGather ? (info.comm_rank - delta + n) % n : (info.comm_rank + delta) % n;
    why = "for this rank's own send on PAT dimension " + std::to_string(dim) + " (to rank " + std::to_string(to) +
          "), step " + std::to_string(slot.op.step) + kHostHint;
  }
  PRISM_WARN(*env_.logger, "%s on virtual connection %llx has waited %lld ms %s", what.c_str(),
             static_cast<unsigned long long>(conn_id_), waited_ms, why.c_str());
}

}  // namespace prism::plugin
