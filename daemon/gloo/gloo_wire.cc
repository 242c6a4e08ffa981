#include "daemon/gloo/gloo_wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace prism::gloo {
namespace {

void AppendU64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), sizeof(v)); }

uint64_t ReadU64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

constexpr size_t kMaxHostname = 4096;
constexpr size_t kMaxPairs = size_t{1} << 24;

}  // namespace

std::string EncodeRankRecord(const RankRecord& record) {
  std::string out;
  AppendU64(&out, record.hostname.size());
  out += record.hostname;
  AppendU64(&out, kAddressBytes);
  out.append(reinterpret_cast<const char*>(&record.address), sizeof(record.address));
  AppendU64(&out, static_cast<uint64_t>(int64_t{-1}));  // the record's address has no sequence
  for (int64_t s : record.pair_sequences) AppendU64(&out, static_cast<uint64_t>(s));
  return out;
}

absl::StatusOr<RankRecord> DecodeRankRecord(const std::string& bytes) {
  RankRecord r;
  size_t at = 0;
  auto need = [&](size_t n, const char* what) -> absl::Status {
    if (bytes.size() - at < n) {
      return absl::InvalidArgumentError(absl::StrCat("a Gloo rank record of ", bytes.size(), " bytes ends inside its ",
                                                     what, " (at byte ", at, ")"));
    }
    return absl::OkStatus();
  };
  if (auto s = need(8, "hostname length"); !s.ok()) return s;
  const uint64_t host_len = ReadU64(bytes.data());
  at = 8;
  if (host_len > kMaxHostname) return absl::InvalidArgumentError(absl::StrCat("hostname length ", host_len));
  if (auto s = need(host_len, "hostname"); !s.ok()) return s;
  r.hostname = bytes.substr(at, host_len);
  at += host_len;
  if (auto s = need(8, "address length"); !s.ok()) return s;
  const uint64_t addr_len = ReadU64(bytes.data() + at);
  at += 8;
  if (addr_len != kAddressBytes) {
    return absl::InvalidArgumentError(absl::StrCat("address of ", addr_len, " bytes, not ", kAddressBytes,
                                                   " (sockaddr_storage + sequence): another Gloo build?"));
  }
  if (auto s = need(addr_len, "address"); !s.ok()) return s;
  std::memcpy(&r.address, bytes.data() + at, sizeof(r.address));
  at += addr_len;
  if (r.address.ss_family != AF_INET && r.address.ss_family != AF_INET6) {
    return absl::InvalidArgumentError(absl::StrCat("address family ", r.address.ss_family, " is neither IPv4 nor IPv6"));
  }
  const size_t rest = bytes.size() - at;
  if (rest % 8 != 0 || rest / 8 > kMaxPairs) {
    return absl::InvalidArgumentError(absl::StrCat(rest, " bytes of pair sequences: not whole 8-byte numbers"));
  }
  r.pair_sequences.resize(rest / 8);
  for (size_t i = 0; i < r.pair_sequences.size(); ++i) {
    r.pair_sequences[i] = static_cast<int64_t>(ReadU64(bytes.data() + at + 8 * i));
  }
  return r;
}

std::string AddressText(const sockaddr_storage& address) {
  char ip[INET6_ADDRSTRLEN] = "?";
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
    return absl::StrCat(ip, ":", ntohs(in->sin_port));
  }
  if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
    return absl::StrCat("[", ip, "]:", ntohs(in6->sin6_port));
  }
  return absl::StrCat("(family ", address.ss_family, ")");
}

sockaddr_storage HighestAddress(int family) {
  sockaddr_storage ss{};
  if (family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = 0xffff;
    std::memset(&in6->sin6_addr, 0xff, sizeof(in6->sin6_addr));
  } else {
    auto* in = reinterpret_cast<sockaddr_in*>(&ss);
    in->sin_family = AF_INET;
    in->sin_port = 0xffff;
    in->sin_addr.s_addr = 0xffffffffu;
  }
  return ss;
}

void AppendPreamble(std::string* out, const Preamble& p) {
  for (uint64_t v : {p.nbytes, p.opcode, p.slot, p.offset, p.length, p.roffset}) AppendU64(out, v);
}

Preamble ParsePreamble(const char* b) {
  return Preamble{ReadU64(b), ReadU64(b + 8), ReadU64(b + 16), ReadU64(b + 24), ReadU64(b + 32), ReadU64(b + 40)};
}

uint64_t PayloadBytes(const Preamble& p) {
  const auto op = static_cast<Opcode>(p.opcode);
  return op == Opcode::kSendBuffer || op == Opcode::kSendUnboundBuffer ? p.length : 0;
}

absl::Status CheckPreamble(const Preamble& p, uint64_t max_payload) {
  if (p.opcode > static_cast<uint64_t>(Opcode::kNotifyRecvReady)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown opcode ", p.opcode, " (Gloo knows 0-3)"));
  }
  if (p.length > max_payload) {
    return absl::InvalidArgumentError(absl::StrCat("a message of ", p.length, " bytes (over ", max_payload, ")"));
  }
  const uint64_t expect = kPreambleBytes + PayloadBytes(p);
  if (p.nbytes != expect) {
    return absl::InvalidArgumentError(absl::StrCat("nbytes ", p.nbytes, " for opcode ", p.opcode, " of length ",
                                                   p.length, " (expected ", expect, ")"));
  }
  return absl::OkStatus();
}

std::string CollectiveOfSlot(uint64_t slot) {
  static const char* kNames[] = {"?",         "gather",    "allgather", "reduce",  "allreduce",
                                 "scatter",   "broadcast", "barrier",   "alltoall"};
  const uint64_t prefix = slot >> 56;
  if (prefix >= 1 && prefix <= 8) return kNames[prefix];
  return absl::StrFormat("slot %#x", slot);
}

}  // namespace prism::gloo
