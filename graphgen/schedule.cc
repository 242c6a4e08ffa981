#include "graphgen/schedule.h"

#include <algorithm>

namespace prism::graphgen {
namespace {

std::vector<PipelineStep> GPipe(uint32_t m) {
  std::vector<PipelineStep> steps;
  for (uint32_t i = 0; i < m; ++i) steps.push_back({true, 0, i});
  for (uint32_t i = 0; i < m; ++i) steps.push_back({false, 0, i});
  return steps;
}

std::vector<PipelineStep> OneFOneB(uint32_t pp, uint32_t stage, uint32_t m) {
  const uint32_t warmup = std::min(pp - stage - 1, m);
  std::vector<PipelineStep> steps;
  uint32_t next_fwd = 0, next_bwd = 0;
  for (; next_fwd < warmup; ++next_fwd) steps.push_back({true, 0, next_fwd});
  while (next_fwd < m) {
    steps.push_back({true, 0, next_fwd++});
    steps.push_back({false, 0, next_bwd++});
  }
  while (next_bwd < m) steps.push_back({false, 0, next_bwd++});
  return steps;
}

PipelineStep Virtual(uint32_t k, uint32_t pp, uint32_t vpp, bool forward) {
  const uint32_t group = pp * vpp;
  uint32_t chunk = (k % group) / pp;
  if (!forward) chunk = vpp - 1 - chunk;
  return {forward, chunk, (k / group) * pp + k % pp};
}

std::vector<PipelineStep> Interleaved(uint32_t pp, uint32_t vpp, uint32_t stage, uint32_t m) {
  const uint32_t total = m * vpp;
  uint32_t warmup = (pp - stage - 1) * 2 + (vpp - 1) * pp;
  warmup = std::min(warmup, total);
  std::vector<PipelineStep> steps;
  uint32_t f = 0, b = 0;
  for (; f < warmup; ++f) steps.push_back(Virtual(f, pp, vpp, true));
  while (f < total) {
    steps.push_back(Virtual(f++, pp, vpp, true));
    steps.push_back(Virtual(b++, pp, vpp, false));
  }
  while (b < total) steps.push_back(Virtual(b++, pp, vpp, false));
  return steps;
}

}  // namespace

std::vector<PipelineStep> StageSchedule(Schedule schedule, uint32_t pp, uint32_t vpp, uint32_t stage,
                                        uint32_t microbatches) {
  switch (schedule) {
    case Schedule::kGPipe: return GPipe(microbatches);
    case Schedule::kOneFOneB: return OneFOneB(pp, stage, microbatches);
    case Schedule::kInterleavedOneFOneB: return Interleaved(pp, vpp, stage, microbatches);
  }
  return {};
}

}  // namespace prism::graphgen
