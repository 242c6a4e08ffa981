#include "daemon/bootstrap/replay/wire_replay_match.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/net_handles.h"
#include "daemon/bootstrap/nccl_ids.h"

namespace prism::bootstrap::replay {
namespace {

constexpr size_t kHeaderBytes = 12;   // magic u64 + socket type i32
constexpr size_t kHashBytes = 8;

template <typename T>
T ReadAt(const std::string& s, size_t off) {
  T v{};
  std::memcpy(&v, s.data() + off, sizeof(T));
  return v;
}

const char* KindName(FieldKind k) {
  switch (k) {
    case FieldKind::kAddress: return "address";
    case FieldKind::kHash: return "hash";
    case FieldKind::kHandleId: return "broker conn id";
    case FieldKind::kModelLink: return "same-node link";
  }
  return "?";
}

// Renamed fields of one frame payload at [p, p + len) of `s`.
void ScanPayload(const std::string& s, size_t p, size_t len, const WireProfile& profile,
                 const Renaming& real, std::vector<Field>& out) {
  for (size_t i = 0; i + kSockAddrBytes <= len;) {
    const char* w = s.data() + p + i;
    if (LooksLikeSockAddr(w)) {
      // Real listeners were already replaced by the replayer's: exact.
      if (!real.IsNewValue(std::string(w, kSockAddrBytes))) {
        out.push_back({p + i, kSockAddrBytes, FieldKind::kAddress});
      }
      i += kSockAddrBytes;
      continue;
    }
    ++i;
  }
  for (size_t i = 0; i + 2 * kHashBytes <= len; i += 8) {
    if (ReadAt<uint64_t>(s, p + i) == kVirtualHandleMagic) {
      out.push_back({p + i + 8, kHashBytes, FieldKind::kHandleId});
      if (i + kVirtualHandleLinkOffset + kVirtualHandleLinkBytes <= len)
        out.push_back({p + i + kVirtualHandleLinkOffset, kVirtualHandleLinkBytes, FieldKind::kModelLink});
    }
  }
  const bool starts_with_addr = len >= kSockAddrBytes && LooksLikeSockAddr(s.data() + p);
  if (len == profile.peer_info.size && !starts_with_addr) {
    out.push_back({p + profile.peer_info.host_hash, kHashBytes, FieldKind::kHash});
    out.push_back({p + profile.peer_info.pid_hash, kHashBytes, FieldKind::kHash});
  }
  if (len == profile.ring_record_size && starts_with_addr) {
    out.push_back({p + profile.ring_record_uds, kHashBytes, FieldKind::kHash});
  }
}

}  // namespace

std::string Hex(const std::string& bytes, size_t offset, size_t size) {
  if (offset >= bytes.size()) return "(nothing)";
  return absl::BytesToHexString(bytes.substr(offset, size));
}

std::string Renaming::Learn(const std::string& old_value, const std::string& new_value) {
  auto f = forward_.find(old_value);
  if (f != forward_.end()) {
    if (f->second == new_value) return "";
    return absl::StrCat("recorded value ", absl::BytesToHexString(old_value),
                        " was renamed to ", absl::BytesToHexString(f->second),
                        " earlier, now ", absl::BytesToHexString(new_value));
  }
  auto b = backward_.find(new_value);
  if (b != backward_.end()) {
    return absl::StrCat("new value ", absl::BytesToHexString(new_value), " already stands for ",
                        absl::BytesToHexString(b->second), ", now also for ",
                        absl::BytesToHexString(old_value));
  }
  forward_[old_value] = new_value;
  backward_[new_value] = old_value;
  return "";
}

void Renaming::Seed(const std::string& old_value, const std::string& new_value) {
  forward_[old_value] = new_value;
  backward_[new_value] = old_value;
}

const std::string* Renaming::Find(const std::string& old_value) const {
  auto f = forward_.find(old_value);
  return f == forward_.end() ? nullptr : &f->second;
}

bool Renaming::IsNewValue(const std::string& new_value) const {
  return backward_.count(new_value) != 0;
}

const std::string* Renaming::Changed(const std::string& old_value) const {
  const std::string* v = Find(old_value);
  return (v && *v != old_value) ? v : nullptr;
}

bool LooksLikeSockAddr(const char* p) {
  if (p[0] != 2 || p[1] != 0) return false;
  if (p[2] == 0 && p[3] == 0) return false;                        // port
  if (p[4] == 0 && p[5] == 0 && p[6] == 0 && p[7] == 0) return false;  // address
  for (size_t i = 8; i < kSockAddrBytes; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

ExpectedStream BuildExpected(const std::string& recorded, bool opened_by_daemon,
                             const WireProfile& profile, const Renaming& real) {
  ExpectedStream e;
  e.bytes = recorded;
  for (size_t i = 0; i + kSockAddrBytes <= e.bytes.size(); ++i) {
    if (!LooksLikeSockAddr(e.bytes.data() + i)) continue;
    if (const std::string* v = real.Changed(e.bytes.substr(i, kSockAddrBytes))) {
      e.bytes.replace(i, kSockAddrBytes, *v);
      i += kSockAddrBytes - 1;
    }
  }
  size_t pos = 0;
  if (opened_by_daemon && e.bytes.size() >= kHeaderBytes) {
    e.fields.push_back({0, kHashBytes, FieldKind::kHash});
    pos = kHeaderBytes;
  }
  while (pos + 4 <= e.bytes.size()) {
    const int32_t len = ReadAt<int32_t>(e.bytes, pos);
    if (len < 0 || pos + 4 + static_cast<size_t>(len) > e.bytes.size()) break;
    e.frame_starts.push_back(pos);
    ScanPayload(e.bytes, pos + 4, static_cast<size_t>(len), profile, real, e.fields);
    pos += 4 + static_cast<size_t>(len);
  }
  std::sort(e.fields.begin(), e.fields.end(),
            [](const Field& a, const Field& b) { return a.offset < b.offset; });
  std::vector<Field> disjoint;
  for (const Field& f : e.fields) {
    if (!disjoint.empty() && f.offset < disjoint.back().offset + disjoint.back().size) continue;
    disjoint.push_back(f);
  }
  e.fields = std::move(disjoint);
  return e;
}

std::string StreamChecker::Where(size_t offset) const {
  std::string s = absl::StrCat("byte ", offset, " of ", exp_.bytes.size());
  auto it = std::upper_bound(exp_.frame_starts.begin(), exp_.frame_starts.end(), offset);
  if (it != exp_.frame_starts.begin()) {
    const size_t start = *(it - 1);
    const int32_t len = ReadAt<int32_t>(exp_.bytes, start);
    if (offset < start + 4 + static_cast<size_t>(len)) {
      absl::StrAppend(&s, " (frame ", it - exp_.frame_starts.begin() - 1, " of ", len,
                      " bytes at ", start, ", ",
                      offset < start + 4 ? std::string("its length")
                                         : absl::StrCat("payload offset ", offset - start - 4),
                      ")");
    }
  } else if (offset < 12) {
    absl::StrAppend(&s, " (connect header)");
  }
  return s;
}

std::string StreamChecker::CheckField(const Field& f, Renamings& names) {
  if (f.kind == FieldKind::kModelLink) {  // the graph's cluster, not the wire: the replay has no cluster
    renamed_ += f.size;
    return "";
  }
  const std::string old_value = exp_.bytes.substr(f.offset, f.size);
  const std::string new_value = got_.substr(f.offset, f.size);
  if (f.kind == FieldKind::kAddress && !LooksLikeSockAddr(new_value.data())) {
    return absl::StrCat(Where(f.offset), ": expected an IPv4 socket address (recorded ",
                        Hex(old_value, 0, f.size), "), got ", Hex(new_value, 0, f.size));
  }
  Renaming& r = f.kind == FieldKind::kAddress ? names.addresses
                : f.kind == FieldKind::kHash  ? names.hashes
                                              : names.handles;
  std::string problem = r.Learn(old_value, new_value);
  if (!problem.empty()) {
    return absl::StrCat(Where(f.offset), ": inconsistent ", KindName(f.kind), ": ", problem);
  }
  renamed_ += f.size;
  return "";
}

std::string StreamChecker::Add(const char* data, size_t size, Renamings& names) {
  got_.append(data, size);
  while (checked_ < got_.size()) {
    if (checked_ >= exp_.bytes.size()) {
      return absl::StrCat("prismd sent ", got_.size() - exp_.bytes.size(),
                          " bytes more than the recorded ", exp_.bytes.size(), ": ",
                          Hex(got_, exp_.bytes.size(), 32));
    }
    if (next_field_ < exp_.fields.size() && exp_.fields[next_field_].offset == checked_) {
      const Field& f = exp_.fields[next_field_];
      if (got_.size() < f.offset + f.size) break;
      std::string problem = CheckField(f, names);
      if (!problem.empty()) return problem;
      checked_ += f.size;
      ++next_field_;
      continue;
    }
    const size_t stop = std::min({got_.size(), exp_.bytes.size(),
                                  next_field_ < exp_.fields.size() ? exp_.fields[next_field_].offset
                                                                   : SIZE_MAX});
    for (; checked_ < stop; ++checked_, ++exact_) {
      if (got_[checked_] != exp_.bytes[checked_]) {
        const size_t from = checked_ >= 8 ? checked_ - 8 : 0;
        return absl::StrCat(Where(checked_), ": expected ", Hex(exp_.bytes, from, 24),
                            " got ", Hex(got_, from, 24), " (from byte ", from, ")");
      }
    }
  }
  return "";
}

void RewriteRealChunk(std::string& stream, size_t begin, size_t end, const Renamings& names) {
  const size_t addr_from = begin >= kSockAddrBytes - 1 ? begin - (kSockAddrBytes - 1) : 0;
  for (size_t i = addr_from; i < end && i + kSockAddrBytes <= stream.size(); ++i) {
    if (!LooksLikeSockAddr(stream.data() + i)) continue;
    const std::string w = stream.substr(i, kSockAddrBytes);
    const std::string* v = names.real.Changed(w);
    if (!v) v = names.addresses.Changed(w);
    if (v) {
      stream.replace(i, kSockAddrBytes, *v);
      i += kSockAddrBytes - 1;
    }
  }
  const size_t hash_from = begin >= kHashBytes - 1 ? begin - (kHashBytes - 1) : 0;
  for (size_t i = hash_from; i < end && i + kHashBytes <= stream.size(); ++i) {
    if (const std::string* v = names.hashes.Changed(stream.substr(i, kHashBytes))) {
      stream.replace(i, kHashBytes, *v);
      i += kHashBytes - 1;
    }
  }
}

}  // namespace prism::bootstrap::replay
