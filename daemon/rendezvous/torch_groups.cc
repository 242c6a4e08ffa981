#include "daemon/rendezvous/torch_groups.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/rendezvous/sha1.h"
#include "nlohmann/json.hpp"

namespace prism::rendezvous {
namespace {

bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

bool IsSha1Hex(absl::string_view s) {
  return s.size() == 40 &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'); });
}

// The tail after "cuda//".
bool ParseTail(absl::string_view tail, NcclIdKey* k) {
  if (absl::ConsumePrefix(&tail, "UniqueNCCLID:")) {
    k->kind = NcclIdKey::Kind::kScalableRoot;
    return AllDigits(tail) && absl::SimpleAtoi(tail, &k->index);
  }
  const size_t colon = tail.find(':');
  if (colon == absl::string_view::npos) {
    k->kind = NcclIdKey::Kind::kCommunicator;
    return AllDigits(tail) && absl::SimpleAtoi(tail, &k->index);
  }
  k->kind = NcclIdKey::Kind::kPair;
  const absl::string_view lo = tail.substr(0, colon), hi = tail.substr(colon + 1);
  return AllDigits(lo) && AllDigits(hi) && absl::SimpleAtoi(lo, &k->lo) && absl::SimpleAtoi(hi, &k->hi) &&
         k->lo < k->hi;
}

// The key from its "0//" on (after any store prefix).
std::optional<NcclIdKey> ParseAt(absl::string_view s, NcclIdKey k) {
  k.env_prefix = absl::ConsumePrefix(&s, "default_pg/");
  if (!absl::ConsumePrefix(&s, "0//")) return std::nullopt;
  if (!absl::ConsumePrefix(&s, "cuda//")) {
    const size_t end = s.find("//");
    if (end == absl::string_view::npos) return std::nullopt;
    const absl::string_view group = s.substr(0, end);
    if (!AllDigits(group) && !IsSha1Hex(group)) return std::nullopt;
    k.group = std::string(group);
    s.remove_prefix(end + 2);
    if (!absl::ConsumePrefix(&s, "cuda//")) return std::nullopt;
  }
  if (!ParseTail(s, &k)) return std::nullopt;
  return k;
}

}  // namespace

std::optional<absl::StatusOr<SplitGroupAnnouncement>> ParseSplitGroupAnnouncement(const std::string& store_key,
                                                                                   const std::string& value) {
  const std::string kMark = "prism/split_group/";
  const size_t at = store_key.find(kMark);
  if (at == std::string::npos || (at > 0 && store_key[at - 1] != '/')) return std::nullopt;
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("store key '", store_key, "' (a split_group announcement): ", why));
  };
  const std::vector<std::string> parts = absl::StrSplit(store_key.substr(at + kMark.size()), '/');
  SplitGroupAnnouncement a;
  uint32_t call = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &a.rank) || !absl::SimpleAtoi(parts[1], &call))
    return bad("not <global rank>/<call>");
  // {"members": [r, ...]}: global ranks, whole numbers.
  const nlohmann::json j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  const auto members = j.is_object() ? j.find("members") : j.end();
  if (!j.is_object() || members == j.end() || !members->is_array())
    return bad(absl::StrCat("value '", value.substr(0, 80), "' has no \"members\" list"));
  for (const nlohmann::json& m : *members) {
    if (!m.is_number_unsigned() || m.get<uint64_t>() > UINT32_MAX)
      return bad(absl::StrCat("member '", m.dump(), "' is not a rank"));
    a.members.push_back(m.get<uint32_t>());
  }
  if (std::find(a.members.begin(), a.members.end(), a.rank) == a.members.end())
    return bad(absl::StrCat("rank ", a.rank, " is not among its own group's members"));
  return a;
}

std::optional<NcclIdKey> ParseNcclIdKey(const std::string& store_key) {
  NcclIdKey k;
  k.key = store_key;
  absl::string_view s = store_key;
  absl::ConsumePrefix(&s, "/");  // the TCPStore client's own prefix
  // Outer PrefixStores (e.g. an elastic agent's "/worker/attempt_0") may
  // come first: try every '/'-separated position, the outermost first.
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && s[i - 1] != '/') continue;
    if (auto parsed = ParseAt(s.substr(i), k)) return parsed;
  }
  return std::nullopt;
}

GroupResolver::GroupResolver(const bootstrap::BootstrapPlan& plan) : plan_(plan) {
  // The children of one split_group call are one PyTorch group number (a
  // member's); the list holds each of them.
  bool joined = false;
  for (const bootstrap::PlanProcessGroup& g : plan.process_groups)
    joined |= !g.gloo && g.comm < plan.comms.size() && plan.comms[g.comm].same_call;
  if (!joined) return;
  for (uint32_t k = 0; k < plan.process_groups.size(); ++k) {
    const bootstrap::PlanProcessGroup& g = plan.process_groups[k];
    if (k > 0 && !g.gloo && plan.comms[g.comm].same_call && !plan.process_groups[k - 1].gloo) continue;
    entry_of_number_.push_back(k);
  }
}

uint32_t GroupResolver::GroupCount() const {
  if (!entry_of_number_.empty()) return static_cast<uint32_t>(entry_of_number_.size());
  return static_cast<uint32_t>(plan_.process_groups.empty() ? plan_.comms.size() : plan_.process_groups.size());
}

uint32_t GroupResolver::EntryOf(uint32_t number) const {
  return entry_of_number_.empty() ? number : entry_of_number_[number];
}

std::vector<uint32_t> GroupResolver::SortedMembers(uint32_t k) const {
  std::vector<uint32_t> sorted;
  if (plan_.process_groups.empty()) {
    sorted = plan_.comms[k].members;
  } else {
    const bootstrap::PlanProcessGroup& g = plan_.process_groups[EntryOf(k)];
    sorted = g.gloo ? g.members : plan_.comms[g.comm].members;
  }
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

absl::StatusOr<uint32_t> GroupResolver::ResolveHashed(const std::string& name) const {
  const uint32_t count = GroupCount();
  for (uint32_t k = 1; k < count; ++k) {
    const std::string ranks = absl::StrJoin(SortedMembers(k), "_");
    for (uint32_t made = 0; made <= count; ++made) {  // groups the rank had made before
      if (Sha1Hex(absl::StrCat(ranks, "_", made)) == name) return k;
    }
  }
  return absl::NotFoundError(absl::StrCat(
      "PyTorch group '", name, "' (new_group with use_local_synchronization) hashes members that no "
      "group of the graph has: the program's groups differ from the graph's; regenerate the graph "
      "for this program's layout"));
}

absl::StatusOr<ResolvedGroup> GroupResolver::Resolve(const std::string& group) const {
  const uint32_t count = GroupCount();
  uint32_t k = 0;
  if (IsSha1Hex(group)) {
    auto hashed = ResolveHashed(group);
    if (!hashed.ok()) return hashed.status();
    k = *hashed;
  } else {
    uint64_t number = 0;
    if (!absl::SimpleAtoi(group, &number)) {
      return absl::InvalidArgumentError(absl::StrCat("bad group name '", group, "'"));
    }
    if (number >= count) {
      return absl::NotFoundError(absl::StrCat(
          "PyTorch group '", group, "' is the program's new_group call #", number, ", but the graph lists only ",
          count == 0 ? 0 : count - 1, " groups after the world: the program makes more groups than the graph "
          "(Gloo groups count too) or makes them in another order; regenerate the graph for this program's "
          "groups, in creation order"));
    }
    k = static_cast<uint32_t>(number);
  }
  k = EntryOf(k);  // from here on: the process-group list's entry
  ResolvedGroup r;
  const std::string number_note = absl::StrCat(" (PyTorch group ", group.substr(0, 12), ")");
  if (!plan_.process_groups.empty() && plan_.process_groups[k].gloo) {
    const bootstrap::PlanProcessGroup& g = plan_.process_groups[k];
    r.gloo = true;
    r.members = g.members;
    r.name = absl::StrCat(g.name, number_note);
    return r;
  }
  r.plan_id = plan_.process_groups.empty() ? k : plan_.process_groups[k].comm;
  const bootstrap::PlanComm& pc = plan_.comms[r.plan_id];
  if (r.plan_id == 0 && (pc.parent || pc.members.size() != plan_.ranks.size())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the graph's first communicator (", pc.name, ", ", pc.members.size(), " ranks) is not the whole world ",
        "(", plan_.ranks.size(), " ranks), so it cannot be PyTorch's default group"));
  }
  r.members = pc.members;
  r.name = group == "0" ? pc.name : absl::StrCat(pc.name, number_note);
  return r;
}

absl::StatusOr<ResolvedGroup> GroupResolver::ResolveNccl(const std::string& group) const {
  auto r = Resolve(group);
  if (r.ok() && r->gloo) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the program asks for an NCCL communicator of PyTorch group ", group.substr(0, 12), ", which is the Gloo "
        "group ", r->name, " in the graph: the program's groups differ from the graph's (order or backend); "
        "regenerate the graph for this program (parallel.megatron_version, parallel.gloo_groups)"));
  }
  return r;
}

}  // namespace prism::rendezvous
