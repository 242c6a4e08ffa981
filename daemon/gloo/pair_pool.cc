#include "daemon/gloo/pair_pool.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace prism::gloo {
namespace {

constexpr auto kTrafficEvery = std::chrono::milliseconds(200);

void Add(PairCounters* sum, const PairCounters& c) {
  sum->messages_in += c.messages_in;
  sum->messages_out += c.messages_out;
  sum->payload_in += c.payload_in;
  sum->payload_out += c.payload_out;
  sum->bound_buffer_sends += c.bound_buffer_sends;
}

}  // namespace

PairPool::PairPool(PairPoolOptions options, std::function<void(const std::string&)> on_error)
    : options_(options), on_error_(std::move(on_error)) {}

absl::StatusOr<std::unique_ptr<PairPool>> PairPool::Start(PairPoolOptions options,
                                                          std::function<void(const std::string&)> on_error) {
  std::unique_ptr<PairPool> pool(new PairPool(options, std::move(on_error)));
  if (auto s = pool->loop_.Init(); !s.ok()) return s;
  PairPool* self = pool.get();
  pool->thread_ = std::thread([self] { self->loop_.Run(nullptr); });
  pool->loop_.Post([self] { self->PublishTraffic(); });
  return pool;
}

PairPool::~PairPool() {
  Stop();
  for (auto& [p, pair] : pairs_) pair->Close();
}

void PairPool::Stop() {
  loop_.Stop();
  if (thread_.joinable()) thread_.join();
}

void PairPool::Dial(PairTarget target) {
  PendingDial dial{std::move(target), options_.connect_attempts, options_.connect_retry, job_.load()};
  loop_.Post([this, dial] {
    dials_.push_back(dial);
    StartDials();
  });
}

void PairPool::EndJob() {
  ++job_;
  loop_.Post([this] { CloseAll(); });
}

PairPoolStats PairPool::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

// Loop thread from here on.

void PairPool::StartDials() {
  while (connecting_.size() < options_.max_connecting && !dials_.empty()) {
    PendingDial dial = std::move(dials_.front());
    dials_.pop_front();
    if (dial.job != job_.load()) continue;  // a job that ended
    PairEvents* events = this;
    auto pair = std::make_unique<VirtualPair>(&loop_, dial.target, events);
    VirtualPair* p = pair.get();
    pairs_[p] = std::move(pair);
    connecting_[p] = std::move(dial);
    p->Connect();
  }
}

void PairPool::OnPairOpen(VirtualPair* pair) {
  connecting_.erase(pair);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.opened;
    ++stats_.open;
  }
  spdlog::debug("gloo: {}: connected", pair->target().name);
  StartDials();
}

void PairPool::OnPairClosed(VirtualPair* pair, const absl::Status& why) {
  std::string error;
  auto connecting = connecting_.find(pair);
  {
    std::lock_guard<std::mutex> lock(mu_);
    Add(&closed_traffic_, pair->counters());
    if (connecting != connecting_.end()) {
      PendingDial dial = std::move(connecting->second);
      connecting_.erase(connecting);
      if (dial.attempts_left > 1) {
        --dial.attempts_left;
        const auto delay = dial.retry;
        dial.retry *= 2;
        loop_.AddTimer(delay, [this, dial] {
          dials_.push_back(dial);
          StartDials();
        });
      } else {
        ++stats_.failed;
        error = absl::StrCat(pair->target().name, ": cannot connect to the real rank's Gloo listener at ",
                             AddressText(pair->target().listener), " (", options_.connect_attempts, " attempts): ",
                             why.message(), "; the real rank's Gloo connect fails by its own timeout");
      }
    } else {
      --stats_.open;
      if (!why.ok()) {
        ++stats_.failed;
        error = absl::StrCat(pair->target().name, ": ", why.message());
      }
    }
  }
  if (!error.empty()) on_error_(error);
  if (why.ok()) spdlog::debug("gloo: {}: closed by the real rank", pair->target().name);
  Retire(pair);
  loop_.AddTimer(std::chrono::nanoseconds(0), [this] { StartDials(); });
}

// Destroyed after the current batch of events (which may still name it).
void PairPool::Retire(VirtualPair* pair) {
  loop_.AddTimer(std::chrono::nanoseconds(0), [this, pair] { pairs_.erase(pair); });
}

void PairPool::CloseAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [p, pair] : pairs_) {
    Add(&closed_traffic_, pair->counters());
    pair->Close();
  }
  pairs_.clear();
  connecting_.clear();
  dials_.clear();
  stats_.open = 0;
  stats_.traffic = closed_traffic_;
}

void PairPool::PublishTraffic() {
  PairCounters live;
  for (const auto& [p, pair] : pairs_) {
    if (pair->open()) Add(&live, pair->counters());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.traffic = closed_traffic_;
    Add(&stats_.traffic, live);
  }
  loop_.AddTimer(kTrafficEvery, [this] { PublishTraffic(); });
}

}  // namespace prism::gloo
