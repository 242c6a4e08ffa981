#include "daemon/engine/nic_sharing.h"

#include <algorithm>

namespace prism::engine {
namespace {

constexpr int64_t kPsPerNs = 1000;

}  // namespace

uint64_t SharedNics::Start(Nanoseconds now, Nanoseconds alone, const std::vector<uint32_t>& directions) {
  Advance(now);
  flows_.push_back(Flow{next_id_, std::max<int64_t>(alone.count(), 1) * kPsPerNs, directions});
  for (uint32_t d : directions) ++load_[d];
  Reshare();
  return next_id_++;
}

Nanoseconds SharedNics::NextFinish() const {
  Nanoseconds next = Nanoseconds::Max();
  for (const Flow& f : flows_) {
    // The first whole nanosecond by which it has done its remaining work.
    const int64_t ns = (f.remaining_ps * f.share + kPsPerNs - 1) / kPsPerNs;
    next = Min(next, last_ + Nanoseconds(std::max<int64_t>(ns, 0)));
  }
  return next;
}

std::vector<uint64_t> SharedNics::FinishBy(Nanoseconds now) {
  Advance(now);
  std::vector<uint64_t> done;
  auto finished = [](const Flow& f) { return f.remaining_ps <= 0; };
  for (const Flow& f : flows_) {
    if (!finished(f)) continue;
    done.push_back(f.id);
    for (uint32_t d : f.directions) --load_[d];
  }
  if (!done.empty()) {
    flows_.erase(std::remove_if(flows_.begin(), flows_.end(), finished), flows_.end());
    Reshare();
  }
  return done;
}

void SharedNics::Advance(Nanoseconds now) {
  const int64_t elapsed = (now - last_).count();
  if (elapsed > 0)
    for (Flow& f : flows_) f.remaining_ps -= elapsed * kPsPerNs / f.share;
  last_ = Max(last_, now);
}

void SharedNics::Reshare() {
  for (Flow& f : flows_) {
    uint32_t busiest = 1;
    for (uint32_t d : f.directions) busiest = std::max(busiest, load_[d]);
    f.share = busiest;
  }
}

}  // namespace prism::engine
