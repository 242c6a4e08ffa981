#include "daemon/store/store_table.h"

#include "absl/strings/numbers.h"

namespace prism::store {

const std::string* StoreTable::Find(const std::string& key) const {
  const auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

std::string StoreTable::ValueOr(const std::string& key) const {
  const std::string* v = Find(key);
  return v == nullptr ? std::string() : *v;
}

int64_t StoreTable::NumberAt(const std::string& key) const {
  int64_t n = 0;
  const std::string* v = Find(key);
  if (v == nullptr || !absl::SimpleAtoi(*v, &n)) return 0;
  return n;
}

bool StoreTable::AllSet(const std::vector<std::string>& keys) const {
  for (const std::string& k : keys) {
    if (kv_.count(k) == 0) {
      auto q = queues_.find(k);
      if (q == queues_.end() || q->second.empty()) return false;
    }
  }
  return true;
}

uint64_t StoreTable::StoredSize(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? 0 : key.size() + it->second.size();
}

void StoreTable::Set(const std::string& key, const std::string& value, bool by_prismd) {
  if (prismd_keys_.erase(key) != 0) prismd_bytes_ -= StoredSize(key);
  stored_bytes_ = stored_bytes_ - StoredSize(key) + key.size() + value.size();
  kv_[key] = value;
  if (by_prismd) {
    prismd_keys_.insert(key);
    prismd_bytes_ += key.size() + value.size();
  }
}

bool StoreTable::Forget(const std::string& key) {
  if (prismd_keys_.erase(key) != 0) prismd_bytes_ -= StoredSize(key);
  stored_bytes_ -= StoredSize(key);
  return kv_.erase(key) != 0;
}

void StoreTable::QueuePush(const std::string& key, const std::string& value) {
  stored_bytes_ += key.size() + value.size();
  queues_[key].push_back(value);
}

std::pair<int64_t, std::optional<std::string>> StoreTable::QueuePop(const std::string& key) {
  auto& queue = queues_[key];
  const auto length = static_cast<int64_t>(queue.size());
  if (queue.empty()) return {length, std::nullopt};
  std::string front = std::move(queue.front());
  queue.pop_front();
  stored_bytes_ -= key.size() + front.size();
  return {length, std::move(front)};
}

int64_t StoreTable::QueueLength(const std::string& key) const {
  auto it = queues_.find(key);
  return it == queues_.end() ? 0 : static_cast<int64_t>(it->second.size());
}

void StoreTable::Clear() {
  kv_.clear();
  queues_.clear();
  stored_bytes_ = 0;
  prismd_keys_.clear();
  prismd_bytes_ = 0;
}

}  // namespace prism::store
