// Capture recordings (docs/capture.md) from the session recording of a
// prismd --follow run (session_recorder.h): what each real rank did, with no
// graph of the program.
//
// Per real rank:
//  * communicators: those prismd saw (the world and the groups the
//    bootstrap followed, named group<k>[<first>] with k the rank's new_group
//    number), completed to every group of the target: a followed group of
//    ranks {b, b+s, ..., b+(n-1)s} stands for its family, the ranges of that
//    shape that tile the world (b' = q*s*n + j, j < s), listed by lowest
//    rank (a second group of the same ranks starts a family of its own);
//    communicator k is the program's new_group #k: families are placed one
//    after the other, or interleaved with families of as many groups
//    (Megatron's pp[i], embd[i]), so that every followed group lands on its
//    own number, else the capture is refused. Every recording holds the
//    same list;
//  * operations: the rank's NCCL operations in enqueue order (kind, size in
//    the graph's full-buffer convention, communicator, absolute peer). An
//    iteration is the shortest period from which the sequence repeats over
//    at least half of it and twice; the ops before it (warm-up) and after
//    the last whole period are left out. Sends and receives that were in
//    flight together (one started before the other ended, in most
//    iterations) form one group (group_start/group_end);
//  * compute: before each operation, a compute op of the mean time from the
//    previous operation's end to this one's start on the GPU (its first send
//    posted; for an operation that sent nothing, its enqueue), over the
//    iterations after `skip_iterations` (those where the previous operation
//    reported an end: an operation none of whose transfers went through the
//    plugin, e.g. between real ranks over NVLink, has none); none where
//    that mean is 0 or nothing was measured.
// With the real ranks' torch traces (torch_trace.h), also: the program's
// call order, the streams and dependencies its waits make, batches as
// groups, dtypes and memory (follow_program.h). Without them, assumed: one
// stream (a communication that overlapped compute is serialised with it,
// compute hidden under a communication is not seen), no memory
// (static and per-op memory 0). Pure function; thread-safe.
#ifndef PRISM_DAEMON_HYBRID_FOLLOW_CAPTURE_H_
#define PRISM_DAEMON_HYBRID_FOLLOW_CAPTURE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/hybrid/session_recorder.h"
#include "daemon/hybrid/torch_trace.h"
#include "graphgen/capture_recording.h"

namespace prism::daemon {

struct FollowCapture {
  std::vector<graphgen::Recording> recordings;  // one per real rank that reported operations
  std::vector<std::string> summary;             // one line per rank: iterations, ops, compute
};

// InvalidArgument, naming the cause, when the recording is not of a
// --follow run, a rank's operations do not repeat, or the groups cannot be
// completed (see above).
// `torch` (nullable): the real ranks' torch traces by rank (torch_trace.h);
// a rank with one gets its order, streams, dependencies, groups and memory
// from it (follow_program.h).
absl::StatusOr<FollowCapture> CaptureFromFollow(const Recording& recording, uint64_t skip_iterations,
                                                const std::map<uint32_t, TorchTrace>* torch = nullptr);

// What CaptureFromFollow reads of `recording`, and nothing else: its header,
// its communicator lines, and of its event lines only the operations' starts
// and ends (OpStarted, OpFinished; not the transfers' Posted/Completed nor
// the connections'), a line left with no event dropped; no schedule line. A
// capture of the result equals a capture of `recording` (a recording of a
// 1024-rank run shrinks from tens of megabytes to well under one: a test
// fixture; prism-session-capture --slim). Pure function; thread-safe.
Recording FollowCaptureInput(const Recording& recording);

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_HYBRID_FOLLOW_CAPTURE_H_
