#include "daemon/engine/nccl_tuning.h"

#include <array>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace prism::engine {
namespace {

struct Entry {
  int release;  // NCCL version code
  NcclProtocol protocol;
  graph::Algorithm algorithm;
  int64_t cost_ns;
  const char* measured;
};

// Measured on a host with one H200 (docs/network-model.md, "NCCL's step
// cost"); newest release first within each protocol and algorithm.
constexpr std::array<Entry, 1> kMeasured{{
    {22809, NcclProtocol::kSimple, graph::ALGORITHM_RING, 12'500,
     "NCCL 2.28.9 Simple ring, measured 2026-12-02 (train_gpt.py at 8192 ranks, DP rings of 2048)"},
}};

// The release the GPU hosts carry (PyTorch 2.11's NCCL).
constexpr int kDefaultRelease = 22809;

bool Matches(const Entry& e, NcclProtocol protocol, graph::Algorithm algorithm) {
  return e.protocol == protocol && e.algorithm == algorithm;
}

}  // namespace

StepCost NcclStepCost(int release, NcclProtocol protocol, graph::Algorithm algorithm) {
  if (release <= 0) release = kDefaultRelease;
  if (algorithm != graph::ALGORITHM_TREE) algorithm = graph::ALGORITHM_RING;
  const Entry* exact = nullptr;
  const Entry* same_kind = nullptr;
  for (const Entry& e : kMeasured) {
    if (!Matches(e, protocol, algorithm)) continue;
    if (e.release == release) exact = &e;
    if (same_kind == nullptr) same_kind = &e;
  }
  if (exact != nullptr) return {Nanoseconds(exact->cost_ns), exact->measured};
  const Entry& stand_in = same_kind != nullptr ? *same_kind : kMeasured.front();
  return {Nanoseconds(stand_in.cost_ns),
          std::string(stand_in.measured) + " (standing in: no figure measured for this release, protocol and algorithm)"};
}

std::optional<StepCost> GraphNcclStepCost(const graph::Cluster& cluster) {
  const graph::NcclStepCost* best = nullptr;
  for (const graph::NcclStepCost& e : cluster.nccl_step_costs()) {
    if (e.algorithm() != graph::ALGORITHM_RING) continue;
    if (absl::AsciiStrToUpper(e.protocol()) == "SIMPLE")
      return StepCost{Nanoseconds(static_cast<int64_t>(e.cost_ns())), e.source()};
    if (best == nullptr || e.ops() > best->ops()) best = &e;
  }
  if (best == nullptr) return std::nullopt;
  return StepCost{Nanoseconds(static_cast<int64_t>(best->cost_ns())), best->source()};
}

absl::StatusOr<NcclAlgorithms> ParseNcclAlgo(const std::string& value) {
  NcclAlgorithms a;
  a.text = value;
  absl::string_view list = absl::StripAsciiWhitespace(value);
  if (list.empty()) return a;
  const bool exclude = absl::ConsumePrefix(&list, "^");
  bool ring = false, tree = false, pat = false;
  for (absl::string_view name : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    const std::string n = absl::AsciiStrToLower(absl::StripAsciiWhitespace(name));
    if (n == "ring") ring = true;
    else if (n == "tree") tree = true;
    else if (n == "pat") pat = true;
    else if (n != "collnetdirect" && n != "collnetchain" && n != "nvls" && n != "nvlstree")
      return absl::InvalidArgumentError(absl::StrCat(
          "NCCL_ALGO \"", value, "\": unknown algorithm \"", name,
          "\"; NCCL knows Ring, Tree, PAT, CollnetDirect, CollnetChain, NVLS, NVLSTree (a list, or ^list to exclude)"));
  }
  a.ring = exclude ? !ring : ring;
  a.tree = exclude ? !tree : tree;
  a.pat = exclude ? !pat : pat;
  if (!a.ring && !a.tree && !a.pat)
    return absl::InvalidArgumentError(absl::StrCat(
        "NCCL_ALGO \"", value, "\" leaves none of Ring, Tree and PAT, the algorithms the model plays; "
        "allow one of them"));
  return a;
}

}  // namespace prism::engine
