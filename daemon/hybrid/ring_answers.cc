#include "daemon/hybrid/ring_answers.h"

#include <algorithm>

namespace prism::daemon {

uint64_t RingAnswers::Started(uint32_t rank, bool gates) {
  Rank& r = ranks_[rank];
  const uint64_t order = r.next_order++;
  if (gates) r.in_flight.insert(order);
  return order;
}

void RingAnswers::Finished(uint32_t rank, uint64_t order, Nanoseconds end) {
  Rank& r = ranks_[rank];
  r.in_flight.erase(order);
  r.last_end = Max(r.last_end, end);
}

void RingAnswers::Defer(uint32_t rank, uint64_t order, Ring ring, Nanoseconds at) {
  ranks_[rank].deferred.push_back(Deferred{order, ring, at});
}

std::vector<RingAnswers::Due> RingAnswers::TakeAnswerable() {
  std::vector<Due> out;
  for (auto& [rank, r] : ranks_) {
    if (r.deferred.empty()) continue;
    // The ring itself is in flight: answerable once it is the oldest.
    const uint64_t oldest = r.in_flight.empty() ? UINT64_MAX : *r.in_flight.begin();
    size_t taken = 0;
    while (taken < r.deferred.size() && r.deferred[taken].order <= oldest) {
      const Deferred& d = r.deferred[taken++];
      out.push_back(Due{rank, d.ring, Max(d.at, r.last_end)});
    }
    r.deferred.erase(r.deferred.begin(), r.deferred.begin() + static_cast<std::ptrdiff_t>(taken));
  }
  return out;
}

bool RingAnswers::AllReduceEndLagsKernel(uint64_t bytes, int32_t comm_size) {
  return comm_size > 0 && bytes < static_cast<uint64_t>(comm_size);
}

size_t RingAnswers::deferred() const {
  size_t n = 0;
  for (const auto& [rank, r] : ranks_) n += r.deferred.size();
  return n;
}

}  // namespace prism::daemon
