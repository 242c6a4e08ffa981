// The link model and the NCCL-like collective cost model of the replay engine.
//
// Formulas (docs/network-model.md has the derivations):
//   ring allreduce      max(W + 2(n-1) * L, RingStepBound(W, L + c, 2(n-1), k)), W = 2(n-1)/n * S / B
//   ring allgather      max(W + (n-1) * L,  RingStepBound(W, L + c, n-1, k)),    W = (n-1)/n * S / B
//   ring reducescatter  the same as allgather                 S = output (allgather), input (reducescatter) bytes
//     where RingStepBound(W, l, h, k) = h * (W/(h k) + l) + (k-1) W/(h k): NCCL moves
//     each ring step in k slices (kNcclRingSlicesPerStep) and forwards a slice once
//     it arrived, so a latency-bound ring (small chunks per step: long rings) pays
//     l = L + c per step; with c = 0 the first term always wins (the link model)
//   ring broadcast/reduce        S / B + (n-1) * L          (pipelined chain)
//   tree allreduce      one rank per node: NCCL's double binary tree played chunk
//                       by chunk (tree_pipeline.h; 2 channels, 512 KiB chunks),
//                       the last arrival at any node; else, and for trees too
//                       large to play (kMaxPlayedTreeTransfers):
//                       2 * S / (0.9 B) + 2 * (ceil(log2 nodes) * L_nic + (k-1) * L_intra)
//   PAT allgather/reducescatter (one rank per node): NCCL's binomial-tree
//                       schedule played message by message (pat_play.h), each
//                       message paying L + c; else the ring
//   pairwise alltoall   max((k-1) S/n / B_intra, (n-k) S/n / B_gpu_nic) + (n-1) * L
//   send/recv           L_hop + S / B_hop (the receive); between nodes the send
//                       completes once its last byte is in the connection's
//                       buffers: (S - P)+ / B_hop after the transfer starts,
//                       P = NcclBehaviour::p2p_buffer (SendHeldTime)
// B is the ring's bottleneck hop: the intra-node link when k > 1 ranks of the
// communicator share a node, and k * (NIC share of one GPU) when it spans
// nodes (each GPU of a node owns nic_count / gpus_per_node of its NICs).
// L is the slowest hop's latency (NIC latency when the communicator spans nodes).
// c is NCCL's own cost per ring step beyond the link's latency (its proxy
// thread, the GPU-proxy handshake, the net plugin's test calls;
// nccl_tuning.h): a latency-bound ring of 2048 members pays it 2047 times per
// pass; a PAT message pays it once (the ring's figure standing in).
// Broadcast, reduce, trees, pairwise and send/recv do not carry it (not
// measured).
// ALGORITHM_DEFAULT resolves to what NCCL 2.28.9's tuning picks
// (nccl_algorithm.h), or, with NcclBehaviour::nccl_choice off, by comparing
// the formulas above (the model's choice before 2026-12-02).
//
// Value type; copies share one cache of played trees. Thread-safe (the cache
// is locked), so one model may serve several engines.
#ifndef PRISM_DAEMON_ENGINE_NETWORK_MODEL_H_
#define PRISM_DAEMON_ENGINE_NETWORK_MODEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>

#include "absl/status/statusor.h"
#include "common/ring_step.h"
#include "common/units.h"
#include "daemon/engine/engine_time.h"
#include "daemon/engine/link_figures.h"
#include "daemon/engine/nccl_algorithm.h"
#include "proto/graph.pb.h"

namespace prism::engine {

// What the model follows of the job's NCCL: its cost per ring step (c above;
// 0: the pure link model) and whether ALGORITHM_DEFAULT may resolve to the
// tree (NCCL_ALGO without Tree) or to the ring (NCCL_ALGO=Tree: all-reduces
// across nodes take the tree; other collectives have only the ring).
struct NcclBehaviour {
  Nanoseconds step_cost{0};
  // A ring step's turnaround across nodes that the wire does not hide (the
  // GPU noticing the data, reducing, the proxy posting the next send), paid
  // once per step on top of the link latency even when the ring is
  // bandwidth-bound: Ring = max(W + h (L + t), StepBound). 0 (the default):
  // none, as on a host whose ranks each have their GPU and cores; the GPU
  // host's 16 ranks packed on one H200 and 16 cores: 225 us
  // (docs/network-model.md, "A packed host's step turnaround").
  Nanoseconds step_turnaround{0};
  // The same host's cost paid once per ring collective across nodes instead
  // (its start and end hand-offs): Ring = max(W + h L + T_c, StepBound).
  // 0 (the default): none. On the GPU host the TP all-reduces of rings of
  // two and of four both ran about 0.3 ms over the wire, which a per-step
  // turnaround cannot give both (docs/network-model.md, "A packed host's
  // step turnaround").
  Nanoseconds collective_turnaround{0};
  bool ring = true;
  bool tree = true;
  bool pat = true;
  bool ll = true, ll128 = true, simple = true;  // NCCL_PROTO
  // What a p2p connection between nodes holds in flight: NCCL's send
  // kernel is done once its last byte is in these buffers (channels per peer
  // x NCCL_STEPS slots x NCCL_P2P_NET_CHUNKSIZE: 2 x 8 x 128 KiB by
  // default), long before the receiver has it. 0: a send completes with its
  // receive (the model before 2026-12-02).
  static constexpr Bytes kNcclP2pBuffer = KiB(2 * 8 * 128);
  Bytes p2p_buffer = kNcclP2pBuffer;
  // A send that fits in p2p_buffer goes on the wire when posted, before its
  // receive (NCCL's receiver posts its buffers when its host enqueues the
  // operation); off: when both sides are posted. docs/network-model.md,
  // "Send completion": per operation as the truths, iterations 3% fast.
  bool p2p_eager = false;
  // Under the queues and interleave NIC models a point-to-point transfer that
  // finds its sender's NIC carrying a ring share goes between that share's
  // steps (nic_scheduler.h; the dp8 and dp4 truths without the driver's
  // events, 2026-12-04); off: it waits for the whole share, the model before
  // that date (its recorded hybrid runs replay with it).
  bool p2p_between_ring_steps = true;
  // A rank's communication ops start in the order it issued them, and a
  // send or receive only once the collectives its rank issued before it
  // have ended, as the GPU host's truths show (launch_order.h;
  // docs/network-model.md, "Launch order"); false (the default): each
  // stream on its own.
  bool launch_in_order = false;
  // ALGORITHM_DEFAULT as NCCL's tuning resolves it (nccl_algorithm.h); false:
  // the model's own comparison of ring and tree times.
  bool nccl_choice = true;
  // A real rank's measurement of a collective in its first iteration (NCCL
  // connecting and warming up) calibrates all-virtual instances like a later
  // one (mixed_collectives.h): the engine before 2026-12-02, which the
  // recordings of runs made with it replay to.
  bool startup_calibrates = false;
  // The clean-measurement rule of the engine before 2026-12-05, which the
  // recordings of runs made with it replay to: a mixed collective's own hold
  // of its virtual members' NICs (until the model's end) made its real
  // measurement unclean, and so did a real rank's operation that NCCL had
  // reached but that waited for a dependency (a side stream's collective
  // enqueued ahead). A collective across nodes calibrated only when its real
  // ranks started sending after the model's end of it.
  bool own_hold_unclean = false;
  // Real ranks' clean measurements time all-virtual collectives of the same
  // kind, size and shape (MixedCollectives; prismd --no-calibration: false,
  // every virtual rank plays the model alone).
  bool calibrate = true;
  NcclAllowed Allowed() const { return {ring, tree, pat, ll, ll128, simple}; }
};

class NetworkModel {
 public:
  // Fails when the cluster cannot carry traffic it will need (checked lazily
  // by CheckShape): zero bandwidths are reported there, not here.
  static LinkFigures LinkFiguresFromCluster(const graph::Cluster& cluster);
  explicit NetworkModel(const LinkFigures& links, NcclBehaviour nccl = NcclBehaviour())
      : links_(links), nccl_(nccl), played_trees_(std::make_shared<PlayedTrees>()) {}

  // Whether this shape can be served by the links (non-zero bandwidths).
  absl::Status CheckShape(const CommShape& shape) const;
  absl::Status CheckP2P(bool same_node) const;

  // ALGORITHM_DEFAULT resolved the NCCL-like way: allreduce takes the tree when
  // it spans nodes and the tree's time is lower (large node counts, small
  // sizes), else the ring; alltoall is pairwise; everything else ring. With
  // the tree not allowed (Nccl::tree) the ring; with only the tree allowed
  // an all-reduce across nodes takes the tree.
  graph::Algorithm Choose(graph::CollectiveKind kind, Bytes size, const CommShape& shape) const;
  // NCCL's choice with its protocol (what the report shows); the ring with
  // Simple for kinds NCCL does not tune (all-to-all: pairwise).
  NcclChoice ChooseNccl(graph::CollectiveKind kind, Bytes size, const CommShape& shape) const;

  // Time of one collective from the moment every member has arrived. An
  // algorithm that does not apply to `kind` falls back to the ring.
  Nanoseconds CollectiveTime(graph::CollectiveKind kind, graph::Algorithm algorithm, Bytes size,
                             const CommShape& shape) const;

  Nanoseconds PointToPointTime(Bytes size, bool same_node) const;
  // How long a send of `size` bytes holds its sender after its transfer
  // started: between nodes, the wire time of the bytes the connection's
  // buffers cannot take (0: it completes when posted, whether or not its
  // receiver is there); on one node, the whole PointToPointTime (NCCL's P2P
  // transport's buffers are not modelled).
  Nanoseconds SendHeldTime(Bytes size, bool same_node) const;

  // The bandwidth part of the ring time (Ring's formula without the latency
  // terms): what a member's transmit side carries (the engine's
  // NicModel::kQueues).
  Nanoseconds RingWireTime(graph::CollectiveKind kind, Bytes size, const CommShape& shape) const;

  // Whether `kind` of `size` on `shape` is a long latency-bound ring: an
  // all-reduce, all-gather or reduce-scatter of kLatencyBoundMinSteps steps
  // or more whose step carries at most StepLatency of wire (latency and
  // NCCL's step cost are half its step or more). The engine takes a captured
  // collective's own pace for those (graph.proto CollectiveOp.measured_ns).
  static constexpr uint64_t kLatencyBoundMinSteps = 15;
  bool LatencyBoundRing(graph::CollectiveKind kind, Bytes size, const CommShape& shape) const;

  // Ring bottleneck bandwidth and per-step latency for `shape` (the link's
  // latency; StepLatency adds NCCL's step cost c to it, for rings).
  BitsPerSecond RingBandwidth(const CommShape& shape) const;
  Nanoseconds HopLatency(const CommShape& shape) const;
  Nanoseconds StepLatency(const CommShape& shape) const;
  // One hop between two ranks on one node (NVLink) or on two (the NIC).
  Nanoseconds HopLatency(bool same_node) const { return same_node ? links_.intra_latency : links_.nic_latency; }

  const LinkFigures& links() const { return links_; }
  Nanoseconds step_cost() const { return nccl_.step_cost; }
  const NcclBehaviour& nccl() const { return nccl_; }

 private:
  Nanoseconds Ring(graph::CollectiveKind kind, Bytes size, const CommShape& shape) const;
  Nanoseconds Tree(Bytes size, const CommShape& shape) const;
  Nanoseconds TreeFormula(Bytes size, const CommShape& shape) const;
  Nanoseconds Pairwise(Bytes size, const CommShape& shape) const;
  Nanoseconds Pat(graph::CollectiveKind kind, Bytes size, const CommShape& shape) const;
  graph::Algorithm ModelChoice(graph::CollectiveKind kind, Bytes size, const CommShape& shape) const;

  // Played tree all-reduces by (nodes, bytes); 0 ns: too large to play.
  // Played PAT operations by (kind, nodes, bytes), the same way.
  struct PlayedTrees {
    std::mutex mu;
    std::map<std::pair<uint32_t, uint64_t>, Nanoseconds> end;
    std::map<std::tuple<int, uint32_t, uint64_t>, Nanoseconds> pat_end;
  };

  LinkFigures links_;
  NcclBehaviour nccl_;
  std::shared_ptr<PlayedTrees> played_trees_;
};

// The channels the model gives a played tree all-reduce (the graph does not
// say; NCCL ran 2 on the fidelity bench's one-NIC nodes).
inline constexpr int kModelTreeChannels = 2;

// Slices per ring step (common/ring_step.h).
using prism::kNcclRingSlicesPerStep;

// RingStepBound above: `wire` the ring's whole wire time per member,
// `step_latency` one hop's latency plus NCCL's step cost, `hops` the ring's
// steps, `slices` per step; RingStepsTime(W/h, step_latency, hops, slices)
// of common/ring_step.h, which the plugin's lockstep floor shares. Saturating.
Nanoseconds RingStepBound(Nanoseconds wire, Nanoseconds step_latency, uint64_t hops, uint64_t slices);

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_NETWORK_MODEL_H_
