// The data of prismd's TCPStore (store_server.h): keys with their values,
// the queues (QUEUE_PUSH/POP), and the bytes they hold. Values are bytes; a
// number (ADD, BARRIER) is kept as decimal text, as PyTorch's own server
// does. What prismd itself sets (the records of its virtual ranks) is
// counted apart from what clients stored (client_bytes), so that the
// clients' limit is theirs alone; a client setting such a key makes it the
// clients' again.
//
// It knows no connections, limits or waiters: StoreServer checks a write
// against its limits before making it, and wakes the clients waiting on a
// key it set or pushed. Plain value; the store's loop thread owns it.
#ifndef PRISM_DAEMON_STORE_STORE_TABLE_H_
#define PRISM_DAEMON_STORE_STORE_TABLE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace prism::store {

class StoreTable {
 public:
  // The value of `key`, nullptr when unset (valid until the next change).
  const std::string* Find(const std::string& key) const;
  // The value, empty when unset (GET's answer).
  std::string ValueOr(const std::string& key) const;
  // The number `key` holds as decimal text; 0 when unset or not a number.
  int64_t NumberAt(const std::string& key) const;
  // Every key set, or with a non-empty queue of that name (CHECK, WAIT).
  bool AllSet(const std::vector<std::string>& keys) const;
  // Key and value bytes of `key`, 0 when unset.
  uint64_t StoredSize(const std::string& key) const;

  // `by_prismd`: prismd's own value, not counted in client_bytes().
  void Set(const std::string& key, const std::string& value, bool by_prismd = false);
  // Removes `key`; whether it was set.
  bool Forget(const std::string& key);

  void QueuePush(const std::string& key, const std::string& value);
  // The queue's length before the pop, and its front if any (taken).
  std::pair<int64_t, std::optional<std::string>> QueuePop(const std::string& key);
  int64_t QueueLength(const std::string& key) const;

  const std::map<std::string, std::string>& values() const { return kv_; }
  size_t keys() const { return kv_.size(); }
  // Keys, values and queued items.
  uint64_t stored_bytes() const { return stored_bytes_; }
  // The same without prismd's own values.
  uint64_t client_bytes() const { return stored_bytes_ - prismd_bytes_; }
  // Forgets everything (a new job starts clean).
  void Clear();

 private:
  std::map<std::string, std::string> kv_;
  std::map<std::string, std::deque<std::string>> queues_;
  uint64_t stored_bytes_ = 0;           // keys + values + queued items
  std::set<std::string> prismd_keys_;   // set by prismd, not since by a client
  uint64_t prismd_bytes_ = 0;           // their keys + values
};

}  // namespace prism::store

#endif  // PRISM_DAEMON_STORE_STORE_TABLE_H_
