// One real rank's program from what a prismd --follow run saw of it
// (follow_capture.h): its NCCL operations as the plugin reported them, and,
// when the rank ran under prism capture's torch trace (torch_trace.h), the
// torch.distributed call each operation came from.
//
// With the calls:
//  * order: call order (the plugin's enqueue times do not order a batch's
//    sends and receives as the program listed them);
//  * groups: a batch_isend_irecv of two or more operations is one
//    group_start/group_end;
//  * streams: an operation the program waited for before its next call
//    (async_op False, or work.wait() at once), with no earlier one of its
//    process group still unwaited, is on stream 0 with the compute; one it
//    waited for later (or queued behind one) overlaps what the program did in
//    between: it is on a stream of its process group (1, 2, ... in order of
//    first use), depends on the stream-0 op before it (PyTorch's NCCL
//    stream waits for the compute stream at each call; left out when the
//    previous op of its stream already comes after that op), and the first
//    stream-0 op after its work.wait() depends on it; a call made on a side
//    CUDA stream (FSDP2's) is on its group's stream too, and where the
//    compute stream waited for it is read from the times (follow_program.cc,
//    InferSideStreamWaits and SameStreamWaits); last, an operation on a
//    communicator that has operations on another stream goes on that stream
//    (one stream per communicator: NCCL runs a communicator's operations in
//    issue order, and prismd pairs a real rank's by stream; a program that
//    crossed streams on one communicator stalled a refine round), the
//    stream-0 work after it waiting for it (OneStreamPerCommunicator);
//  * compute: on stream 0, the GPU time between stream-0 operations (from
//    the previous one's end, or the end of the operations it waited for, to
//    the next start), cut where an operation of another stream started in
//    between (unless, in most iterations, that one started within 50 us of
//    the end of the one before it on its stream: then its stream held it,
//    and the time goes to the next cut; an iteration where it was held
//    against the rule measures nothing up to the next stream-0 op). The
//    iteration's first compute runs from the end of the operations the
//    previous iteration waited for at its end (the graph's 0 us op waits for
//    them), not from its last stream-0 op;
//  * memory: the allocator's allocated bytes at each call, averaged over
//    the iterations measured: the program starts the iteration with the
//    allocation at its last call (static memory), and the compute op before
//    each operation allocates or frees the change since the previous call
//    (a change with no compute op before its operation goes to the next
//    compute op). Peak: the allocator's peak allocation seen.
// Without them: one stream in enqueue order, no memory, groups of sends and
// receives in flight together (follow_capture.h).
//
// Pure functions; thread-safe.
#ifndef PRISM_DAEMON_HYBRID_FOLLOW_PROGRAM_H_
#define PRISM_DAEMON_HYBRID_FOLLOW_PROGRAM_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "daemon/hybrid/torch_trace.h"
#include "proto/graph.pb.h"
#include "proto/prism_service.pb.h"

namespace prism::daemon {

// One NCCL operation of a real rank as its plugin reported it.
struct SeenOp {
  rpc::OpKind kind = rpc::OP_KIND_UNSPECIFIED;
  uint32_t comm = 0;       // capture communicator id
  uint64_t bytes = 0;      // the graph's convention
  int32_t peer = -1;       // send/recv: rank in the communicator's sorted members
  int32_t root = -1;
  uint64_t at = 0, first_send = 0, end = 0;
  const TorchCall* call = nullptr;  // the torch.distributed call it came from (torch trace), if known
  bool shared = false;     // another real rank is in its communicator (its time may include waiting for it)
  bool SameOp(const SeenOp& o) const {
    return kind == o.kind && comm == o.comm && bytes == o.bytes && peer == o.peer && root == o.root;
  }
  bool PointToPoint() const { return kind == rpc::OP_SEND || kind == rpc::OP_RECV; }
  uint64_t GpuStart() const { return first_send != 0 ? first_send : at; }
};

// The shortest period from which `ops` repeat over at least half of them and
// twice: (first op, period); nullopt when they do not.
std::optional<std::pair<size_t, size_t>> RepeatingPeriod(const std::vector<SeenOp>& ops);

// Gives each op the call of `trace` it came from: the n-th operation of a
// kind (and peer) on a communicator is the n-th such call on the process
// group of the same members (groups of the same members, such as Megatron's
// pipeline and embedding groups, are told apart by their operations).
// `comms`: the capture's communicators (id = index). Returns how many ops
// got a call.
size_t MatchTorchCalls(std::vector<SeenOp>& ops, const TorchTrace& trace,
                       const std::vector<graph::Communicator>& comms);

// The collectives of `ops` before `first` (the start-up, before the first
// repeating iteration), as graph ops with comm_slot = capture communicator id;
// sends and receives there are left out (Program.startup_ops holds
// collectives).
std::vector<graph::Op> StartupOps(const std::vector<SeenOp>& ops, size_t first);

struct FollowProgram {
  std::vector<graph::Op> ops;   // one iteration, comm_slot = capture communicator id
  uint64_t iterations = 0;      // whole periods seen
  uint64_t compute_ns = 0;      // per iteration
  uint64_t steady_iteration_ns = 0;  // mean enqueue time from one period's first op to the next's (measured ones)
  uint32_t streams = 1;
  uint64_t dependencies = 0;
  std::optional<uint64_t> static_memory_bytes, peak_memory_bytes;  // with allocator figures
};

// One iteration of `ops` (from `first`, `period` long; at least two
// periods), compute measured over the iterations from max(skip, 1). A
// collective whose communicator has no other real rank carries its own pace
// (CollectiveOp.measured_ns): the mean of its first send to its end over
// those iterations where its transfers overlapped no neighbour's; virtual peers mirror at once in a follow run, so that is
// the real rank's NCCL alone.
FollowProgram BuildFollowProgram(const std::vector<SeenOp>& ops, size_t first, size_t period, uint64_t skip);

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_HYBRID_FOLLOW_PROGRAM_H_
