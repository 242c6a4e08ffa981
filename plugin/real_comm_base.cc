#include <unistd.h>

#include "plugin/clock.h"
#include "plugin/net_socket.h"
#include "plugin/real_comms.h"

namespace prism::plugin {

RealCommBase::RealCommBase(const CommEnv& env, std::vector<int> fds, std::unique_ptr<SharedRing> ring,
                           std::string peer, bool is_send)
    : env_(env), peer_(std::move(peer)), fds_(std::move(fds)), ring_(std::move(ring)),
      is_send_(is_send) {}

void RealCommBase::StartProgress(const std::shared_ptr<ProgressEnginePool>& engines) {
  engine_ = engines->Attach(this);
  registered_ = engine_ != nullptr;
}

void RealCommBase::PollRing(std::vector<pollfd>* fds) {
  if (is_send_) {
    ring_->ArmWriter();
  } else {
    ring_->ArmReader();
  }
  bell_armed_ = true;
  fds->push_back(pollfd{is_send_ ? ring_->space_bell() : ring_->data_bell(), POLLIN, 0});
  fds->push_back(pollfd{fds_[0], POLLRDHUP, 0});  // a peer that hangs up while this end waits
}

void RealCommBase::DrainRingBell() {
  if (!bell_armed_) return;
  bell_armed_ = false;
  if (is_send_) {
    ring_->DrainWriterBell();
  } else {
    ring_->DrainReaderBell();
  }
}

bool RealCommBase::RingPeerGone() {
  const int64_t now = MonoNowNs();
  if (now < next_hangup_check_ns_ || fds_.empty()) return false;
  next_hangup_check_ns_ = now + 1000000;
  return PeerHungUp(fds_[0]);
}

void RealCommBase::Close() {
  if (registered_) engine_->Remove(this);
  registered_ = false;
  for (int fd : fds_) close(fd);
  fds_.clear();
}

void RealCommBase::Step(bool* progressed) {
  if (failure_.broken() || !bulk_in_flight()) return;
  std::unique_lock<std::mutex> lock(step_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // the proxy thread is moving this comm's bytes
  StepInner(progressed);
}

void RealCommBase::FillPoll(std::vector<pollfd>* fds) {
  if (failure_.broken() || !bulk_in_flight()) return;
  std::lock_guard<std::mutex> lock(step_mu_);  // the proxy thread holds it briefly
  FillPollLocked(fds);
}

void RealCommBase::Advance() {
  if (engine_ == nullptr || !bulk_in_flight()) {
    std::unique_lock<std::mutex> lock(step_mu_, std::try_to_lock);
    // Not owned: the progress thread is stepping; the next test() retries.
    if (lock.owns_lock() && !failure_.broken()) {
      stepping_on_caller_ = true;
      completed_in_step_ = false;
      StepInline(this, [this](bool* progressed) { StepInner(progressed); });
      stepping_on_caller_ = false;
    }
  }
  if (engine_ != nullptr && bulk_in_flight()) engine_->Wake();
}

bool RealCommBase::Broken(const char* direction) {
  if (!failure_.broken()) return false;
  if (!warned_) PRISM_WARN(*env_.logger, "%s %s failed: %s", direction, peer_.c_str(), failure_.why().c_str());
  warned_ = true;
  return true;
}

}  // namespace prism::plugin
