// NCCL's PAT all-gather and reduce-scatter (one rank per node), played
// message by message, to time them (docs/network-model.md, "PAT"): prismd's
// model (daemon/engine/pat_play.h) and the plugin's PAT floor
// (plugin/arrival.h) play the same schedule.
//
// How NCCL 2.28.9 moves the data (NCCL v2.28.9-1 src/include/collectives.h,
// PatAGAlgorithm and PatRSAlgorithm; src/device/prims_simple.h; src/enqueue.cc
// for the chunk; src/proxy.cc counts each peer's steps the same way; read,
// not copied): rank r talks to the ranks r +- 2^d, d < D = ceil(log2 n) (a
// "dimension"). All-gather: every rank's piece travels down a binomial tree;
// a rank sends its own piece on every dimension (to r - 2^d), and forwards
// the piece of rank r + s, which it received on dimension lowbit(s), on each
// dimension e < lowbit(s) whose target still lacks it (s + 2^e < n).
// Reduce-scatter is the same tree run backwards: the partial sum for rank
// r + t (t > 0) leaves on dimension lowbit(t), to r + 2^lowbit(t), once the
// partial sums for it from r - 2^e, e < lowbit(t) (those with t + 2^e < n),
// have arrived. Either way a rank sends n - 1 pieces per channel, each of
// bytes / (n * channels): the ring's volume, in about log2(n) hops instead of
// n - 1.
//
// Per-step sizes: a piece is at most one chunk (NCCL's PAT chunk: the Simple
// step, 512 KiB, halved while chunk * channels * 32 (all-gather; 16 for
// reduce-scatter) exceeds the operation's bytes, down to 64 KiB); larger
// pieces go in chunk-sized loops. Small pieces are aggregated: P pieces per
// message, P the largest power of two (below n/2) with P * piece <= chunk,
// as NCCL does. The pieces that share a message are those NCCL groups: the
// same offset modulo A = 2^D / F (F = P times up to 8 for NCCL_STEPS' depth,
// below n/2), P consecutive ones of that group on that dimension. A
// forwarded group of all-gather pieces thus waits for exactly one received
// message, and each dimension carries as many messages as NCCL's proxy
// counts for it (checked against NCCL's own schedule for 6 to 8192 ranks,
// 64 B to 4 MiB pieces: PatMessagesPerDim).
//
// Timing: all ranks run the same schedule shifted by their rank, so what rank
// r receives on dimension d as its k-th message is what r + 2^d (all-gather;
// r - 2^d for reduce-scatter) sends there as its k-th message, at the moment
// r itself sends its k-th message on d (the mirror the plugin applies to
// rings). The play therefore plays one rank: its messages leave its NIC one
// after another at bandwidth / channels (the channels share the NIC; each
// carries 1/channels of the data), the earliest-ready first (all-gather: the
// higher dimension first; reduce-scatter: the lower first, then the larger
// offset, the longer chain); a message is ready when the messages it waits
// for arrived, i.e. their twin left the wire plus the step latency (the
// link's latency plus NCCL's step cost c, network_model.h). The operation
// ends when the last message arrives: last send end + step latency.
//
// Closed forms (w = one piece's wire time, l = step latency, one loop,
// no aggregation): n = 2: w + l; n = 4 all-gather or reduce-scatter:
// max(3w, 2w + l) + l.
//
// This play is the links' own bound (any order, no GPU cost); NCCL's kernel
// runs its steps in its own order, in rounds, with a GPU cost per round and
// NCCL_STEPS messages in flight per connection: common/pat_kernel.h, which
// prismd's model plays where it charges NCCL's step cost.
// Pure functions; thread-safe.
#ifndef PRISM_COMMON_PAT_SCHEDULE_H_
#define PRISM_COMMON_PAT_SCHEDULE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "common/units.h"

namespace prism {

struct PatShape {
  bool all_gather = true;     // else a reduce-scatter
  uint32_t ranks = 1;
  Bytes bytes;                // the all-gather's output, the reduce-scatter's input
  uint32_t channels = 2;      // NCCL's channels for the communicator
  BitsPerSecond bandwidth;    // the rank's NIC (shared by its channels)
  Nanoseconds step_latency;   // link latency + NCCL's step cost, per message
};

// How NCCL cuts the operation (see the file comment).
struct PatCut {
  Bytes chunk;                // NCCL's PAT chunk
  uint64_t piece = 0;         // bytes per rank and channel
  uint64_t loops = 1;         // chunk-sized loops over the piece
  uint64_t per_message = 1;   // P: pieces aggregated in one message
  uint64_t group_spacing = 1; // A: offsets s, s + A, ... share messages
  uint32_t dims = 0;          // D = ceil(log2 ranks)
};
PatCut CutPatShape(const PatShape& op);

// NCCL's PAT chunk for `bytes` over `channels`.
Bytes PatChunk(bool all_gather, Bytes bytes, uint32_t channels);

// NCCL's cost per PAT hop beyond the ring's step cost c, per dimension of
// the operation: NCCL's proxy serves the operation's 2 * D connections per
// channel in turn, so a message waits longer for it the more dimensions
// there are. Fitted 2026-12-03 with the kernel walk (common/pat_kernel.h)
// to the real rank's PAT over 8192 ranks (13 dimensions: all-gather 7.11
// ms, reduce-scatter 9.48 ms on the GPU host, NCCL 2.28.9) and checked
// against the PAT ground truths at 8 and 16 ranks (2.5 Gbit/s + 10 us, 1 to
// 64 MiB; docs/network-model.md, "PAT's kernel").
inline constexpr Nanoseconds kNcclPatHopPerDimension{2'500};

// D = ceil(log2 ranks): the dimensions of a PAT operation over `ranks`.
inline uint32_t PatDimensions(uint64_t ranks) {
  uint32_t d = 0;
  while ((uint64_t{1} << d) < ranks) ++d;
  return d;
}

// NCCL's cost per PAT hop over `dims` dimensions for a ring step cost
// `ring_step_cost`: 0 when the model charges no step cost (the pure link
// model), else c + dims * kNcclPatHopPerDimension. The model's and the
// plugin floor's step latency is the link's latency plus this.
inline Nanoseconds PatStepCost(Nanoseconds ring_step_cost, uint32_t dims) {
  if (ring_step_cost <= Nanoseconds(0)) return Nanoseconds(0);
  return Nanoseconds(ring_step_cost.count() + static_cast<int64_t>(dims) * kNcclPatHopPerDimension.count());
}

// Largest number of messages a play handles (one rank's, all loops); beyond
// it the plays return nullopt (empty) and the caller uses a formula.
inline constexpr uint64_t kMaxPlayedPatMessages = 2'000'000;

// One message the played rank sends on one channel (all channels send the
// same): its dimension, bytes, and the messages whose twins it waits for.
struct PatMessage {
  uint32_t dim = 0;
  uint64_t bytes = 0;
  uint64_t priority = 0;        // lower first among the ready (the play's order)
  uint32_t inputs = 0;          // messages whose twins it waits for
  std::vector<uint32_t> feeds;  // messages waiting for this one's twin
};
// The rank's messages, every loop; empty for one rank or past the limit.
std::vector<PatMessage> PatRankMessages(const PatShape& op);

// The play (file comment) from the moment every rank arrived: when the
// operation ends (its last message arrives) and, per dimension, when the
// rank's k-th message on it left the wire (`sent[d][k]`, in the order they
// left; what its twin, the k-th message it receives on d, left then too).
// `earliest[d][k]`: the earliest moment the k-th message on d can leave the
// wire in any order of sends: the k-th smallest of PatEarliestLeaves on d,
// and no sooner than the (k-1)-th plus d's shortest wire time (one
// connection sends one message after another). However NCCL orders its
// steps, its k-th message on d leaves no earlier than that (PAT's floor in
// the plugin: plugin/arrival.h, PatFloor).
struct PatPlay {
  Nanoseconds end;
  std::vector<std::vector<Nanoseconds>> sent;
  std::vector<std::vector<Nanoseconds>> earliest;
};
std::optional<PatPlay> PlayPatSchedule(const PatShape& op);

// When each of `msgs` (PatRankMessages(op)) can leave the wire at the
// earliest, in any order of sends: right after the arrival of the messages it
// waits for (their own earliest plus op.step_latency) plus its own wire time
// at bandwidth / channels, with no queueing behind the rank's other messages.
std::vector<Nanoseconds> PatEarliestLeaves(const std::vector<PatMessage>& msgs, const PatShape& op);

// Messages one rank sends per channel on each dimension, all loops (what
// NCCL's proxy counts as each dimension's steps); empty past the play's limit.
std::vector<uint64_t> PatMessagesPerDim(const PatShape& op);

}  // namespace prism

#endif  // PRISM_COMMON_PAT_SCHEDULE_H_
