#include "daemon/store/tcp_store_protocol.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace prism::store {
namespace {

// Sequential reader over a byte string; every Take* returns false when the
// data ends first (incomplete request).
class Reader {
 public:
  Reader(const std::string& data, size_t offset) : data_(data), pos_(offset) {}
  size_t pos() const { return pos_; }

  template <typename T>
  bool Take(T* v) {
    if (data_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  // u64 length + bytes; `limit` exceeded -> *bad.
  bool TakeBytes(std::string* out, uint64_t limit, bool* bad) {
    uint64_t n = 0;
    if (!Take(&n)) return false;
    if (n > limit) {
      *bad = true;
      return false;
    }
    if (data_.size() - pos_ < n) return false;
    out->assign(data_.data() + pos_, n);
    pos_ += n;
    return true;
  }

 private:
  const std::string& data_;
  size_t pos_;
};

// Reads the arguments of `q`; false = incomplete (or *bad).
bool ReadArguments(Query q, Reader& r, Request* out, bool* bad) {
  auto key = [&] {
    out->keys.emplace_back();
    return r.TakeBytes(&out->keys.back(), kMaxKeyBytes, bad);
  };
  auto value = [&] {
    out->values.emplace_back();
    return r.TakeBytes(&out->values.back(), kMaxValueBytes, bad);
  };
  auto key_list = [&](bool with_values) {
    uint64_t n = 0;
    if (!r.Take(&n)) return false;
    if (n > kMaxKeysPerQuery) {
      *bad = true;
      return false;
    }
    for (uint64_t i = 0; i < n; ++i) {
      if (!key() || (with_values && !value())) return false;
    }
    return true;
  };
  switch (q) {
    case Query::kValidate:
    case Query::kPing: return r.Take(&out->word);
    case Query::kSet:
    case Query::kAppend:
    case Query::kQueuePush: return key() && value();
    case Query::kCompareSet: return key() && value() && value();
    case Query::kGet:
    case Query::kDeleteKey:
    case Query::kQueuePop:
    case Query::kQueueLen: return key();
    case Query::kAdd:
    case Query::kBarrier: return key() && r.Take(&out->number);
    case Query::kCheck:
    case Query::kWait:
    case Query::kMultiGet: return key_list(false);
    case Query::kMultiSet: return key_list(true);
    case Query::kNumKeys:
    case Query::kCancelWait:
    case Query::kListKeys: return true;
  }
  *bad = true;
  return false;
}

}  // namespace

const char* QueryName(Query q) {
  switch (q) {
    case Query::kValidate: return "VALIDATE";
    case Query::kSet: return "SET";
    case Query::kCompareSet: return "COMPARE_SET";
    case Query::kGet: return "GET";
    case Query::kAdd: return "ADD";
    case Query::kCheck: return "CHECK";
    case Query::kWait: return "WAIT";
    case Query::kNumKeys: return "GETNUMKEYS";
    case Query::kDeleteKey: return "DELETE_KEY";
    case Query::kAppend: return "APPEND";
    case Query::kMultiGet: return "MULTI_GET";
    case Query::kMultiSet: return "MULTI_SET";
    case Query::kCancelWait: return "CANCEL_WAIT";
    case Query::kPing: return "PING";
    case Query::kQueuePush: return "QUEUE_PUSH";
    case Query::kQueuePop: return "QUEUE_POP";
    case Query::kQueueLen: return "QUEUE_LEN";
    case Query::kListKeys: return "LIST_KEYS";
    case Query::kBarrier: return "BARRIER";
  }
  return "?";
}

absl::StatusOr<size_t> ParseRequest(const std::string& data, size_t offset, Request* out) {
  Reader r(data, offset);
  uint8_t type = 0;
  if (!r.Take(&type)) return 0;
  if (type > static_cast<uint8_t>(Query::kBarrier)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown TCPStore query type ", int{type}));
  }
  *out = Request{};
  out->query = static_cast<Query>(type);
  bool bad = false;
  if (!ReadArguments(out->query, r, out, &bad)) {
    if (bad) {
      return absl::InvalidArgumentError(absl::StrCat("TCPStore ", QueryName(out->query), " over the size limits"));
    }
    return 0;
  }
  return r.pos() - offset;
}

void AppendU8(std::string* out, uint8_t v) { out->push_back(static_cast<char>(v)); }
void AppendU32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }
void AppendI64(std::string* out, int64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }
void AppendValue(std::string* out, const std::string& bytes) {
  const uint64_t n = bytes.size();
  out->append(reinterpret_cast<const char*>(&n), 8);
  out->append(bytes);
}

std::string EncodeRequest(const Request& q) {
  std::string out;
  AppendU8(&out, static_cast<uint8_t>(q.query));
  auto keys = [&](bool with_values) {
    const uint64_t n = q.keys.size();
    out.append(reinterpret_cast<const char*>(&n), 8);
    for (size_t i = 0; i < q.keys.size(); ++i) {
      AppendValue(&out, q.keys[i]);
      if (with_values) AppendValue(&out, q.values[i]);
    }
  };
  switch (q.query) {
    case Query::kValidate:
    case Query::kPing: AppendU32(&out, q.word); break;
    case Query::kSet:
    case Query::kAppend:
    case Query::kQueuePush: AppendValue(&out, q.keys[0]); AppendValue(&out, q.values[0]); break;
    case Query::kCompareSet:
      AppendValue(&out, q.keys[0]);
      AppendValue(&out, q.values[0]);
      AppendValue(&out, q.values[1]);
      break;
    case Query::kGet:
    case Query::kDeleteKey:
    case Query::kQueuePop:
    case Query::kQueueLen: AppendValue(&out, q.keys[0]); break;
    case Query::kAdd:
    case Query::kBarrier: AppendValue(&out, q.keys[0]); AppendI64(&out, q.number); break;
    case Query::kCheck:
    case Query::kWait:
    case Query::kMultiGet: keys(false); break;
    case Query::kMultiSet: keys(true); break;
    case Query::kNumKeys:
    case Query::kCancelWait:
    case Query::kListKeys: break;
  }
  return out;
}

}  // namespace prism::store
