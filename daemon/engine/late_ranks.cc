#include "daemon/engine/late_ranks.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace prism::engine {
namespace {

// An hour: a longer hiccup is a failed rank, not a late one.
constexpr double kMaxLateMs = 3'600'000.0;

std::string Ms(Nanoseconds ns) { return absl::StrCat(static_cast<double>(ns.count()) / 1e6); }

}  // namespace

absl::StatusOr<std::vector<LateRank>> ParseLateRanks(std::string_view text) {
  std::vector<LateRank> out;
  for (absl::string_view part : absl::StrSplit(absl::string_view(text.data(), text.size()), ',', absl::SkipWhitespace())) {
    const std::vector<absl::string_view> f = absl::StrSplit(part, ':');
    LateRank late;
    double ms = 0;
    if (f.size() != 3 || !absl::SimpleAtoi(f[0], &late.rank) || !absl::SimpleAtoi(f[1], &late.iteration) ||
        !absl::SimpleAtod(f[2], &ms) || !std::isfinite(ms) || ms <= 0 || ms > kMaxLateMs)
      return absl::InvalidArgumentError(absl::StrCat(
          "--late ", part, ": expected RANK:ITERATION:MS (e.g. 0:10:20: rank 0 starts iteration 10 late by 20 ms; ",
          "MS above 0 and at most ", kMaxLateMs, ")"));
    late.extra = Nanoseconds(std::llround(ms * 1e6));
    out.push_back(late);
  }
  if (out.empty()) return absl::InvalidArgumentError("--late: no RANK:ITERATION:MS given");
  return out;
}

std::vector<uint32_t> LateRankIds(absl::Span<const LateRank> late) {
  std::vector<uint32_t> ranks;
  for (const LateRank& l : late) ranks.push_back(l.rank);
  return ranks;
}

std::string DescribeLateRanks(absl::Span<const LateRank> late) {
  std::vector<std::string> parts;
  for (const LateRank& l : late)
    parts.push_back(absl::StrCat("rank ", l.rank, " starts iteration ", l.iteration, " late by ", Ms(l.extra), " ms"));
  return absl::StrJoin(parts, ", ");
}

absl::StatusOr<LateComputes> LateComputes::Build(const EngineWorld& world, absl::Span<const LateRank> late,
                                                 uint64_t iterations) {
  LateComputes out;
  for (const LateRank& l : late) {
    const std::string who = absl::StrCat("--late: rank ", l.rank);
    if (l.rank >= world.actor_of_rank.size())
      return absl::InvalidArgumentError(
          absl::StrCat(who, " is outside the graph's ", world.actor_of_rank.size(), " ranks"));
    if (l.iteration >= iterations)
      return absl::InvalidArgumentError(absl::StrCat(who, ": iteration ", l.iteration, " is not replayed (",
                                                     iterations, " iterations, 0 to ", iterations - 1, ")"));
    const uint32_t actor = world.actor_of_rank[l.rank];
    const Actor& a = world.actors[actor];
    if (a.real)
      return absl::InvalidArgumentError(
          absl::StrCat(who, " is a real rank: make it late in its own program (--late is for virtual ranks)"));
    if (a.weight != 1)
      return absl::InvalidArgumentError(
          absl::StrCat(who, " shares its replay with ", a.weight - 1, " other ranks (the world did not keep it alone)"));
    const ProgramInfo& p = world.programs[a.program];
    uint32_t first_compute = 0;
    while (first_compute < p.ops.size() && p.ops[first_compute].kind != OpKind::kCompute) ++first_compute;
    if (first_compute == p.ops.size())
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": its program ", p.name, " has no compute op to lengthen"));
    out.entries_.push_back(Entry{actor, first_compute, l.iteration, l.extra});
  }
  return out;
}

}  // namespace prism::engine
