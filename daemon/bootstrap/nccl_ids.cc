#include "daemon/bootstrap/nccl_ids.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace prism::bootstrap {

NcclHasher& NcclHasher::Eat(const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  a0_ ^= size;
  for (size_t off = 0; off < size; off += 8) {
    a0_ += a1_;
    a1_ ^= a0_;
    a0_ ^= a0_ >> 31;
    a0_ *= 0x9de62bbc8cef3ce3ull;
    a1_ ^= a1_ >> 32;
    a1_ *= 0x485cd6311b599e79ull;
    uint64_t chunk = 0;
    std::memcpy(&chunk, bytes + off, size - off < 8 ? size - off : 8);  // LE host
    a0_ += chunk;
  }
  return *this;
}

uint64_t NcclHasher::Digest() const {
  uint64_t h = a0_;
  h ^= h >> 31;
  h *= 0xbac3bd562846de6bull;
  h += a1_;
  h ^= h >> 32;
  h *= 0x995a187a14e7b445ull;
  return h;
}

uint64_t Djb2aHash(const void* data, size_t size) {
  const auto* chars = static_cast<const signed char*>(data);
  uint64_t h = 5381;
  for (size_t i = 0; i < size; ++i) h = ((h << 5) + h) ^ static_cast<uint64_t>(static_cast<int64_t>(chars[i]));
  return h;
}

uint64_t CommHashOfId(const UniqueId& id, CommHashScheme scheme) {
  if (scheme == CommHashScheme::kAccumulator) return NcclHash(id.data(), id.size());
  return Djb2aHash(id.data(), id.size());
}

uint64_t ChildCommHash(uint64_t parent_hash, int32_t split_count, int32_t color, CommHashScheme scheme) {
  if (scheme == CommHashScheme::kAccumulator) {
    return NcclHasher().EatValue(parent_hash).EatValue(split_count).EatValue(color).Digest();
  }
  char text[128] = {};  // the id-sized buffer NCCL prints into, zero-padded
  if (scheme == CommHashScheme::kDjb2aColor) {
    std::snprintf(text, sizeof(text), "%016" PRIx64 "-%d", parent_hash, color);
  } else {
    std::snprintf(text, sizeof(text), "%016" PRIx64 "-%d-%d", parent_hash, split_count, color);
  }
  return Djb2aHash(text, sizeof(text));
}

sockaddr_in ToSockaddr(const Ipv4Endpoint& e) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(e.port);
  a.sin_addr.s_addr = htonl(e.ip);
  return a;
}

Ipv4Endpoint FromSockaddr(const sockaddr_in& a) { return {ntohl(a.sin_addr.s_addr), ntohs(a.sin_port)}; }

std::string ToString(const Ipv4Endpoint& e) {
  return absl::StrCat((e.ip >> 24) & 255, ".", (e.ip >> 16) & 255, ".", (e.ip >> 8) & 255,
                      ".", e.ip & 255, ":", e.port);
}

absl::StatusOr<Ipv4Endpoint> ParseHostPort(std::string_view host_port) {
  const size_t colon = host_port.rfind(':');
  uint32_t port = 0;
  if (colon == std::string_view::npos ||
      !absl::SimpleAtoi(std::string(host_port.substr(colon + 1)), &port) || port == 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad address '", std::string(host_port), "': expected host:port, e.g. 127.0.0.1:29555"));
  }
  const std::string host(host_port.substr(0, colon));
  in_addr addr{};
  if (inet_pton(AF_INET, host.c_str(), &addr) != 1) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    addrinfo* res = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot resolve host '", host, "' (IPv4 only)"));
    }
    addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
    freeaddrinfo(res);
  }
  return Ipv4Endpoint{ntohl(addr.s_addr), static_cast<uint16_t>(port)};
}

SockAddrBytes EncodeSockAddr(const Ipv4Endpoint& e) {
  SockAddrBytes b{};
  b[0] = AF_INET & 0xff;
  b[1] = (AF_INET >> 8) & 0xff;
  b[2] = e.port >> 8;
  b[3] = e.port & 0xff;
  b[4] = e.ip >> 24;
  b[5] = (e.ip >> 16) & 0xff;
  b[6] = (e.ip >> 8) & 0xff;
  b[7] = e.ip & 0xff;
  return b;
}

absl::StatusOr<Ipv4Endpoint> DecodeSockAddr(const uint8_t* b) {
  const uint16_t family = b[0] | (b[1] << 8);
  if (family != AF_INET) {
    return absl::InvalidArgumentError(absl::StrCat(
        "socket address family ", family, " is not AF_INET (IPv6 bootstrap is not supported)"));
  }
  Ipv4Endpoint e;
  e.port = static_cast<uint16_t>((b[2] << 8) | b[3]);
  e.ip = (uint32_t{b[4]} << 24) | (uint32_t{b[5]} << 16) | (uint32_t{b[6]} << 8) | b[7];
  return e;
}

bool IsAllZero(const uint8_t* data, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    if (data[i] != 0) return false;
  }
  return true;
}

UniqueId UniqueIdForCommId(const Ipv4Endpoint& root) {
  UniqueId id{};
  std::memcpy(id.data(), &kNcclMagic, 8);
  const SockAddrBytes addr = EncodeSockAddr(root);
  std::memcpy(id.data() + kUniqueIdAddrOffset, addr.data(), addr.size());
  return id;
}

uint64_t UniqueIdMagic(const UniqueId& id) {
  uint64_t m = 0;
  std::memcpy(&m, id.data(), 8);
  return m;
}

absl::StatusOr<Ipv4Endpoint> UniqueIdRoot(const UniqueId& id) {
  return DecodeSockAddr(id.data() + kUniqueIdAddrOffset);
}

}  // namespace prism::bootstrap
