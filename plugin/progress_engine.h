// Progress threads for real-peer comms. A ProgressEngine is one thread
// serving several comms; a ProgressEnginePool is a plugin context's set of
// engines (PRISM_PROGRESS_THREADS of them, or one per comm), so that a rank
// with dozens of NCCL connections runs a bounded number of I/O threads while
// its concurrently busy comms still move bytes in parallel.
//
// Each client (a comm) owns its sockets and an SPSC ring fed by NCCL's proxy
// thread; the engine thread calls every client's Step() in turn, and when
// none made progress for `spin_ns` (yielding meanwhile) it sleeps in poll()
// on the fds the clients ask for plus its eventfd (100 ms cap). A client is
// served by exactly one engine for its whole life. A real-peer comm
// (real_comms.h) is stepped by its engine only while it has bulk messages in
// flight, and otherwise by NCCL's proxy thread under the comm's step lock, so
// its ring's consumer is whichever of the two holds that lock (NCCL's proxy
// thread stays the one producer).
//
// Thread-safety: Add/Remove/Wake/client_count from any thread. After
// Remove(c) returns, the engine thread never touches c again. The thread
// starts on the first Add and is joined by the destructor.
#ifndef PRISM_PLUGIN_PROGRESS_ENGINE_H_
#define PRISM_PLUGIN_PROGRESS_ENGINE_H_

#include <poll.h>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
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
  // Called by the engine thread when one of the methods above threw: the
  // client must fail its pending and future requests with `why` (NCCL then
  // reports an error; the training process is never terminated by a plugin
  // thread). The engine does not call the client again, except Failed.
  virtual void Failed(const std::string& why) = 0;
};

// PRISM_PROGRESS_THREADS=-1: no progress threads; NCCL's proxy thread moves
// a real-peer comm's bytes inside its isend/irecv/test calls.
inline constexpr int kInlineProgress = -1;

// Moving a client's bytes on the calling thread (NCCL's proxy thread, the
// only caller of a comm's isend/irecv/test): runs `step(&progressed)`, with
// the client's own serialization held by the caller. A throw fails the
// client (Failed), as under an engine; it never reaches NCCL.
template <typename StepFn>
void StepInline(ProgressClient* client, StepFn&& step) {
  bool progressed = false;
  try {
    step(&progressed);
  } catch (const std::exception& e) {
    client->Failed(std::string("moving bytes on NCCL's proxy thread failed: ") + e.what());
  } catch (...) {
    client->Failed("moving bytes on NCCL's proxy thread failed (unknown exception)");
  }
}

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
  // Clients added and not yet removed (the pool's load measure).
  int client_count() const { return client_count_.load(std::memory_order_acquire); }

 private:
  void Main();
  void MainGuarded();
  void ForceWake();
  // Runs `call` for client `c`; if it throws, marks c failed (Failed, and
  // no more calls) and returns false.
  template <typename Call>
  bool Guarded(ProgressClient* c, Call&& call);

  std::vector<ProgressClient*> failed_;   // engine thread only

  int64_t spin_ns_;
  Waker waker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ProgressClient*> clients_;  // guarded by mu_
  uint64_t version_ = 0;                  // guarded by mu_; bumped on change
  uint64_t seen_version_ = 0;             // guarded by mu_; what the thread uses
  bool stop_ = false;                     // guarded by mu_
  std::atomic<bool> changed_{false};
  std::atomic<int> client_count_{0};
  std::thread thread_;
};

// A plugin context's engines. With `threads` > 0 it creates up to that many
// engines, lazily, and attaches each new client to the engine with the
// fewest clients (lowest index on ties: round-robin while nothing closes).
// With `threads` == 0 every client gets an engine (thread) of its own,
// which ends when the client's last reference to it goes. With `threads`
// < 0 there are no engines (kInlineProgress): Attach returns null and each
// client drives itself from NCCL's proxy thread (isend/irecv/test).
//
// Thread-safety: Attach from any thread. Engines are shared with the
// clients, so they outlive the pool while a client still uses them.
class ProgressEnginePool {
 public:
  ProgressEnginePool(int threads, int64_t spin_ns) : threads_(threads), spin_ns_(spin_ns) {}
  ProgressEnginePool(const ProgressEnginePool&) = delete;
  ProgressEnginePool& operator=(const ProgressEnginePool&) = delete;

  // Adds `client` to the chosen engine and returns it; the client must call
  // engine->Remove(client) before it is destroyed. Null in inline mode.
  std::shared_ptr<ProgressEngine> Attach(ProgressClient* client);
  bool inline_progress() const { return threads_ < 0; }
  // Engines created so far (threads == 0: always 0, they are not kept).
  int engine_count() const;

 private:
  const int threads_;
  const int64_t spin_ns_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<ProgressEngine>> engines_;  // guarded by mu_
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_PROGRESS_ENGINE_H_
