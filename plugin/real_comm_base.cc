#include <unistd.h>

#include "plugin/real_comms.h"

namespace prism::plugin {

RealCommBase::RealCommBase(const CommEnv& env, std::vector<int> fds, std::string peer)
    : env_(env), peer_(std::move(peer)), fds_(std::move(fds)) {}

void RealCommBase::StartProgress(const std::shared_ptr<ProgressEnginePool>& engines) {
  engine_ = engines->Attach(this);
  registered_ = engine_ != nullptr;
}

void RealCommBase::Close() {
  if (registered_) engine_->Remove(this);
  registered_ = false;
  for (int fd : fds_) close(fd);
  fds_.clear();
}

void RealCommBase::Kick() {
  if (engine_ != nullptr) engine_->Wake();
  else DriveInline();
}

void RealCommBase::DriveInline() {
  if (engine_ == nullptr && !failure_.broken()) StepInline(this);
}

bool RealCommBase::Broken(const char* direction) {
  if (!failure_.broken()) return false;
  if (!warned_) PRISM_WARN(*env_.logger, "%s %s failed: %s", direction, peer_.c_str(), failure_.why().c_str());
  warned_ = true;
  return true;
}

}  // namespace prism::plugin
