#include "graphgen/schedule.h"

#include <algorithm>

namespace prism::graphgen {
namespace {

// Builds one stage's action list; knows which stage/chunk is first or last.
class ActionList {
 public:
  ActionList(uint32_t pp, uint32_t vpp, uint32_t stage) : pp_(pp), vpp_(vpp), stage_(stage) {}

  bool first_stage() const { return stage_ == 0; }
  bool last_stage() const { return stage_ == pp_ - 1; }
  // Pipeline ends: no input activation before stage 0 chunk 0, no output
  // activation after the last stage's last chunk.
  bool sends_activation(uint32_t chunk) const { return !(last_stage() && chunk == vpp_ - 1); }
  bool sends_gradient(uint32_t chunk) const { return !(first_stage() && chunk == 0); }

  void Pass(bool forward, uint32_t chunk, uint32_t mb) {
    PipelineAction a;
    a.step = {forward, chunk, mb};
    actions_.push_back(a);
  }
  void Exchange(PipelineExchange e) {
    if (e.empty()) return;
    PipelineAction a;
    a.is_exchange = true;
    a.exchange = e;
    actions_.push_back(a);
  }
  std::vector<PipelineAction> Take() { return std::move(actions_); }

 private:
  uint32_t pp_, vpp_, stage_;
  std::vector<PipelineAction> actions_;
};

std::vector<PipelineAction> GPipe(uint32_t pp, uint32_t stage, uint32_t m) {
  ActionList a(pp, 1, stage);
  for (uint32_t i = 0; i < m; ++i) {
    a.Exchange({.recv_prev = !a.first_stage()});
    a.Pass(true, 0, i);
    a.Exchange({.send_next = !a.last_stage()});
  }
  for (uint32_t i = 0; i < m; ++i) {
    a.Exchange({.recv_next = !a.last_stage()});
    a.Pass(false, 0, i);
    a.Exchange({.send_prev = !a.first_stage()});
  }
  return a.Take();
}

std::vector<PipelineAction> OneFOneB(uint32_t pp, uint32_t stage, uint32_t m) {
  ActionList a(pp, 1, stage);
  const bool first = a.first_stage(), last = a.last_stage();
  const uint32_t warmup = std::min(pp - stage - 1, m);
  const uint32_t remaining = m - warmup;
  for (uint32_t i = 0; i < warmup; ++i) {
    a.Exchange({.recv_prev = !first});
    a.Pass(true, 0, i);
    a.Exchange({.send_next = !last});
  }
  if (remaining > 0) a.Exchange({.recv_prev = !first});
  for (uint32_t i = 0; i < remaining; ++i) {
    a.Pass(true, 0, warmup + i);
    a.Exchange({.send_next = !last, .recv_next = !last});  // send_forward_recv_backward
    a.Pass(false, 0, i);
    const bool last_iteration = i + 1 == remaining;
    a.Exchange({.send_prev = !first, .recv_prev = !first && !last_iteration});  // send_backward_recv_forward
  }
  for (uint32_t i = 0; i < warmup; ++i) {
    a.Exchange({.recv_next = !last});
    a.Pass(false, 0, remaining + i);
    a.Exchange({.send_prev = !first});
  }
  return a.Take();
}

// Megatron's interleaved schedule (microbatch group size pp).
class Interleaved {
 public:
  Interleaved(uint32_t pp, uint32_t vpp, uint32_t stage, uint32_t m)
      : pp_(pp), vpp_(vpp), stage_(stage), total_(static_cast<int64_t>(m) * vpp) {}

  // Python semantics for negative k (k mod n is non-negative).
  uint32_t ChunkOf(int64_t k, bool forward) const {
    const int64_t group = static_cast<int64_t>(pp_) * vpp_;
    const int64_t in_group = ((k % group) + group) % group;
    const uint32_t chunk = static_cast<uint32_t>(in_group / pp_);
    return forward ? chunk : vpp_ - 1 - chunk;
  }
  uint32_t MicrobatchOf(int64_t k) const {
    const int64_t group = static_cast<int64_t>(pp_) * vpp_;
    return static_cast<uint32_t>((k / group) * pp_ + k % pp_);
  }

  std::vector<PipelineAction> Build() {
    ActionList a(pp_, vpp_, stage_);
    const bool first = a.first_stage(), last = a.last_stage();
    const int64_t warmup = std::min<int64_t>((pp_ - stage_ - 1) * 2 + (vpp_ - 1) * pp_, total_);
    const int64_t remaining = total_ - warmup;
    const bool all_warmup = warmup == total_;
    a.Exchange({.recv_prev = !first});  // the first chunk's input
    for (int64_t k = 0; k < warmup; ++k) {
      const uint32_t chunk = ChunkOf(k, true);
      a.Pass(true, chunk, MicrobatchOf(k));
      bool recv_prev = !(first && ChunkOf(k + 1, true) == 0) && k != total_ - 1;
      PipelineExchange e{.recv_prev = recv_prev, .send_next = a.sends_activation(chunk)};
      if (k == warmup - 1 && !all_warmup) e.recv_next = !last;
      a.Exchange(e);
    }
    for (int64_t i = 0; i < remaining; ++i) {
      const int64_t fk = i + warmup;
      const uint32_t fchunk = ChunkOf(fk, true), bchunk = ChunkOf(i, false);
      a.Pass(true, fchunk, MicrobatchOf(fk));
      a.Pass(false, bchunk, MicrobatchOf(i));
      bool recv_prev = true, recv_next = true;
      if (first && ChunkOf(fk - (pp_ - 1), true) == vpp_ - 1) recv_prev = false;
      if (last && ChunkOf(i - (pp_ - 1), false) == 0) recv_next = false;
      if (i == remaining - 1) recv_prev = false;
      a.Exchange({.send_prev = a.sends_gradient(bchunk), .recv_prev = recv_prev,
                  .send_next = a.sends_activation(fchunk), .recv_next = recv_next});
    }
    if (all_warmup) a.Exchange({.recv_next = !last});
    for (int64_t k = remaining; k < total_; ++k) {
      const uint32_t chunk = ChunkOf(k, false);
      a.Pass(false, chunk, MicrobatchOf(k));
      bool recv_next = !(last && ChunkOf(k + 1, false) == vpp_ - 1) && k != total_ - 1;
      a.Exchange({.send_prev = a.sends_gradient(chunk), .recv_next = recv_next});
    }
    return a.Take();
  }

 private:
  uint32_t pp_, vpp_, stage_;
  int64_t total_;
};

}  // namespace

std::vector<PipelineAction> StageActions(Schedule schedule, uint32_t pp, uint32_t vpp, uint32_t stage,
                                         uint32_t microbatches) {
  switch (schedule) {
    case Schedule::kGPipe: return GPipe(pp, stage, microbatches);
    case Schedule::kOneFOneB: return OneFOneB(pp, stage, microbatches);
    case Schedule::kInterleavedOneFOneB: return Interleaved(pp, vpp, stage, microbatches).Build();
  }
  return {};
}

std::vector<PipelineStep> StageSchedule(Schedule schedule, uint32_t pp, uint32_t vpp, uint32_t stage,
                                        uint32_t microbatches) {
  std::vector<PipelineStep> steps;
  for (const PipelineAction& a : StageActions(schedule, pp, vpp, stage, microbatches))
    if (!a.is_exchange) steps.push_back(a.step);
  return steps;
}

}  // namespace prism::graphgen
