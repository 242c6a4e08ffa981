#include "test/bootstrap_fake_rank.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>

#include "common/net_handles.h"

namespace prism::bootstrap::testing {
namespace {

constexpr int32_t kSplitTag = 1 << 29;

[[noreturn]] void Fail(const std::string& what) {
  throw std::runtime_error("fake rank: " + what);
}

template <typename T>
T Get(const uint8_t* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof(T));
  return v;
}
template <typename T>
void Put(uint8_t* p, size_t off, T v) {
  std::memcpy(p + off, &v, sizeof(T));
}

void WaitFd(int fd, short events, int timeout_ms, const char* what) {
  pollfd p{fd, events, 0};
  if (poll(&p, 1, timeout_ms) <= 0) Fail(std::string("timeout waiting for ") + what);
}

void WriteAll(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) Fail("write failed");
    p += w;
    n -= w;
  }
}

void ReadAll(int fd, void* data, size_t n, int timeout_ms) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    WaitFd(fd, POLLIN, timeout_ms, "data");
    const ssize_t r = recv(fd, p, n, 0);
    if (r <= 0) Fail("connection closed while reading");
    p += r;
    n -= r;
  }
}

void SendMsg(int fd, const Bytes& b) {
  const int32_t n = static_cast<int32_t>(b.size());
  WriteAll(fd, &n, 4);
  if (n > 0) WriteAll(fd, b.data(), b.size());
}

Bytes RecvMsg(int fd, size_t max, int timeout_ms) {
  int32_t n = 0;
  ReadAll(fd, &n, 4, timeout_ms);
  if (n < 0 || static_cast<size_t>(n) > max) {
    // Name both ends: a stray connection from another test process shows here.
    sockaddr_in peer{}, local{};
    socklen_t peer_len = sizeof(peer), local_len = sizeof(local);
    getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len);
    getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len);
    Fail("message truncated: " + std::to_string(n) + " bytes (at most " + std::to_string(max) + ") from " +
         ToString({ntohl(peer.sin_addr.s_addr), ntohs(peer.sin_port)}) + " on " +
         ToString({ntohl(local.sin_addr.s_addr), ntohs(local.sin_port)}));
  }  Bytes b(n);
  if (n > 0) ReadAll(fd, b.data(), n, timeout_ms);
  return b;
}

int Listen() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(0x7f000001);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 16384) != 0) {
    Fail("listen");
  }
  return fd;
}

Ipv4Endpoint AddrOf(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return {ntohl(a.sin_addr.s_addr), ntohs(a.sin_port)};
}

// NCCL's connect: retries refused connections (about a minute in NCCL).
int Connect(const Ipv4Endpoint& to, uint64_t magic, int timeout_ms) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(to.port);
    a.sin_addr.s_addr = htonl(to.ip);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      const int32_t type = 1;
      WriteAll(fd, &magic, 8);
      WriteAll(fd, &type, 4);
      return fd;
    }
    close(fd);
    if (std::chrono::steady_clock::now() > give_up) Fail("connect to " + ToString(to));
    usleep(20000);
  }
}

Bytes AddrBytes(const Ipv4Endpoint& e, size_t size) {
  Bytes b(size, 0);
  const SockAddrBytes a = EncodeSockAddr(e);
  std::copy(a.begin(), a.end(), b.begin());
  return b;
}

Ipv4Endpoint ParseAddr(const uint8_t* p) {
  auto a = DecodeSockAddr(p);
  if (!a.ok()) Fail("bad address");
  return *a;
}

uint64_t HashString(const std::string& s) { return NcclHash(s.data(), s.size()); }

}  // namespace

Bytes FakePeerInfo(int rank, uint64_t host_hash, uint64_t pid_hash, int version) {
  Bytes b(120, 0);
  Put<int32_t>(b.data(), 0, rank);
  Put<int32_t>(b.data(), 12, 1);
  Put<uint64_t>(b.data(), 16, host_hash);
  Put<uint64_t>(b.data(), 24, pid_hash);
  Put<uint64_t>(b.data(), 32, 0x1b);
  Put<int64_t>(b.data(), 40, 0x60);
  Put<uint64_t>(b.data(), 48, 0x3dd5f290);
  Put<int32_t>(b.data(), 56, 90);
  Put<uint64_t>(b.data(), 64, kFakeTotalMem);
  Put<uint32_t>(b.data(), 72, 0x02000024);
  Put<int32_t>(b.data(), 108, 1);
  Put<int32_t>(b.data(), 112, version);
  return b;
}

Bytes FakeTopoInfo(int rank) {
  Bytes b(2292, 0);
  const int32_t pattern[7] = {3, 4, 6, 3, 5, 5, 3};
  const int32_t channels[7] = {kFakeRingChannels, kFakeRingChannels, 0, 0, 0, 0, kFakeRingChannels};
  for (int a = 0; a < 7; ++a) {
    Put<int32_t>(b.data(), 32 * a, pattern[a]);
    Put<int32_t>(b.data(), 32 * a + 4, channels[a]);
    Put<int32_t>(b.data(), 32 * a + 8, channels[a] ? 1 : 0);
    Put<float>(b.data(), 32 * a + 12, channels[a] ? 2.4f : 0.f);
    Put<float>(b.data(), 32 * a + 16, channels[a] ? 1.2f : 0.f);
    Put<int32_t>(b.data(), 32 * a + 24, channels[a] ? 8 : 0);
  }
  uint8_t* t = b.data() + 224;
  for (int c = 0; c < 64; ++c) {
    for (size_t arr : {4, 260, 1028, 1284, 1540}) Put<int32_t>(t, arr + 4 * c, rank);
    Put<int32_t>(t, 516 + 4 * c, -1);
    Put<int32_t>(t, 772 + 4 * c, -1);
  }
  Put<int32_t>(b.data(), 2280, 1);
  Put<int32_t>(b.data(), 2284, 1);
  return b;
}

FakeRealRank::FakeRealRank(FakeRankOptions options) : opt_(std::move(options)) {
  const UniqueId id = opt_.id ? *opt_.id : UniqueIdForCommId(opt_.comm_id);
  comm_hash_ = CommHashOfId(id, CommHashScheme::kAccumulator);  // a 2.28.9 rank
  magic_ = UniqueIdMagic(id);
}

UniqueId FakeRealRank::MakeUniqueId() {
  if (opt_.rank != 0) Fail("only comm rank 0 makes the id");
  root_listen_ = Listen();
  std::random_device rd;
  const uint64_t magic = (uint64_t{rd()} << 32) ^ rd();
  UniqueId id{};
  std::memcpy(id.data(), &magic, 8);
  const SockAddrBytes a = EncodeSockAddr(AddrOf(root_listen_));
  std::copy(a.begin(), a.end(), id.begin() + 8);
  opt_.id = id;
  comm_hash_ = CommHashOfId(id, CommHashScheme::kAccumulator);  // a 2.28.9 rank
  magic_ = magic;
  return id;
}

FakeRealRank::FakeRealRank(FakeRankOptions options, uint64_t hash, uint64_t magic)
    : opt_(std::move(options)), comm_hash_(hash), magic_(magic) {}

FakeRealRank::~FakeRealRank() {
  if (root_thread_.joinable()) root_thread_.join();
  Destroy();
}

void FakeRealRank::Destroy() {
  for (int* fd : {&ring_listen_, &p2p_listen_, &root_listen_, &next_fd_, &prev_fd_}) {
    if (*fd >= 0) {
      shutdown(*fd, SHUT_RDWR);
      close(*fd);
    }
    *fd = -1;
  }
  for (auto& u : unexpected_) close(u.fd);
  unexpected_.clear();
}

int FakeRealRank::AcceptChecked(int listen_fd, uint64_t magic) {
  while (true) {
    WaitFd(listen_fd, POLLIN, opt_.timeout_ms, "accept");
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) Fail("accept");
    uint64_t m = 0;
    int32_t type = 0;
    ReadAll(fd, &m, 8, opt_.timeout_ms);
    if (m != magic) {  // NCCL drops it silently and accepts again
      close(fd);
      continue;
    }
    ReadAll(fd, &type, 4, opt_.timeout_ms);
    if (type != 1) Fail("wrong socket type");
    return fd;
  }
}

// NCCL's bootstrapRoot for one root: serial check-ins; deliver k+1's info
// to k as soon as both are known (so deliveries come in check-in order).
void FakeRealRank::RunRoot() {
  try {
    const int n = opt_.nranks;
    std::vector<Bytes> listen(n), connect_info(n);
    std::vector<uint8_t> delivered(n, 0);
    auto deliver = [&](int k) {
      const int next = (k + 1) % n;
      if (delivered[k] || listen[k].empty() || connect_info[next].empty()) return;
      const int fd = Connect(ParseAddr(listen[k].data()), magic_, opt_.timeout_ms);
      SendMsg(fd, connect_info[next]);
      close(fd);
      delivered[k] = 1;
    };
    for (int got = 0; got < n; ++got) {
      const int fd = AcceptChecked(root_listen_, magic_);
      const Bytes ext = RecvMsg(fd, 172, opt_.timeout_ms);
      close(fd);
      if (ext.size() != 172) Fail("extInfo size");
      const int r = Get<int32_t>(ext.data(), 0);
      if (Get<int32_t>(ext.data(), 4) != n || Get<int32_t>(ext.data(), 12) != 1) Fail("nranks");
      if (r < 0 || r >= n || !listen[r].empty()) Fail("bad check-in rank " + std::to_string(r));
      if (IsAllZero(ext.data() + 16, 28) || IsAllZero(ext.data() + 44, 28)) Fail("zero address");
      listen[r].assign(ext.begin() + 16, ext.begin() + 44);
      connect_info[r].assign(ext.begin() + 44, ext.end());
      deliver((r + n - 1) % n);
      deliver(r);
    }
    for (int k = 0; k < n; ++k) deliver(k);
  } catch (const std::exception& e) {
    root_error_ = e.what();
  }
  close(root_listen_);
  root_listen_ = -1;
}

void FakeRealRank::Init() {
  const auto t0 = std::chrono::steady_clock::now();
  ring_listen_ = Listen();
  int my_root_listen = Listen();
  const Ipv4Endpoint root_addr = opt_.id ? ParseAddr(opt_.id->data() + 8) : opt_.comm_id;
  if (opt_.rank == 0 && root_listen_ >= 0) {
    root_thread_ = std::thread([this] { RunRoot(); });  // MakeUniqueId listened already
  } else if (opt_.rank == 0) {
    root_listen_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(root_listen_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(opt_.comm_id.port);
    a.sin_addr.s_addr = htonl(opt_.comm_id.ip);
    if (bind(root_listen_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        listen(root_listen_, 16384) != 0) {
      Fail("root listen on " + ToString(opt_.comm_id));
    }
    root_thread_ = std::thread([this] { RunRoot(); });
  }
  Bytes ext(172, 0);
  Put<int32_t>(ext.data(), 0, opt_.rank);
  Put<int32_t>(ext.data(), 4, opt_.nranks);
  Put<int32_t>(ext.data(), 8, 0);
  Put<int32_t>(ext.data(), 12, 1);
  const Bytes la = AddrBytes(AddrOf(my_root_listen), 28);
  const Bytes ra = AddrBytes(AddrOf(ring_listen_), 128);
  std::copy(la.begin(), la.end(), ext.begin() + 16);
  std::copy(ra.begin(), ra.end(), ext.begin() + 44);
  int fd = Connect(root_addr, magic_, opt_.timeout_ms);
  SendMsg(fd, ext);
  close(fd);
  fd = AcceptChecked(my_root_listen, magic_);
  const Bytes next_info = RecvMsg(fd, 128, opt_.timeout_ms);
  close(fd);
  close(my_root_listen);
  next_fd_ = Connect(ParseAddr(next_info.data()), magic_, opt_.timeout_ms);
  prev_fd_ = AcceptChecked(ring_listen_, magic_);
  p2p_listen_ = Listen();
  InitAllGathers();
  init_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (root_thread_.joinable()) root_thread_.join();
  if (!root_error_.empty()) Fail("root: " + root_error_);
}

void FakeRealRank::InitAllGathers() {
  Bytes ring(120, 0);
  const Bytes p2p = AddrBytes(AddrOf(p2p_listen_), 28);
  std::copy(p2p.begin(), p2p.end(), ring.begin());
  const Bytes proxy = AddrBytes({0x7f000001, 9}, 28);
  std::copy(proxy.begin(), proxy.end(), ring.begin() + 28);
  ring_info_ = AllGather(ring);
  p2p_addrs_.clear();
  for (const Bytes& r : ring_info_) p2p_addrs_.push_back(ParseAddr(r.data()));
  const uint64_t host = HashString(opt_.host_name) + comm_hash_;
  const uint64_t pid = HashString(opt_.host_name + "/pid/" + std::to_string(opt_.rank)) + comm_hash_;
  peer_info_ = AllGather(FakePeerInfo(opt_.rank, host, pid, opt_.version));
  for (int r = 0; r < opt_.nranks; ++r) {
    if (Get<int32_t>(peer_info_[r].data(), 112) != opt_.version) {
      Fail("peer " + std::to_string(r) + " has another NCCL version");
    }
  }
  topo_info_ = AllGather(FakeTopoInfo(opt_.rank));
}

std::vector<Bytes> FakeRealRank::AllGather(const Bytes& mine) {
  const int n = opt_.nranks, r = opt_.rank;
  const size_t size = mine.size();
  std::vector<Bytes> slice(n);
  slice[r] = mine;
  auto mod = [n](int a) { return ((a % n) + n) % n; };
  const int32_t header = static_cast<int32_t>(size);
  auto check_header = [&](int fd) {
    int32_t got = 0;
    ReadAll(fd, &got, 4, opt_.timeout_ms);
    if (got != header) Fail("all-gather header " + std::to_string(got) + " != " + std::to_string(header));
  };
  const int steps = n / 2;
  for (int s = 0; s < steps; ++s) {
    const bool uni = (n % 2 == 0) && s == steps - 1;
    const int send0 = mod(r - s), recv0 = mod(r - s - 1), send1 = mod(r + s), recv1 = mod(r + s + 1);
    WriteAll(next_fd_, &header, 4);
    check_header(prev_fd_);
    if (!uni) {
      WriteAll(prev_fd_, &header, 4);
      check_header(next_fd_);
    }
    slice[recv0].assign(size, 0);
    if (!uni) slice[recv1].assign(size, 0);
    struct Xfer { int fd; uint8_t* buf; size_t done; bool send; };
    std::vector<Xfer> x = {{next_fd_, slice[send0].data(), 0, true},
                           {prev_fd_, slice[recv0].data(), 0, false}};
    if (!uni) {
      x.push_back({prev_fd_, slice[send1].data(), 0, true});
      x.push_back({next_fd_, slice[recv1].data(), 0, false});
    }
    // Round-robin progress of all transfers (sends do not wait for receives).
    while (true) {
      bool all = true;
      for (Xfer& t : x) {
        if (t.done == size) continue;
        all = false;
        const ssize_t k = t.send ? send(t.fd, t.buf + t.done, size - t.done, MSG_DONTWAIT | MSG_NOSIGNAL)
                                 : recv(t.fd, t.buf + t.done, size - t.done, MSG_DONTWAIT);
        if (k > 0) t.done += k;
        else if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) Fail("ring closed");
      }
      if (all) break;
      if (std::all_of(x.begin(), x.end(), [size](const Xfer& t) { return t.done == size; })) break;
      std::vector<pollfd> p;
      for (Xfer& t : x) {
        if (t.done < size) p.push_back({t.fd, static_cast<short>(t.send ? POLLOUT : POLLIN), 0});
      }
      if (poll(p.data(), p.size(), opt_.timeout_ms) <= 0) Fail("all-gather step timeout");
    }
  }
  return slice;
}

void FakeRealRank::Send(int peer, int32_t tag, const Bytes& data) {
  const int fd = Connect(p2p_addrs_.at(peer), magic_, opt_.timeout_ms);
  Bytes ack(8);
  Put<int32_t>(ack.data(), 0, opt_.rank);
  Put<int32_t>(ack.data(), 4, tag);
  SendMsg(fd, ack);
  SendMsg(fd, data);
  close(fd);
}

Bytes FakeRealRank::Recv(int peer, int32_t tag) {
  int fd = -1;
  for (size_t i = 0; i < unexpected_.size(); ++i) {
    if (unexpected_[i].peer == peer && unexpected_[i].tag == tag) {
      fd = unexpected_[i].fd;
      unexpected_.erase(unexpected_.begin() + i);
      break;
    }
  }
  while (fd < 0) {
    const int c = AcceptChecked(p2p_listen_, magic_);
    const Bytes ack = RecvMsg(c, 8, opt_.timeout_ms);
    const int p = Get<int32_t>(ack.data(), 0);
    const int32_t t = Get<int32_t>(ack.data(), 4);
    if (p == peer && t == tag) fd = c;
    else unexpected_.push_back({p, t, c});
  }
  Bytes data = RecvMsg(fd, 1 << 24, opt_.timeout_ms);
  char dummy;  // NCCL waits for the sender to close
  WaitFd(fd, POLLIN, opt_.timeout_ms, "sender close");
  if (recv(fd, &dummy, 1, 0) != 0) Fail("extra bytes after a bootstrap message");
  close(fd);
  return data;
}

void FakeRealRank::Barrier(int32_t tag) {
  const int n = opt_.nranks;
  const Bytes zero(4, 0);
  for (int mask = 1; mask < n; mask <<= 1) {
    Send((opt_.rank + mask) % n, tag, zero);
    const Bytes got = Recv(((opt_.rank - mask) % n + n) % n, tag);
    if (got.size() != 4) Fail("barrier payload");
  }
}

void FakeRealRank::RingConnect(int channels) {
  const int n = opt_.nranks, r = opt_.rank;
  const int recv_peer = (r - 1 + n) % n, send_peer = (r + 1) % n;
  const int32_t tag = (1 << 8) | 1;
  Bytes recv_entries(256 * channels, 0), send_entries(256 * channels, 0);
  for (int c = 0; c < channels; ++c) {
    RealListenHandle h;
    h.listen_id = (uint64_t{0xfeed} << 32) | (r << 8) | c;
    h.ipv4_be = htonl(0x7f000001);
    std::memcpy(recv_entries.data() + 256 * c, &h, sizeof(h));
    Put<int32_t>(send_entries.data(), 256 * c, r);
  }
  if (recv_peer == send_peer) {
    Bytes both = recv_entries;
    both.insert(both.end(), send_entries.begin(), send_entries.end());
    Send(send_peer, tag, both);
    setup_from_next_ = Recv(send_peer, tag);
    setup_from_prev_ = setup_from_next_;
    Send(send_peer, tag | 0x80, {});
    Recv(send_peer, tag | 0x80);
  } else {
    Send(recv_peer, tag, recv_entries);
    Send(send_peer, tag, send_entries);
    setup_from_next_ = Recv(send_peer, tag);
    setup_from_prev_ = Recv(recv_peer, tag);
    Send(send_peer, tag | 0x80, {});
    Send(recv_peer, tag | 0x80, {});
    Recv(send_peer, tag | 0x80);
    Recv(recv_peer, tag | 0x80);
  }
  ring_connect_info_ = AllGather(Bytes{0, 1});
}

std::unique_ptr<FakeRealRank> FakeRealRank::Split(int32_t color, int32_t key) {
  Bytes info(8);
  Put<int32_t>(info.data(), 0, key);
  Put<int32_t>(info.data(), 4, color);
  const std::vector<Bytes> all = AllGather(info);
  ++split_count_;
  if (color == kSplitNoColor) return nullptr;
  std::vector<std::pair<int32_t, int>> members;  // (key, parent rank)
  for (int p = 0; p < opt_.nranks; ++p) {
    if (Get<int32_t>(all[p].data(), 4) == color) members.push_back({Get<int32_t>(all[p].data(), 0), p});
  }
  std::sort(members.begin(), members.end());
  const int cn = static_cast<int>(members.size());
  int cr = 0;
  while (members[cr].second != opt_.rank) ++cr;
  const uint64_t child_hash = ChildCommHash(comm_hash_, split_count_, color, CommHashScheme::kAccumulator);
  FakeRankOptions o = opt_;
  o.rank = cr;
  o.nranks = cn;
  std::unique_ptr<FakeRealRank> child(new FakeRealRank(o, child_hash, child_hash));
  child->ring_listen_ = Listen();
  child->p2p_listen_ = Listen();
  Send(members[(cr - 1 + cn) % cn].second, kSplitTag, AddrBytes(AddrOf(child->ring_listen_), 128));
  const Bytes next = Recv(members[(cr + 1) % cn].second, kSplitTag);
  child->next_fd_ = Connect(ParseAddr(next.data()), child_hash, opt_.timeout_ms);
  child->prev_fd_ = AcceptChecked(child->ring_listen_, child_hash);
  child->InitAllGathers();
  return child;
}

}  // namespace prism::bootstrap::testing
