// ProgressEnginePool: how comms are spread over a context's progress threads
// (PRISM_PROGRESS_THREADS), and that each comm is served by one thread only.
#include <catch2/catch.hpp>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "plugin/progress_engine.h"

namespace {

using prism::plugin::ProgressClient;
using prism::plugin::ProgressEngine;
using prism::plugin::ProgressEnginePool;

// Records which threads ran its Step().
class FakeClient final : public ProgressClient {
 public:
  void Step(bool* progressed) override {
    std::lock_guard<std::mutex> lock(mu_);
    threads_.insert(std::this_thread::get_id());
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof(name));
    thread_name_ = name;
    steps_.fetch_add(1);
  }
  void FillPoll(std::vector<pollfd>* fds) override {}
  bool HasInput() override { return false; }
  void Failed(const std::string& why) override {}

  int steps() const { return steps_.load(); }
  std::set<std::thread::id> threads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return threads_;
  }
  std::string thread_name() const {
    std::lock_guard<std::mutex> lock(mu_);
    return thread_name_;
  }

 private:
  mutable std::mutex mu_;
  std::set<std::thread::id> threads_;
  std::string thread_name_;
  std::atomic<int> steps_{0};
};

struct Attached {
  FakeClient client;
  std::shared_ptr<ProgressEngine> engine;
};

// Waits (up to 10 s) until every client was stepped a few times.
bool AllStepped(const std::vector<std::unique_ptr<Attached>>& all) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (const auto& a : all) {
    while (a->client.steps() < 3) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      a->engine->Wake();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return true;
}

}  // namespace

TEST_CASE("progress pool: N threads, comms to the least loaded, lowest index on ties",
          "[plugin][unit]") {
  auto pool = std::make_shared<ProgressEnginePool>(3, 1000);
  std::vector<std::unique_ptr<Attached>> all;
  for (int i = 0; i < 5; ++i) {
    all.push_back(std::make_unique<Attached>());
    all.back()->engine = pool->Attach(&all.back()->client);
  }
  CHECK(pool->engine_count() == 3);
  // Round-robin while nothing closes: 0,1,2,0,1.
  CHECK(all[0]->engine != all[1]->engine);
  CHECK(all[1]->engine != all[2]->engine);
  CHECK(all[0]->engine != all[2]->engine);
  CHECK(all[3]->engine == all[0]->engine);
  CHECK(all[4]->engine == all[1]->engine);
  CHECK(all[0]->engine->client_count() == 2);
  CHECK(all[2]->engine->client_count() == 1);

  // Close client 0: engines 0 and 2 now serve one each; the next goes to 0.
  all[0]->engine->Remove(&all[0]->client);
  CHECK(all[3]->engine->client_count() == 1);
  all.push_back(std::make_unique<Attached>());
  all.back()->engine = pool->Attach(&all.back()->client);
  CHECK(all.back()->engine == all[3]->engine);
  CHECK(pool->engine_count() == 3);
  all.erase(all.begin());

  // Each client is stepped by exactly one thread, the one of its engine.
  REQUIRE(AllStepped(all));
  std::set<std::thread::id> distinct;
  for (const auto& a : all) {
    const auto t = a->client.threads();
    CHECK(t.size() == 1);
    distinct.insert(t.begin(), t.end());
  }
  CHECK(distinct.size() == 3);
  for (const auto& a : all) a->engine->Remove(&a->client);
}

TEST_CASE("progress pool: 1 thread serves every comm", "[plugin][unit]") {
  auto pool = std::make_shared<ProgressEnginePool>(1, 1000);
  std::vector<std::unique_ptr<Attached>> all;
  for (int i = 0; i < 4; ++i) {
    all.push_back(std::make_unique<Attached>());
    all.back()->engine = pool->Attach(&all.back()->client);
  }
  CHECK(pool->engine_count() == 1);
  CHECK(all[0]->engine->client_count() == 4);
  REQUIRE(AllStepped(all));
  std::set<std::thread::id> distinct;
  for (const auto& a : all) {
    const auto t = a->client.threads();
    distinct.insert(t.begin(), t.end());
  }
  CHECK(distinct.size() == 1);
  for (const auto& a : all) a->engine->Remove(&a->client);
}

TEST_CASE("progress pool: 0 means one thread per comm, ended with the comm",
          "[plugin][unit]") {
  auto pool = std::make_shared<ProgressEnginePool>(0, 1000);
  std::vector<std::unique_ptr<Attached>> all;
  for (int i = 0; i < 3; ++i) {
    all.push_back(std::make_unique<Attached>());
    all.back()->engine = pool->Attach(&all.back()->client);
  }
  CHECK(pool->engine_count() == 0);  // not kept by the pool
  CHECK(all[0]->engine != all[1]->engine);
  CHECK(all[1]->engine != all[2]->engine);
  REQUIRE(AllStepped(all));
  std::set<std::thread::id> distinct;
  for (const auto& a : all) {
    const auto t = a->client.threads();
    CHECK(t.size() == 1);
    distinct.insert(t.begin(), t.end());
  }
  CHECK(distinct.size() == 3);
  for (const auto& a : all) {
    a->engine->Remove(&a->client);
    CHECK(a->engine.use_count() == 1);  // the comm held the only reference
    a->engine.reset();                  // joins the thread
  }
}

namespace {

// Throws from its third Step (as a bug or an allocation failure would).
class ThrowingClient final : public ProgressClient {
 public:
  void Step(bool* progressed) override {
    if (steps_.fetch_add(1) == 2) throw std::runtime_error("boom");
  }
  void FillPoll(std::vector<pollfd>* fds) override {}
  bool HasInput() override { return false; }
  void Failed(const std::string& why) override {
    std::lock_guard<std::mutex> lock(mu_);
    why_ = why;
  }
  int steps() const { return steps_.load(); }
  std::string why() const {
    std::lock_guard<std::mutex> lock(mu_);
    return why_;
  }

 private:
  mutable std::mutex mu_;
  std::string why_;
  std::atomic<int> steps_{0};
};

}  // namespace

TEST_CASE("progress engine: a client that throws is failed, not the process, and the others go on",
          "[plugin][unit]") {
  ProgressEngine engine(1000);
  ThrowingClient bad;
  FakeClient good;
  engine.Add(&bad);
  engine.Add(&good);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (bad.why().empty() && std::chrono::steady_clock::now() < deadline) {
    engine.Wake();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(bad.why().find("boom") != std::string::npos);
  const int bad_steps = bad.steps(), good_steps = good.steps();
  while (good.steps() < good_steps + 5 && std::chrono::steady_clock::now() < deadline) {
    engine.Wake();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(good.steps() >= good_steps + 5);  // the thread still serves the others
  CHECK(bad.steps() == bad_steps);        // and never calls the failed one again
  engine.Remove(&bad);
  engine.Remove(&good);
}

TEST_CASE("progress pool: the progress thread is named, so CPU profiles tell it from NCCL's",
          "[plugin][unit]") {
  auto pool = std::make_shared<ProgressEnginePool>(0, 1000);
  std::vector<std::unique_ptr<Attached>> all;
  all.push_back(std::make_unique<Attached>());
  all.back()->engine = pool->Attach(&all.back()->client);
  REQUIRE(AllStepped(all));
  CHECK(all.back()->client.thread_name() == "prism progress");
  all.back()->engine->Remove(&all.back()->client);
}
