#include <algorithm>
#include <cstring>

#include "plugin/clock.h"
#include "plugin/net_socket.h"
#include "plugin/real_comms.h"

namespace prism::plugin {

RealRecvComm::RealRecvComm(const CommEnv& env,
                           const std::shared_ptr<ProgressEnginePool>& engines,
                           std::vector<int> fds, std::string peer, std::unique_ptr<SharedRing> ring)
    : RealCommBase(env, std::move(fds), std::move(ring), std::move(peer), false),
      buffers_(ProtocolBuffers::FromEnv()),
      queues_(fds_.size()) {
  for (RecvRequest& r : pool_) r.owner = this;
  StartProgress(engines);
}

RealRecvComm::~RealRecvComm() { Close(); }

Result RealRecvComm::Irecv(int n, void** data, const size_t* sizes, const int* tags,
                           const MemRegion* const* mrs, const MessageTag* ops, void** request) {
  *request = nullptr;
  if (n < 1 || n > kMaxGroupedRecvs) {
    PRISM_WARN(*env_.logger, "irecv with n=%d; this plugin groups 1..%d receives", n,
               kMaxGroupedRecvs);
    return prism_ncclInvalidArgument;
  }
  if (Broken("receive from")) return prism_ncclSystemError;
  RecvRequest* req = nullptr;
  for (RecvRequest& r : pool_) {
    if (!r.in_use) {
      req = &r;
      break;
    }
  }
  if (req == nullptr) return prism_ncclSuccess;  // all in flight: NCCL retries
  req->in_use = true;
  req->n = n;
  for (int i = 0; i < n; ++i) {
    Slot& s = req->slots[i];
    s.op = ops != nullptr ? ops[i] : MessageTag{};
    s.user = static_cast<char*>(data[i]);
    s.max_size = sizes[i];
    s.tag = tags != nullptr ? tags[i] : 0;
    s.gpu = mrs != nullptr && mrs[i] != nullptr && mrs[i]->on_gpu();
    s.device = s.gpu ? mrs[i]->device : -1;
    s.lines = ReceiveProtocol(s.op, mrs != nullptr ? mrs[i] : nullptr, buffers_) != LineProtocol::kSimple;
    s.held = false;
    s.matched = false;
    s.bulk = false;
    s.size = 0;
    s.chunks_left = 0;
  }
  req->unmatched = n;
  req->slots_left = n;
  // PRISM_INLINE_BYTES=0: the progress thread reads everything, headers
  // included; otherwise whoever reads a header hands a bulk payload over.
  req->bulk = AllBulk();
  if (req->bulk) BeginBulk();
  req->deliver_ns = 0;
  req->posted_ns = WallNowNs();
  req->ready_at.store(-1, std::memory_order_relaxed);
  submit_.Push(req);
  Advance();
  *request = req;
  return prism_ncclSuccess;
}

Result RealRecvComm::RecvRequest::Test(int* done, int* sizes) {
  *done = 0;
  int64_t at = ready_at.load(std::memory_order_acquire);
  // Not done, or not due yet on a shaped link: move bytes (this request's or
  // the ones behind it) before looking again.
  if (at < 0 || WallNowNs() < at) {
    owner->Advance();
    at = ready_at.load(std::memory_order_acquire);
  }
  if (at < 0) return owner->Broken("receive from") ? prism_ncclSystemError : prism_ncclSuccess;
  const int64_t now = WallNowNs();
  if (now < at) return prism_ncclSuccess;
  if (!Publish()) return prism_ncclSystemError;
  if (owner->env_.link_hold != nullptr) owner->env_.link_hold->RecordSeen(now - at);
  *done = 1;
  for (int i = 0; i < n; ++i) {
    if (sizes != nullptr) sizes[i] = static_cast<int>(slots[i].size);
    if (slots[i].op.valid()) slots[i].op.op->RecordReceive(at, slots[i].size);
    slots[i].op = MessageTag{};
  }
  ready_at.store(-1, std::memory_order_relaxed);
  in_use = false;
  return prism_ncclSuccess;
}

bool RealRecvComm::RecvRequest::Publish() {
  for (int i = 0; i < n; ++i) {
    Slot& s = slots[i];
    if (!s.held || s.size == 0) continue;
    if (!s.gpu) {
      std::memcpy(s.user, s.staging.data(), s.size);
      continue;
    }
    std::string why;
    if (!owner->env_.cuda->Copy(s.user, s.staging.data(), s.size, s.device, &why)) {
      PRISM_WARN(*owner->env_.logger, "receive from %s: %s", owner->peer_.c_str(), why.c_str());
      return false;
    }
  }
  return true;
}

bool RealRecvComm::SlotFilled(RecvRequest* req, int slot) {
  Slot& s = req->slots[slot];
  if (s.bulk) {
    s.bulk = false;
    EndBulk();
  }
  if (s.gpu && !s.held && s.size > 0) {
    std::string why;
    if (!env_.cuda->Copy(s.user, s.staging.data(), s.size, s.device, &why)) {
      failure_.Set(why);
      return false;
    }
  }
  if (--req->slots_left == 0) {
    if (req->bulk) EndBulk();
    const int64_t now = WallNowNs();
    if (env_.link_hold != nullptr) env_.link_hold->RecordLanded(now, req->deliver_ns, req->posted_ns);
    req->ready_at.store(std::max<int64_t>(now, req->deliver_ns), std::memory_order_release);
    if (req->deliver_ns <= now) NoteCompleted();  // due now: NCCL may hear of it
  }
  return true;
}

// Matches the header just read with the oldest posted receive that still
// has an unmatched buffer with the same tag.
bool RealRecvComm::TryMatchHeader(bool* matched) {
  *matched = false;
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    RecvRequest* req = *it;
    for (int i = 0; i < req->n; ++i) {
      Slot& s = req->slots[i];
      if (s.matched || s.tag != header_.tag) continue;
      if (header_.size > s.max_size) {
        failure_.Set("message " + std::to_string(header_.seq) + " from " + peer_ + " has " +
                     std::to_string(header_.size) + " bytes but the receive buffer (tag " +
                     std::to_string(s.tag) + ") holds " + std::to_string(s.max_size));
        return false;
      }
      if (header_.nchunks < 1 || header_.nchunks > fds_.size()) {
        failure_.Set("corrupt message header from " + peer_ + " (nchunks " +
                     std::to_string(header_.nchunks) + ")");
        return false;
      }
      s.matched = true;
      s.size = header_.size;
      // Held only when the sender stamped a modelled delivery: unshaped, the
      // lines land where NCCL's kernel polls them, as over NCCL's own transports.
      s.held = s.lines && header_.deliver_ns > 0;
      s.bulk = !req->bulk && IsBulk(s.size);
      if (s.bulk) BeginBulk();  // the payload is the progress thread's
      char* dest = s.user;
      if (s.gpu || s.held) {
        s.staging.resize(s.size);
        dest = s.staging.data();
      }
      if (ring_ != nullptr) {  // one chunk (one socket): the payload comes through the ring
        if (s.size > 0) {
          ring_queue_.push_back(ReadItem{req, i, dest, s.size});
          ++s.chunks_left;
        }
      } else {
        for (uint32_t j = 0; j < header_.nchunks; ++j) {
          const ChunkSpan c = ChunkOf(s.size, header_.nchunks, j);
          if (c.length == 0) continue;
          queues_[j].push_back(ReadItem{req, i, dest + c.offset, c.length});
          ++s.chunks_left;
        }
      }
      req->deliver_ns = std::max(req->deliver_ns, header_.deliver_ns);
      if (env_.link_hold != nullptr && header_.deliver_ns > 0) {
        env_.link_hold->RecordMatched(WallNowNs(), header_.deliver_ns, req->posted_ns);
      }
      if (--req->unmatched == 0) posted_.erase(it);
      header_got_ = 0;
      *matched = true;
      return s.chunks_left > 0 || SlotFilled(req, i);
    }
  }
  return true;
}

bool RealRecvComm::NextMessageLanded(size_t sock) const {
  if (env_.settings->return_on_complete != ReturnOnComplete::kLanded) return false;
  if (ring_ != nullptr) {
    if (!ring_queue_.empty()) return ring_->Readable() >= ring_queue_.front().left;
    return header_got_ == sizeof(MessageHeader) && ring_->Readable() >= header_.size;
  }
  size_t rest = 0;
  if (!queues_[sock].empty()) {
    rest = queues_[sock].front().left;
  } else if (sock == 0 && header_got_ == sizeof(MessageHeader) && header_.nchunks == 1) {
    rest = header_.size;  // its header read with the last message's tail, its payload not matched yet
  } else {
    return false;  // between headers, or a striped message: stop as 1 does
  }
  return BytesWaiting(fds_[sock]) >= rest;
}

bool RealRecvComm::Pump(size_t sock, bool* progressed) {
  std::string why;
  std::deque<ReadItem>& q = queues_[sock];
  for (;;) {
    if (LeaveToHelper()) return true;  // a bulk payload: the progress thread reads it
    // A receive completed: NCCL hears of it first (with 3: unless the next
    // message is wholly here, so that a burst costs one call, not one each).
    if (ReturnToCaller() && !NextMessageLanded(sock)) return true;
    if (!q.empty()) {
      ReadItem& r = q.front();
      // Socket 0's bytes after its last queued item are the next message's
      // header: the same recvmsg reads what has come of it (while data
      // streams, one syscall per message fewer). header_got_ is 0 whenever
      // items are queued (a header is read only into an empty queue).
      const bool header_too = sock == 0 && q.size() == 1 && !eof_ && header_got_ == 0;
      long got = header_too ? ReadSome2(fds_[0], r.ptr, r.left, &header_, sizeof(MessageHeader), &why)
                            : ReadSome(fds_[sock], r.ptr, r.left, &why);
      if (got < 0) {
        failure_.Set(why + " (" + peer_ + ")");
        return false;
      }
      if (got == 0) return true;
      *progressed = true;
      const size_t payload = std::min(static_cast<size_t>(got), r.left);
      header_got_ += static_cast<size_t>(got) - payload;
      r.ptr += payload;
      r.left -= payload;
      if (r.left > 0) continue;
      RecvRequest* req = r.req;
      const int slot = r.slot;
      q.pop_front();
      if (--req->slots[slot].chunks_left == 0 && !SlotFilled(req, slot)) return false;
      continue;
    }
    // The next header only once a receive is posted to match it: a read
    // with nothing to match is a wasted syscall per message.
    if (sock != 0 || eof_ || posted_.empty()) return true;
    if (header_got_ == 0 && !HeaderMayBeWaiting()) return true;
    if (header_got_ < sizeof(MessageHeader)) {
      long got = ReadSome(fds_[0], reinterpret_cast<char*>(&header_) + header_got_,
                          sizeof(MessageHeader) - header_got_, &why);
      if (got < 0) {
        // End of stream between messages is a normal close by the sender.
        if (header_got_ == 0 && why == "peer closed the connection") {
          eof_ = true;
          return true;
        }
        failure_.Set(why + " (" + peer_ + ")");
        return false;
      }
      if (got == 0) return true;
      *progressed = true;
      header_got_ += static_cast<size_t>(got);
      if (header_got_ < sizeof(MessageHeader)) continue;
      ++headers_read_;
    }
    bool matched = false;
    if (!TryMatchHeader(&matched)) return false;
    if (!matched) return true;  // stalled until a matching receive is posted
    *progressed = true;
  }
}

bool RealRecvComm::HeaderMayBeWaiting() {
  if (ring_ == nullptr || ring_->HeadersAnnounced() != headers_read_) return true;
  return RingPeerGone();
}

bool RealRecvComm::PumpRing(bool* progressed) {
  while (!ring_queue_.empty()) {
    if (LeaveToHelper()) return true;  // a bulk payload: the progress thread copies it out
    if (ReturnToCaller() && !NextMessageLanded(0)) return true;
    ReadItem& r = ring_queue_.front();
    const size_t n = ring_->Read(r.ptr, r.left);
    if (n == 0) {  // not written yet, or the sender is gone
      if (!RingPeerGone() || ring_->Readable() > 0) return true;
      failure_.Set("peer " + peer_ + " closed the connection with " + std::to_string(r.left) +
                   " bytes of a message still to come through shared memory");
      return false;
    }
    *progressed = true;
    r.ptr += n;
    r.left -= n;
    if (r.left > 0) continue;
    RecvRequest* req = r.req;
    const int slot = r.slot;
    ring_queue_.pop_front();
    if (--req->slots[slot].chunks_left == 0 && !SlotFilled(req, slot)) return false;
  }
  return true;
}

bool RealRecvComm::StepInner(bool* progressed) {
  RecvRequest* req;
  while (submit_.Pop(&req)) {
    *progressed = true;
    posted_.push_back(req);
  }
  if (ring_ != nullptr) {
    DrainRingBell();
    // Headers from the socket, payloads from the ring. The socket is read
    // again only once every matched payload is out (the next header may be
    // there): not once per piece while a payload is still being copied in.
    for (;;) {
      bool moved = false;
      if (!Pump(0, &moved) || !PumpRing(&moved)) return false;
      *progressed = *progressed || moved;
      if (!moved || !ring_queue_.empty() || ReturnToCaller()) break;
    }
  } else {
    for (size_t i = 0; i < fds_.size(); ++i) {
      if (!Pump(i, progressed)) return false;
    }
  }
  if (eof_ && !posted_.empty()) {
    failure_.Set("peer " + peer_ + " closed the connection while receives were posted");
    return false;
  }
  return true;
}

void RealRecvComm::FillPollLocked(std::vector<pollfd>* fds) {
  for (size_t i = 0; i < fds_.size(); ++i) {
    const bool want_header = i == 0 && !eof_ && !posted_.empty() && header_got_ < sizeof(MessageHeader);
    if (!queues_[i].empty() || want_header) fds->push_back(pollfd{fds_[i], POLLIN, 0});
  }
  if (ring_ != nullptr && !ring_queue_.empty()) PollRing(fds);  // the payload still coming
}

}  // namespace prism::plugin
