// Builds the program (ordered ops, streams, dependencies, memory) of one
// pipeline stage of a Megatron job (module: program builder per schedule).
//
// Streams: 0 = compute, tensor/expert-parallel collectives and pipeline
// send/recv (Megatron waits on them in order); 1 = data-parallel gradient
// reduction and parameter all-gather (overlapped with backward); 2 = the
// context-parallel KV ring (only when cp > 1).
// Every rank of a stage runs the same program: peers are pipeline comm ranks
// (== stage index) or relative offsets in the CP ring, so tp/cp/dp/ep
// coordinates do not change it. docs/graphgen.md lists every op.
// Pure function of its inputs; thread-safe.
#ifndef PRISM_GRAPHGEN_PROGRAM_BUILDER_H_
#define PRISM_GRAPHGEN_PROGRAM_BUILDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "graphgen/cost_model.h"
#include "graphgen/job_spec.h"
#include "proto/graph.pb.h"

namespace prism::graphgen {

// `slot_names` are the program's comm slots (Megatron group kinds this stage's
// ranks belong to); the builder only references "tp", "pp", "cp", "ep",
// "dp_cp", "edp", "embd", "mp" and "dist_opt", and only when they are listed.
struct StageInputs {
  const JobSpec* spec = nullptr;
  const CostModel* cost = nullptr;
  uint32_t stage = 0;
  std::vector<std::string> slot_names;
  uint64_t dp_cp_size = 1;          // dense gradient reduction group size
  uint64_t edp_size = 1;            // expert gradient reduction group size
};

prism::graph::Program BuildStageProgram(const StageInputs& in);

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_PROGRAM_BUILDER_H_
