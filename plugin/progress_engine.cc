#include "plugin/progress_engine.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "plugin/clock.h"
#include "plugin/thread_name.h"

namespace prism::plugin {

ProgressEngine::~ProgressEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.store(true, std::memory_order_release);
  ForceWake();
  if (thread_.joinable()) thread_.join();
}

void ProgressEngine::ForceWake() {
  uint64_t one = 1;
  ssize_t r = write(waker_.fd(), &one, sizeof(one));
  (void)r;
}

void ProgressEngine::Add(ProgressClient* client) {
  std::lock_guard<std::mutex> lock(mu_);
  clients_.push_back(client);
  client_count_.fetch_add(1, std::memory_order_acq_rel);
  ++version_;
  changed_.store(true, std::memory_order_release);
  if (!thread_.joinable()) thread_ = std::thread([this] { MainGuarded(); });
  ForceWake();
}

void ProgressEngine::Remove(ProgressClient* client) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto it = std::remove(clients_.begin(), clients_.end(), client);
  if (it != clients_.end()) client_count_.fetch_sub(1, std::memory_order_acq_rel);
  clients_.erase(it, clients_.end());
  const uint64_t target = ++version_;
  changed_.store(true, std::memory_order_release);
  ForceWake();
  cv_.wait(lock, [&] { return seen_version_ >= target || stop_; });
}

// The loop itself (not a client) threw, e.g. out of memory growing a vector:
// say so and run it again, so that the comms it serves keep moving.
void ProgressEngine::MainGuarded() {
  NameThisThread("prism progress");
  for (;;) {
    try {
      Main();
      return;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "NET/Prism: progress thread: %s; continuing\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "NET/Prism: progress thread: unknown exception; continuing\n");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

template <typename Call>
bool ProgressEngine::Guarded(ProgressClient* c, Call&& call) {
  if (std::find(failed_.begin(), failed_.end(), c) != failed_.end()) return false;
  std::string why;
  try {
    call();
    return true;
  } catch (const std::exception& e) {
    why = std::string("the plugin's progress thread failed on this connection: ") + e.what();
  } catch (...) {
    why = "the plugin's progress thread failed on this connection (unknown exception)";
  }
  failed_.push_back(c);
  try {
    c->Failed(why);
  } catch (...) {  // nothing more can be done for it; it is never called again
  }
  return false;
}

void ProgressEngine::Main() {
  std::vector<ProgressClient*> local;
  std::vector<pollfd> fds;
  int64_t idle_since = -1;
  for (;;) {
    if (changed_.exchange(false, std::memory_order_acq_rel)) {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      local = clients_;
      // Failed clients that were removed may be reused addresses later.
      failed_.erase(std::remove_if(failed_.begin(), failed_.end(),
                                   [&](ProgressClient* f) {
                                     return std::find(local.begin(), local.end(), f) == local.end();
                                   }),
                    failed_.end());
      seen_version_ = version_;
      cv_.notify_all();
    }
    bool progressed = false;
    for (ProgressClient* c : local) Guarded(c, [&] { c->Step(&progressed); });
    if (progressed) {
      idle_since = -1;
      continue;
    }
    const int64_t now = MonoNowNs();
    if (idle_since < 0) idle_since = now;
    if (now - idle_since < spin_ns_) {
      sched_yield();  // other threads (NCCL's proxy, peers) may need this core
      continue;
    }
    waker_.PrepareSleep();
    bool input = changed_.load(std::memory_order_acquire);
    for (ProgressClient* c : local) {
      if (input) break;
      Guarded(c, [&] { input = c->HasInput(); });
    }
    if (!input) {
      fds.clear();
      fds.push_back(pollfd{waker_.fd(), POLLIN, 0});
      for (ProgressClient* c : local) Guarded(c, [&] { c->FillPoll(&fds); });
      poll(fds.data(), fds.size(), 100);
    }
    waker_.AfterSleep();
    idle_since = -1;
  }
}

std::shared_ptr<ProgressEngine> ProgressEnginePool::Attach(ProgressClient* client) {
  std::shared_ptr<ProgressEngine> engine;
  if (inline_progress()) return engine;
  std::lock_guard<std::mutex> lock(mu_);
  if (threads_ == 0) {
    engine = std::make_shared<ProgressEngine>(spin_ns_);
  } else {
    for (const std::shared_ptr<ProgressEngine>& e : engines_) {
      if (!engine || e->client_count() < engine->client_count()) engine = e;
    }
    // A new engine (thread) while below the limit and every engine is busy.
    if (static_cast<int>(engines_.size()) < threads_ && (!engine || engine->client_count() > 0)) {
      engine = std::make_shared<ProgressEngine>(spin_ns_);
      engines_.push_back(engine);
    }
  }
  engine->Add(client);  // under mu_: concurrent Attach calls see this load
  return engine;
}

int ProgressEnginePool::engine_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(engines_.size());
}

}  // namespace prism::plugin
