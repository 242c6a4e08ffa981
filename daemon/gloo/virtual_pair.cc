#include "daemon/gloo/virtual_pair.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace prism::gloo {
namespace {

constexpr size_t kZeroChunk = 64 * 1024;
const char kZeros[kZeroChunk] = {};

std::string Errno(const char* what, int err) { return absl::StrCat(what, ": ", std::strerror(err)); }

}  // namespace

VirtualPair::VirtualPair(net::EventLoop* loop, PairTarget target, PairEvents* events)
    : loop_(loop), target_(std::move(target)), events_(events) {}

VirtualPair::~VirtualPair() { Close(); }

void VirtualPair::Close() {
  if (fd_ >= 0) {
    loop_->Remove(fd_);
    ::close(fd_);
    fd_ = -1;
  }
  state_ = State::kClosed;
}

bool VirtualPair::Idle() const { return in_.empty() && discard_ == 0; }

void VirtualPair::Fail(const absl::Status& why) {
  if (state_ == State::kClosed) return;
  Close();
  events_->OnPairClosed(this, why);
}

void VirtualPair::Connect() {
  const int family = target_.listener.ss_family;
  fd_ = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    const int err = errno;
    state_ = State::kConnecting;
    return Fail(absl::UnavailableError(Errno("socket", err)));
  }
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const socklen_t len = family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  state_ = State::kConnecting;
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&target_.listener), len) != 0 && errno != EINPROGRESS) {
    const int err = errno;
    return Fail(absl::UnavailableError(Errno("connect", err)));
  }
  if (auto s = loop_->Add(fd_, EPOLLIN | EPOLLOUT, this); !s.ok()) return Fail(s);
  watching_writes_ = true;
}

void VirtualPair::OnConnected() {
  state_ = State::kOpen;
  Segment seq;
  seq.bytes.assign(reinterpret_cast<const char*>(&target_.sequence), kSequenceBytes);
  out_.push_back(std::move(seq));
  events_->OnPairOpen(this);
}

void VirtualPair::OnIo(uint32_t events) {
  if (state_ == State::kConnecting) {
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return Fail(absl::UnavailableError(Errno("connect", err)));
    if ((events & EPOLLOUT) == 0) return;
    OnConnected();
  }
  if (state_ != State::kOpen) return;
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0 && !ReadInput()) return;
  Flush();
}

bool VirtualPair::ReadInput() {
  char buf[64 * 1024];
  for (;;) {
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n == 0) {
      if (!in_.empty() || discard_ > 0) {
        Fail(absl::DataLossError(absl::StrCat("the real rank closed the pair inside a message (",
                                              discard_ > 0 ? absl::StrCat(discard_, " payload bytes missing")
                                                           : absl::StrCat(in_.size(), " of 48 preamble bytes"),
                                              ")")));
      } else {
        Fail(absl::OkStatus());
      }
      return false;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (errno == EINTR) continue;
      const int err = errno;
      // Gloo's Pair::close() resets the connection (SO_LINGER 0): between
      // messages that is an orderly end.
      Fail(err == ECONNRESET && Idle() ? absl::OkStatus() : absl::UnavailableError(Errno("recv", err)));
      return false;
    }
    size_t at = 0;
    while (at < static_cast<size_t>(n)) {
      if (discard_ > 0) {
        const uint64_t take = std::min<uint64_t>(discard_, n - at);
        discard_ -= take;
        counters_.payload_in += take;
        at += take;
        continue;
      }
      const size_t take = std::min(kPreambleBytes - in_.size(), static_cast<size_t>(n) - at);
      in_.append(buf + at, take);
      at += take;
      if (in_.size() < kPreambleBytes) break;
      const Preamble p = ParsePreamble(in_.data());
      in_.clear();
      if (!Handle(p)) return false;
    }
  }
}

bool VirtualPair::Handle(const Preamble& p) {
  ++counters_.messages_in;
  if (auto s = CheckPreamble(p, target_.max_payload); !s.ok()) {
    Fail(absl::InvalidArgumentError(absl::StrCat("malformed Gloo message from the real rank: ", s.message())));
    return false;
  }
  switch (static_cast<Opcode>(p.opcode)) {
    case Opcode::kNotifySendReady:  // it sends n bytes: our receive is posted at once
      Queue({kPreambleBytes, static_cast<uint64_t>(Opcode::kNotifyRecvReady), p.slot, 0, p.length, 0}, 0);
      break;
    case Opcode::kNotifyRecvReady:  // it receives n bytes: send them
      Queue({kPreambleBytes, static_cast<uint64_t>(Opcode::kNotifySendReady), p.slot, 0, p.length, 0}, 0);
      Queue({kPreambleBytes + p.length, static_cast<uint64_t>(Opcode::kSendUnboundBuffer), p.slot, 0, p.length, 0},
            p.length);
      break;
    case Opcode::kSendBuffer:
      ++counters_.bound_buffer_sends;
      discard_ = p.length;
      break;
    case Opcode::kSendUnboundBuffer:
      discard_ = p.length;
      break;
  }
  return true;
}

void VirtualPair::Queue(const Preamble& p, uint64_t zeros) {
  Segment s;
  AppendPreamble(&s.bytes, p);
  s.zeros = zeros;
  out_.push_back(std::move(s));
  ++counters_.messages_out;
  counters_.payload_out += zeros;
}

bool VirtualPair::Flush() {
  while (!out_.empty()) {
    Segment& s = out_.front();
    const char* data = s.bytes.empty() ? kZeros : s.bytes.data();
    const size_t len = s.bytes.empty() ? static_cast<size_t>(std::min<uint64_t>(s.zeros, kZeroChunk)) : s.bytes.size();
    if (len == 0) {
      out_.pop_front();
      continue;
    }
    const ssize_t n = ::send(fd_, data, len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      const int err = errno;
      Fail(absl::UnavailableError(absl::StrCat(Errno("send", err), " (the real rank left with ", out_.size(),
                                               " answers of prismd's unread)")));
      return false;
    }
    if (!s.bytes.empty()) {
      s.bytes.erase(0, static_cast<size_t>(n));
    } else {
      s.zeros -= static_cast<uint64_t>(n);
    }
  }
  WatchWrites(!out_.empty());
  return true;
}

void VirtualPair::WatchWrites(bool on) {
  if (on == watching_writes_ || fd_ < 0) return;
  watching_writes_ = on;
  if (auto s = loop_->Modify(fd_, EPOLLIN | (on ? EPOLLOUT : 0u), this); !s.ok()) Fail(s);
}

}  // namespace prism::gloo
