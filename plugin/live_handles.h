// The comms, listen comms and net contexts this plugin handed to NCCL and
// that were not closed or finalized yet. Closing one takes it out, so a
// second close (or finalize) of the same pointer, or of one never handed out,
// is refused without touching freed memory (the object's own tag cannot
// tell: its memory is the allocator's once deleted).
//
// Thread-safety: every member may be called from any thread.
#ifndef PRISM_PLUGIN_LIVE_HANDLES_H_
#define PRISM_PLUGIN_LIVE_HANDLES_H_

#include <mutex>
#include <unordered_set>

namespace prism::plugin {

class LiveHandles {
 public:
  // Records `p` (non-null) as handed out.
  void Add(const void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.insert(p);
  }
  // Whether `p` is handed out and not taken back.
  bool Contains(const void* p) const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.count(p) != 0;
  }
  // True, forgetting `p`, when it was handed out and not taken back yet;
  // false otherwise (a double close, or a pointer this plugin never made).
  bool Take(const void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.erase(p) != 0;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_set<const void*> live_;
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_LIVE_HANDLES_H_
