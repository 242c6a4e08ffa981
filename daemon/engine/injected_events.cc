#include "daemon/engine/injected_events.h"

#include <variant>

#include "absl/strings/str_cat.h"

namespace prism::engine {
namespace {

bool IsComm(OpKind k) { return k == OpKind::kCollective || k == OpKind::kSend || k == OpKind::kRecv; }

absl::Status Check(const EngineWorld& world, uint32_t rank, uint32_t op, bool completion, uint32_t* actor) {
  if (rank >= world.actor_of_rank.size())
    return absl::InvalidArgumentError(absl::StrCat("injected event names rank ", rank, " outside the world"));
  *actor = world.actor_of_rank[rank];
  if (!world.actors[*actor].real)
    return absl::InvalidArgumentError(absl::StrCat("injected event for rank ", rank, ", which is not real"));
  const ProgramInfo& p = world.programs[world.actors[*actor].program];
  if (op > p.ops.size() || (completion && op == p.ops.size()))
    return absl::InvalidArgumentError(
        absl::StrCat("injected event names op ", op, " of rank ", rank, ", beyond its program"));
  if (completion && !IsComm(p.ops[op].kind))
    return absl::InvalidArgumentError(
        absl::StrCat("injected completion of op ", op, " of rank ", rank, ", which is not a communication op"));
  return absl::OkStatus();
}

}  // namespace

absl::Status DrainInjected(const EngineWorld& world, EngineInbox& inbox, InjectedEvents* out) {
  out->events.clear();
  out->stop = out->ended = false;
  out->reports = 0;
  std::vector<InboxEvent> posted;
  inbox.Drain(&posted);
  for (const InboxEvent& e : posted) {
    uint32_t actor = 0;
    if (std::holds_alternative<StopRequest>(e)) {
      out->stop = true;
    } else if (std::holds_alternative<EndOfInput>(e)) {
      out->ended = true;
    } else if (const auto* r = std::get_if<RankReachedOp>(&e)) {
      if (auto s = Check(world, r->rank, r->op, false, &actor); !s.ok()) return s;
      out->events.push_back(Event{r->at, actor, r->op | kReachFlag, r->at});
      ++out->reports;
    } else if (const auto* c = std::get_if<RankCompletedOp>(&e)) {
      if (auto s = Check(world, c->rank, c->op, true, &actor); !s.ok()) return s;
      out->events.push_back(Event{c->at, actor, c->op | kCompleteFlag, c->started});
      ++out->reports;
    }
  }
  return absl::OkStatus();
}

}  // namespace prism::engine
