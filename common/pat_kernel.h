// NCCL's PAT kernel walked in its own order (docs/network-model.md, "PAT's
// kernel"): the time of a PAT all-gather or reduce-scatter (one rank per
// node) as NCCL 2.28.9's GPU runs it, which is what prismd's model plays
// where it charges NCCL's step cost.
//
// How the kernel runs (NCCL v2.28.9-1 src/device/all_gather.h and
// reduce_scatter.h, PAT; src/include/collectives.h, PatAGAlgorithm and
// PatRSAlgorithm; src/device/prims_simple.h, patCopy and patReduce; read,
// not copied): one thread computes a list of steps; each step copies (or
// reduces) one piece, from this rank's input or a received message on one
// dimension, into its output or a message it sends on another dimension.
// Pieces are aggregated: a message on a connection is posted to NCCL's
// proxy by the step that fills it last ("post send"), a received message is
// freed by the step that reads it last ("post receive"). The workers run
// the list in rounds of `parallel` steps (the parallel factor, at most 16
// groups of warps): a round waits until every step's received message has
// arrived and every step's send slot is free (a connection holds
// NCCL_STEPS = 8 messages in flight), copies, posts, and only then does the
// next round begin. A skipped step (a placeholder the list pads rounds with)
// takes its round too.
//
// Timing: every rank runs the same list shifted by its rank, so the k-th
// message this rank receives on dimension d left its sender when this rank
// sent its own k-th message on d (the mirror, common/pat_schedule.h). A
// posted message leaves the NIC after the messages posted before it, at
// bandwidth / channels (each channel carries 1/channels of the data; the
// channels run the same list side by side); it arrives step_latency (the
// link's latency plus NCCL's cost per PAT hop, PatStepCost) after it left
// the wire; its slot is free again once it has left the wire (the net
// transport's send completes). Each round costs `round` on the GPU
// (kNcclPatRoundAllGather / kNcclPatRoundReduceScatter). The operation ends
// when the last round ends.
//
// Closed forms (w = one message's wire time, l = step latency, r = round,
// 64 KiB pieces, one loop, no aggregation, one channel): n = 2: one round
// sends, one receives: r + w + l + r.
//
// Not modelled: the receiver's own pace feeding back through NCCL's credits
// (a slot frees when the send completes, as the plugin completes it), the
// copy's dependence on the piece's size (the round cost was measured with
// 4 KiB pieces over 8192 ranks and holds for the 64 KiB pieces of the 8 and
// 16 rank truths), NCCL's proxy pass over the operation's connections
// beyond the per-hop cost.
// Pure functions; thread-safe.
#ifndef PRISM_COMMON_PAT_KERNEL_H_
#define PRISM_COMMON_PAT_KERNEL_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "common/pat_schedule.h"
#include "common/units.h"

namespace prism {

// One step of NCCL's PAT list (one channel).
struct PatKernelStep {
  int8_t recv_dim = -1;      // the dimension it reads a received message from; -1: this rank's input
  int8_t send_dim = -1;      // the dimension it writes a message for; -1: this rank's output
  bool post_recv = false;    // it frees the received message (the connection's next one)
  bool post_send = false;    // it hands the message it wrote to the proxy
  bool skipped = false;      // a placeholder: it moves nothing, but takes its round
  uint32_t slot_ahead = 0;   // messages past the connection's current one where its data lies
                             // (the received one for all-gather, the sent one for reduce-scatter)
  uint32_t message_bytes = 0;  // post_send: the bytes of the message it posts
};

// NCCL's list for one channel and what runs it.
struct PatKernelProgram {
  uint32_t parallel = 1;  // steps per round (NCCL's parallel factor)
  std::vector<PatKernelStep> steps;
};

// The list of `op`'s kernel (any rank's: the list does not depend on the
// rank); empty for one rank or past kMaxPlayedPatSteps.
PatKernelProgram PatKernelSteps(const PatShape& op);

// Largest list the walk handles; beyond it PlayPatKernel returns nullopt.
inline constexpr uint64_t kMaxPlayedPatSteps = 16'000'000;

// NCCL's GPU time per round of the list (the parallel steps' copy or
// reduce of one piece each, between two barriers of the kernel's workers):
// measured 2026-12-03 on the GPU host (one H200, NCCL 2.28.9, a real rank's
// PAT over 8192 ranks, 64 MiB: 4 KiB pieces, 16 per round, 8 rounds per
// 512 KiB message), from the spacing of the kernel's frees of a
// connection's slots: 64.0 us per message for the all-gather, 92.9 us for
// the reduce-scatter (docs/timing.md, "PAT's floor and late members").
inline constexpr Nanoseconds kNcclPatRoundAllGather{8'000};
inline constexpr Nanoseconds kNcclPatRoundReduceScatter{11'600};

inline Nanoseconds PatRoundCost(bool all_gather) {
  return all_gather ? kNcclPatRoundAllGather : kNcclPatRoundReduceScatter;
}

// The walk (file comment): when the operation ends, from the moment every
// rank arrived; nullopt for a list past kMaxPlayedPatSteps. One rank: 0.
std::optional<Nanoseconds> PlayPatKernel(const PatShape& op, Nanoseconds round);

// The walk with its messages: `end` as PlayPatKernel, `sent[d][k]` when the
// k-th message on dimension d left the wire (NCCL's order, so its twin, the
// k-th message this rank receives on d, left its sender then too), and
// `earliest` the same as `sent`: in NCCL's own order the model's time for a
// message is the earliest the plugin's PAT floor lets it arrive
// (plugin/arrival.h, PatFloor). nullopt as PlayPatKernel; one rank: empty.
std::optional<PatPlay> PlayPatKernelSends(const PatShape& op, Nanoseconds round);

}  // namespace prism

#endif  // PRISM_COMMON_PAT_KERNEL_H_
