// One progress thread per plugin context, shared by all the context's
// real-peer comms (so that a rank with dozens of NCCL connections runs one
// I/O thread per communicator, not one per connection).
//
// Each client (a comm) owns its sockets and an SPSC ring fed by NCCL's proxy
// thread; the engine thread calls every client's Step() in turn, and when
// none made progress for `spin_ns` (yielding meanwhile) it sleeps in poll()
// on the fds the clients ask for plus its eventfd (100 ms cap).
//
// Thread-safety: Add/Remove/Wake from any thread. After Remove(c) returns,
// the engine thread never touches c again. The thread starts on the first
// Add and is joined by the destructor.
#ifndef PRISM_PLUGIN_PROGRESS_ENGINE_H_
#define PRISM_PLUGIN_PROGRESS_ENGINE_H_

#include <poll.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "plugin/waker.h"

namespace prism::plugin {

class ProgressClient {
 public:
  virtual ~ProgressClient() = default;
  // Moves what it can without blocking; sets *progressed when it did
  // anything. A broken client records that itself and returns quickly.
  virtual void Step(bool* progressed) = 0;
  // Appends the fds (and events) it waits for.
  virtual void FillPoll(std::vector<pollfd>* fds) = 0;
  // True when work is queued for it (checked before sleeping).
  virtual bool HasInput() = 0;
};

class ProgressEngine {
 public:
  explicit ProgressEngine(int64_t spin_ns) : spin_ns_(spin_ns) {}
  ~ProgressEngine();
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  void Add(ProgressClient* client);
  void Remove(ProgressClient* client);
  // Producers call this after publishing work for a client.
  void Wake() { waker_.Wake(); }

 private:
  void Main();
  void ForceWake();

  int64_t spin_ns_;
  Waker waker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ProgressClient*> clients_;  // guarded by mu_
  uint64_t version_ = 0;                  // guarded by mu_; bumped on change
  uint64_t seen_version_ = 0;             // guarded by mu_; what the thread uses
  bool stop_ = false;                     // guarded by mu_
  std::atomic<bool> changed_{false};
  std::thread thread_;
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_PROGRESS_ENGINE_H_
