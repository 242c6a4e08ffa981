#include "plugin/link_arbiter.h"

#include <algorithm>
#include <cstdint>

namespace prism::plugin {

uint32_t LinkArbiter::AddConnection(bool whole_messages) {
  uint32_t id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<uint32_t>(conns_.size());
    conns_.emplace_back();
  }
  conns_[id].in_use = true;
  conns_[id].whole_messages = whole_messages;
  return id;
}

void LinkArbiter::RemoveConnection(uint32_t conn) {
  if (conn >= conns_.size() || !conns_[conn].in_use) return;
  Connection& c = conns_[conn];
  waiting_ -= c.waiting.size();
  c = Connection{};
  free_ids_.push_back(conn);
}

std::optional<LinkModel::Times> LinkArbiter::Post(uint32_t conn, Bytes bytes, Nanoseconds now) {
  Connection& c = conns_.at(conn);
  if (order_ == LinkOrder::kPosted) return link_.Reserve(bytes, now);
  c.waiting.push_back(Posted{bytes, now});
  ++waiting_;
  DecideUpTo(now);
  if (!c.waiting.empty() || c.decided.size() != 1) return std::nullopt;  // it, or one before it, still to come
  const LinkModel::Times t = c.decided.front();
  c.decided.pop_front();
  return t;
}

std::optional<LinkModel::Times> LinkArbiter::NextDecided(uint32_t conn, Nanoseconds now) {
  if (order_ == LinkOrder::kRoundRobin) DecideUpTo(now);
  Connection& c = conns_.at(conn);
  if (c.decided.empty()) return std::nullopt;
  const LinkModel::Times t = c.decided.front();
  c.decided.pop_front();
  return t;
}

void LinkArbiter::DecideUpTo(Nanoseconds now) {
  while (waiting_ > 0) {
    Nanoseconds at = link_.wire_free();
    int next = NextInTurn(at);
    if (next < 0) {  // idle at `at`: the next decision comes with the next posting
      at = EarliestWaiting();
      next = NextInTurn(at);
    }
    if (at > now + decide_ahead_) return;  // a message posted before then may still take this turn
    Connection& c = conns_[static_cast<uint32_t>(next)];
    Posted& p = c.waiting.front();
    const Bytes slice = c.whole_messages ? p.left : Bytes(std::min(p.left.count(), kRoundRobinSlice.count()));
    const LinkModel::Times t = link_.Reserve(slice, at);
    p.left = Bytes(p.left.count() - slice.count());
    last_served_ = static_cast<uint32_t>(next);
    if (p.left.count() > 0) continue;
    c.waiting.pop_front();
    --waiting_;
    c.decided.push_back(t);
  }
}

int LinkArbiter::NextInTurn(Nanoseconds at) const {
  const size_t n = conns_.size();
  for (size_t i = 1; i <= n; ++i) {
    const size_t id = (last_served_ + i) % n;
    const Connection& c = conns_[id];
    if (c.in_use && !c.waiting.empty() && c.waiting.front().at <= at) return static_cast<int>(id);
  }
  return -1;
}

Nanoseconds LinkArbiter::EarliestWaiting() const {
  Nanoseconds earliest(INT64_MAX);
  for (const Connection& c : conns_) {
    if (!c.waiting.empty()) earliest = std::min(earliest, c.waiting.front().at);
  }
  return earliest;
}

}  // namespace prism::plugin
