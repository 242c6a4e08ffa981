#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "plugin/clock.h"
#include "plugin/real_comms.h"

namespace prism::plugin {

RealSendComm::RealSendComm(const CommEnv& env,
                           const std::shared_ptr<ProgressEnginePool>& engines,
                           std::vector<int> fds, std::string peer, int dev, std::unique_ptr<SharedRing> ring)
    : RealCommBase(env, std::move(fds), std::move(ring), std::move(peer), true), queues_(fds_.size()),
      nic_(env.settings->link_bits_per_second > 0 || env.settings->link_latency_ns > 0
               ? std::make_unique<LinkConnection>(&env.nics->Tx(dev), /*whole_messages=*/ring_ == nullptr)
               : nullptr),
      header_later_(nic_ != nullptr && ring_ != nullptr && nic_->link().order() == LinkOrder::kRoundRobin) {
  for (SendRequest& r : pool_) r.owner = this;
  StartProgress(engines);
}

RealSendComm::~RealSendComm() { Close(); }

Result RealSendComm::Isend(void* data, size_t size, int tag, const MemRegion* mr, const MessageTag& op,
                           void** request) {
  *request = nullptr;
  if (Broken("send to")) return prism_ncclSystemError;
  SendRequest* req = nullptr;
  for (SendRequest& r : pool_) {
    if (!r.in_use) {
      req = &r;
      break;
    }
  }
  if (req == nullptr) return prism_ncclSuccess;  // all in flight: NCCL retries
  req->in_use = true;
  req->data = static_cast<const char*>(data);
  req->gpu = mr != nullptr && mr->on_gpu();
  req->device = req->gpu ? mr->device : -1;
  req->size = size;
  req->tag = tag;
  req->mr = mr;
  req->op = op;
  req->posted_ns = WallNowNs();
  req->ready_at.store(-1, std::memory_order_relaxed);
  *request = req;
  if (nic_ == nullptr) {
    Launch(req, nullptr);
    return prism_ncclSuccess;
  }
  if (header_later_) {  // the payload into the ring now, the header at Launch
    req->items_left = size > 0 ? 2 : 1;
    req->bulk = IsBulk(size);
    if (req->bulk) BeginBulk();
    submit_.Push(req);  // capacity 64 > pool size: never full
  }
  if (const std::optional<LinkModel::Times> t = nic_->Post(Bytes(size), Nanoseconds(req->posted_ns))) {
    Launch(req, &*t);  // decided at once (nothing of this comm's awaits before it)
    return prism_ncclSuccess;
  }
  awaiting_link_.push_back(req);
  LaunchDecided();
  if (header_later_) Advance();
  return prism_ncclSuccess;
}

void RealSendComm::LaunchDecided() {
  while (!awaiting_link_.empty()) {  // empty under PRISM_LINK_ORDER=posted: Isend launched it
    const std::optional<LinkModel::Times> t = nic_->NextDecided(Nanoseconds(WallNowNs()));
    if (!t) return;
    SendRequest* req = awaiting_link_.front();
    awaiting_link_.pop_front();
    Launch(req, &*t);
  }
}

void RealSendComm::Launch(SendRequest* req, const LinkModel::Times* t) {
  req->wire_done_ns = t != nullptr ? t->wire_done.count() : 0;
  RecordOwnSend(env_, req->op, req->mr, req->data, req->size, req->posted_ns,
                t != nullptr ? t->wire_done.count() : req->posted_ns);
  req->header = MessageHeader{req->size, req->tag,
                              ChunkCount(req->size, env_.settings->min_chunk_bytes,
                                         static_cast<uint32_t>(fds_.size())),
                              t != nullptr ? t->deliver.count() : 0, next_seq_++};
  if (header_later_) {
    headers_.Push(req);  // capacity 64 > pool size: never full
    Advance();
    return;
  }
  req->bulk = IsBulk(req->size);
  if (req->bulk) BeginBulk();
  submit_.Push(req);  // capacity 64 > pool size: never full
  Advance();  // small: out now if the socket takes it; bulk: to the progress thread
}

Result RealSendComm::SendRequest::Test(int* done, int* sizes) {
  *done = 0;
  int64_t at = ready_at.load(std::memory_order_acquire);
  // Not done, or not due yet on a shaped link: move bytes (this request's or
  // the ones behind it) before looking again.
  if (at < 0 || WallNowNs() < at) {
    owner->LaunchDecided();
    owner->Advance();
    at = ready_at.load(std::memory_order_acquire);
  }
  if (at < 0) return owner->Broken("send to") ? prism_ncclSystemError : prism_ncclSuccess;
  if (at > 0 && WallNowNs() < at) return prism_ncclSuccess;
  *done = 1;
  if (sizes != nullptr) sizes[0] = static_cast<int>(header.size);
  ready_at.store(-1, std::memory_order_relaxed);
  in_use = false;
  return prism_ncclSuccess;
}

bool RealSendComm::StartRequest(SendRequest* req) {
  const uint64_t size = req->size;  // the header is not written yet under header_later_
  const char* src = req->data;
  if (req->gpu && size > 0) {
    req->staging.resize(size);
    std::string why;
    if (!env_.cuda->Copy(req->staging.data(), req->data, size, req->device, &why)) {
      failure_.Set(why);
      return false;
    }
    src = req->staging.data();
  }
  if (header_later_) {  // items_left set at isend: the payload's and the header's
    if (size > 0) ring_queue_.push_back(WriteItem{req, src, size});
    return true;
  }
  req->items_left = 1;
  QueueHeader(req);
  if (ring_ != nullptr) {  // one chunk (one socket): the payload goes through the ring
    if (size > 0) {
      ring_queue_.push_back(WriteItem{req, src, size});
      ++req->items_left;
    }
    return true;
  }
  for (uint32_t j = 0; j < req->header.nchunks; ++j) {
    const ChunkSpan c = ChunkOf(size, req->header.nchunks, j);
    if (c.length == 0) continue;
    queues_[j].push_back(WriteItem{req, src + c.offset, c.length});
    ++req->items_left;
  }
  return true;
}

void RealSendComm::QueueHeader(SendRequest* req) {
  if (ring_ != nullptr) ring_->AnnounceHeader();  // before its bytes: the receiver reads the socket only then
  queues_[0].push_back(WriteItem{req, reinterpret_cast<const char*>(&req->header), sizeof(MessageHeader)});
}

bool RealSendComm::Pump(size_t sock, bool* progressed) {
  std::deque<WriteItem>& q = queues_[sock];
  while (!q.empty() && !ReturnToCaller()) {
    iovec iov[kMaxSendIov];
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = GatherSendIov(q, iov);  // small messages together, a large one alone
    ssize_t sent = sendmsg(fds_[sock], &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      failure_.Set(std::string("send to ") + peer_ + ": " + std::strerror(errno));
      return false;
    }
    *progressed = true;
    size_t left = static_cast<size_t>(sent);
    while (left > 0 || (!q.empty() && q.front().left == 0)) {
      WriteItem& w = q.front();
      const size_t take = std::min(left, w.left);
      w.ptr += take;
      w.left -= take;
      left -= take;
      if (w.left != 0) break;
      SendRequest* req = w.req;
      q.pop_front();
      ItemDone(req);
    }
  }
  return true;
}

void RealSendComm::ItemDone(SendRequest* req) {
  if (--req->items_left != 0) return;
  if (req->bulk) EndBulk();
  const int64_t now = WallNowNs();
  req->ready_at.store(std::max<int64_t>(now, req->wire_done_ns), std::memory_order_release);
  if (req->wire_done_ns <= now) NoteCompleted();  // due now: NCCL may hear of it
}

bool RealSendComm::PumpRing(bool* progressed) {
  while (!ring_queue_.empty() && !ReturnToCaller()) {
    WriteItem& w = ring_queue_.front();
    const size_t n = ring_->Write(w.ptr, w.left);
    if (n == 0) {  // full: the receiver has not read yet, or is gone
      if (!RingPeerGone()) return true;
      failure_.Set("send to " + peer_ + ": the receiver closed the connection with " + std::to_string(w.left) +
                   " bytes of a message still to go through shared memory");
      return false;
    }
    *progressed = true;
    w.ptr += n;
    w.left -= n;
    if (w.left > 0) continue;
    SendRequest* req = w.req;
    ring_queue_.pop_front();
    ItemDone(req);
  }
  return true;
}

bool RealSendComm::StepInner(bool* progressed) {
  if (ring_ != nullptr) DrainRingBell();
  SendRequest* req;
  while (submit_.Pop(&req)) {
    *progressed = true;
    if (!StartRequest(req)) return false;
  }
  while (headers_.Pop(&req)) {
    *progressed = true;
    QueueHeader(req);
  }
  for (size_t i = 0; i < fds_.size(); ++i) {
    if (!Pump(i, progressed)) return false;
  }
  return ring_ == nullptr || PumpRing(progressed);
}

void RealSendComm::FillPollLocked(std::vector<pollfd>* fds) {
  for (size_t i = 0; i < fds_.size(); ++i) {
    if (!queues_[i].empty()) fds->push_back(pollfd{fds_[i], POLLOUT, 0});
  }
  if (ring_ != nullptr && !ring_queue_.empty()) PollRing(fds);  // full: wait for the reader
}

}  // namespace prism::plugin
