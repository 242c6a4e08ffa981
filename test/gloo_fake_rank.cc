#include "test/gloo_fake_rank.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "daemon/rendezvous/gloo_keys.h"

namespace prism::gloo::testing {
namespace {

constexpr uint64_t kBarrierPrefix = 0x07, kAllreducePrefix = 0x04;
constexpr int64_t kSequenceBase = 1000;  // eager: my pair with peer j waits for 1000 + j

uint64_t Slot(uint64_t prefix, uint32_t tag) { return (prefix << 56) | (uint64_t{tag} << 24); }

std::runtime_error Fail(const std::string& what) { return std::runtime_error("fake gloo rank: " + what); }

void SetTimeouts(int fd, int ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Gloo's order of a pair's ends: ip bytes, then port (as stored), then sequence.
int Compare(const sockaddr_storage& a, int64_t seq_a, const sockaddr_storage& b, int64_t seq_b) {
  const auto* x = reinterpret_cast<const sockaddr_in*>(&a);
  const auto* y = reinterpret_cast<const sockaddr_in*>(&b);
  int rv = std::memcmp(&x->sin_addr, &y->sin_addr, sizeof(in_addr));
  if (rv == 0) rv = static_cast<int>(x->sin_port) - static_cast<int>(y->sin_port);
  if (rv == 0) rv = seq_a < seq_b ? -1 : (seq_a > seq_b ? 1 : 0);
  return rv;
}

}  // namespace

struct FakeGlooRank::Transfer {
  int peer = 0;
  bool send = false;
  uint64_t slot = 0;
  char* buf = nullptr;
  size_t len = 0;
  bool done = false;
};

FakeGlooRank::FakeGlooRank(FakeGlooOptions options)
    : o_(std::move(options)), store_(o_.store_port, o_.timeout_ms) {}

FakeGlooRank::~FakeGlooRank() {
  for (auto& [peer, fd] : fds_) close(fd);
  for (auto& [seq, fd] : early_) close(fd);
  if (listen_fd_ >= 0) close(listen_fd_);
}

int64_t FakeGlooRank::MySequence(int peer) const { return o_.lazy ? peer : kSequenceBase + peer; }

int64_t FakeGlooRank::SequenceFor(int peer, const RankRecord& theirs) const {
  (void)peer;
  if (o_.lazy || theirs.pair_sequences.empty()) return o_.rank;
  if (theirs.pair_sequences.size() <= static_cast<size_t>(o_.rank)) throw Fail("a peer record has too few sequences");
  return theirs.pair_sequences[o_.rank];
}

RankRecord FakeGlooRank::Record(int rank) {
  auto it = records_.find(rank);
  if (it != records_.end()) return it->second;
  auto r = DecodeRankRecord(store_.Get(rendezvous::RecordKey(o_.context, rank)));
  if (!r.ok()) throw Fail("record of rank " + std::to_string(rank) + ": " + std::string(r.status().message()));
  records_[rank] = *r;
  return *r;
}

void FakeGlooRank::Rendezvous() {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(listen_fd_, 1024) != 0) {
    throw Fail("cannot listen");
  }
  socklen_t len = sizeof(address_);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address_), &len);
  RankRecord mine;
  mine.hostname = "fake-host";
  mine.address = address_;
  if (!o_.lazy) {
    for (int j = 0; j < o_.size; ++j) mine.pair_sequences.push_back(MySequence(j));
  }
  store_.Set(rendezvous::RecordKey(o_.context, o_.rank), EncodeRankRecord(mine));
  if (o_.lazy) return;
  for (int j = 0; j < o_.size; ++j) {
    if (j != o_.rank) Record(j);
  }
  for (int j = 0; j < o_.size; ++j) {
    if (j != o_.rank) Connect(j);
  }
}

void FakeGlooRank::Connect(int peer) {
  if (fds_.count(peer) != 0) return;
  const RankRecord theirs = Record(peer);
  const int64_t their_seq = o_.lazy || theirs.pair_sequences.empty() ? o_.rank : SequenceFor(peer, theirs);
  if (Compare(address_, MySequence(peer), theirs.address, their_seq) <= 0) return AcceptFor(peer);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  SetTimeouts(fd, o_.timeout_ms);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&theirs.address), sizeof(sockaddr_in)) != 0) {
    close(fd);
    throw Fail("cannot connect to rank " + std::to_string(peer) + " at " + AddressText(theirs.address));
  }
  const int64_t seq = SequenceFor(peer, theirs);
  WriteAll(fd, std::string(reinterpret_cast<const char*>(&seq), sizeof(seq)));
  fds_[peer] = fd;
}

void FakeGlooRank::AcceptFor(int peer) {
  const int64_t want = MySequence(peer);
  while (early_.count(want) == 0) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, o_.timeout_ms) <= 0) throw Fail("no connection for the pair with rank " + std::to_string(peer));
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) throw Fail("accept failed");
    SetTimeouts(fd, o_.timeout_ms);
    int64_t seq = 0;
    ReadExact(fd, reinterpret_cast<char*>(&seq), sizeof(seq));
    early_[seq] = fd;
  }
  fds_[peer] = early_[want];
  early_.erase(want);
}

void FakeGlooRank::ClosePairs(bool reset) {
  for (auto& [peer, fd] : fds_) {
    const linger hard{1, 0};
    if (reset) setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
    close(fd);
  }
  fds_.clear();
}

int FakeGlooRank::PairFd(int peer) {
  Connect(peer);
  return fds_.at(peer);
}

ssize_t FakeGlooRank::ReadSome(int peer, char* buf, size_t len) {
  const ssize_t n = recv(PairFd(peer), buf, len, 0);
  if (n < 0) throw Fail("read from rank " + std::to_string(peer) + " timed out or failed");
  return n;
}

void FakeGlooRank::WriteAll(int fd, const std::string& bytes) {
  size_t at = 0;
  while (at < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n <= 0) throw Fail("write failed (peer gone?)");
    at += static_cast<size_t>(n);
  }
}

void FakeGlooRank::ReadExact(int fd, char* out, size_t n) {
  size_t at = 0;
  while (at < n) {
    const ssize_t r = recv(fd, out + at, n - at, 0);
    if (r == 0) throw Fail("the peer closed the connection");
    if (r < 0) throw Fail("read timed out or failed");
    at += static_cast<size_t>(r);
  }
}

// Posts every transfer as Gloo's Pair::send/recv do, then serves the pairs
// until all are done.
void FakeGlooRank::Exchange(std::vector<Transfer>& transfers) {
  auto send_data = [&](Transfer* t) {
    std::string out;
    AppendPreamble(&out, {kPreambleBytes + t->len, static_cast<uint64_t>(Opcode::kSendUnboundBuffer), t->slot, 0,
                          t->len, 0});
    out.append(t->buf, t->len);
    WriteAll(fds_[t->peer], out);
    t->done = true;
  };
  for (Transfer& t : transfers) {
    Connect(t.peer);
    std::string p;
    AppendPreamble(&p, {kPreambleBytes, static_cast<uint64_t>(t.send ? Opcode::kNotifySendReady : Opcode::kNotifyRecvReady),
                        t.slot, 0, t.len, 0});
    WriteAll(fds_[t.peer], p);
    auto early = remote_ready_.find({t.peer, t.slot});
    if (t.send && early != remote_ready_.end()) {
      if (--early->second == 0) remote_ready_.erase(early);
      send_data(&t);
    }
  }
  auto pending = [&] { return std::any_of(transfers.begin(), transfers.end(), [](const Transfer& t) { return !t.done; }); };
  while (pending()) {
    std::vector<pollfd> polls;
    std::vector<int> peers;
    for (const Transfer& t : transfers) {
      if (t.done || std::find(peers.begin(), peers.end(), t.peer) != peers.end()) continue;
      peers.push_back(t.peer);
      polls.push_back({fds_[t.peer], POLLIN, 0});
    }
    if (poll(polls.data(), polls.size(), o_.timeout_ms) <= 0) throw Fail("a collective timed out");
    for (size_t i = 0; i < polls.size(); ++i) {
      if (polls[i].revents == 0) continue;
      char raw[kPreambleBytes];
      ReadExact(polls[i].fd, raw, sizeof(raw));
      const Preamble p = ParsePreamble(raw);
      auto match = [&](bool send) -> Transfer* {
        for (Transfer& t : transfers) {
          if (!t.done && t.peer == peers[i] && t.send == send && t.slot == p.slot) return &t;
        }
        if (send) return nullptr;
        throw Fail("data for a slot no receive posted");
      };
      switch (static_cast<Opcode>(p.opcode)) {
        case Opcode::kNotifySendReady: break;  // its data follows our receive-ready
        case Opcode::kNotifyRecvReady: {
          Transfer* t = match(true);
          if (t == nullptr) {  // a real peer ahead of us: for our next send on this slot
            ++remote_ready_[{peers[i], p.slot}];
            break;
          }
          if (p.length != t->len) throw Fail("receive-ready of another size");
          send_data(t);
          break;
        }
        case Opcode::kSendUnboundBuffer: {
          Transfer* t = match(false);
          if (p.length != t->len) throw Fail("received data of another size");
          ReadExact(polls[i].fd, t->buf, t->len);
          t->done = true;
          break;
        }
        default: throw Fail("unexpected opcode " + std::to_string(p.opcode));
      }
    }
  }
}

void FakeGlooRank::Barrier(uint32_t tag) {
  const int n = o_.size, r = o_.rank;
  for (int d = 1; d < n; d <<= 1) {
    std::vector<Transfer> step{{(n + r - d) % n, false, Slot(kBarrierPrefix, tag)},
                               {(r + d) % n, true, Slot(kBarrierPrefix, tag)}};
    Exchange(step);
  }
}

void FakeGlooRank::Allreduce(std::vector<float>& data, uint32_t tag) {
  const int n = o_.size, r = o_.rank;
  if (n == 1) return;
  const size_t chunk = (data.size() + n - 1) / n;
  auto begin = [&](int c) { return std::min(data.size(), static_cast<size_t>((c % n + n) % n) * chunk); };
  auto count = [&](int c) { return std::min(data.size(), begin(c) + chunk) - begin(c); };
  const uint64_t slot = Slot(kAllreducePrefix, tag);
  const int left = (n + r - 1) % n, right = (r + 1) % n;
  std::vector<float> incoming(chunk);
  for (int s = 0; s < n - 1; ++s) {  // reduce-scatter
    const int send_c = r - s, recv_c = r - s - 1;
    std::vector<Transfer> step{
        {right, true, slot, reinterpret_cast<char*>(data.data() + begin(send_c)), count(send_c) * sizeof(float)},
        {left, false, slot, reinterpret_cast<char*>(incoming.data()), count(recv_c) * sizeof(float)}};
    Exchange(step);
    for (size_t i = 0; i < count(recv_c); ++i) data[begin(recv_c) + i] += incoming[i];
  }
  for (int s = 0; s < n - 1; ++s) {  // all-gather
    const int send_c = r + 1 - s, recv_c = r - s;
    std::vector<Transfer> step{
        {right, true, slot, reinterpret_cast<char*>(data.data() + begin(send_c)), count(send_c) * sizeof(float)},
        {left, false, slot, reinterpret_cast<char*>(data.data() + begin(recv_c)), count(recv_c) * sizeof(float)}};
    Exchange(step);
  }
}

}  // namespace prism::gloo::testing
