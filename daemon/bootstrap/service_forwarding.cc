// BootstrapService (the public API, bootstrap_service.h) forwards every call
// to the server (bootstrap_server.h). Its definitions sit here, above the
// server, so that the public header needs nothing above it.
#include "daemon/bootstrap/bootstrap_service.h"

#include <memory>
#include <utility>

#include "daemon/bootstrap/bootstrap_server.h"

namespace prism::bootstrap {

BootstrapService::BootstrapService(BootstrapConfig config, BootstrapPlan plan,
                                   daemon::VirtualConnectionBroker* broker)
    : server_(std::make_unique<BootstrapServer>(std::move(config), std::move(plan), broker)) {}

BootstrapService::~BootstrapService() { Stop(); }

absl::Status BootstrapService::Start() { return server_->Start(); }
void BootstrapService::Stop() { server_->Stop(); }
BootstrapStats BootstrapService::Stats() const { return server_->Stats(); }
uint16_t BootstrapService::port() const { return server_->port(); }

absl::StatusOr<UniqueId> BootstrapService::HostRoot(const CommRequest& request) {
  return server_->HostRoot(request);
}

absl::Status BootstrapService::JoinRoot(const CommRequest& request, const UniqueId& id) {
  return server_->JoinRoot(request, id);
}

absl::Status BootstrapService::RealRanksOnly(const CommRequest& request, const UniqueId& id) {
  return server_->RealRanksOnly(request, id);
}

absl::Status BootstrapService::AnnounceSplitGroup(uint32_t rank, std::vector<uint32_t> members) {
  return server_->AnnounceSplitGroup(rank, std::move(members));
}

absl::Status BootstrapService::SetNcclVersion(int version_code) { return server_->SetNcclVersion(version_code); }

void BootstrapService::EndJob(const std::string& why, int grace_ms) { server_->EndJob(why, grace_ms); }

}  // namespace prism::bootstrap
