#include "daemon/bootstrap/bootstrap_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <cstdlib>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace prism::bootstrap {

BootstrapServer::BootstrapServer(BootstrapConfig config, BootstrapPlan plan,
                                 daemon::VirtualConnectionBroker* broker)
    : config_(std::move(config)), plan_(std::move(plan)), broker_(broker) {}

BootstrapServer::~BootstrapServer() {
  Stop();
  for (auto& [id, c] : conns_) {
    if (c->fd >= 0) close(c->fd);
  }
  for (auto& [key, l] : endpoint_listeners_) close(l->fd);
  if (shared_listener_.fd >= 0) close(shared_listener_.fd);
  if (root_listener_.fd >= 0) close(root_listener_.fd);
}

absl::Status BootstrapServer::Start() {
  if (std::getenv("PRISM_BOOTSTRAP_DEBUG") != nullptr) spdlog::set_level(spdlog::level::debug);
  PRISM_ASSIGN_OR_RETURN(profile_, SelectWireProfile(config_.nccl_version));
  PRISM_RETURN_IF_ERROR(ValidatePlan(plan_));
  if (config_.comm_id.empty()) {
    return absl::InvalidArgumentError(
        "bootstrap: NCCL_COMM_ID (host:port) is required: `prism run` sets NCCL_COMM_ID on the "
        "real ranks so that the NCCL unique id is predictable; pass the same address to prismd");
  }
  auto root = ParseHostPort(config_.comm_id);
  if (!root.ok()) return absl::InvalidArgumentError(absl::StrCat("NCCL_COMM_ID: ", root.status().message()));
  root_addr_ = *root;
  unique_id_ = UniqueIdForCommId(root_addr_);
  if (config_.address_mode == AddressMode::kPortPerEndpoint) {
    PRISM_ASSIGN_OR_RETURN(Ipv4Endpoint adv, ParseHostPort(config_.advertise_host + ":1"));
    advertise_ = adv;
  }
  if (!config_.record_wire_dir.empty()) {
    PRISM_ASSIGN_OR_RETURN(recorder_, WireRecorder::Open(config_.record_wire_dir));
    spdlog::info("bootstrap: recording wire traffic to {}", recorder_->path());
  }
  PRISM_RETURN_IF_ERROR(loop_.Init());
  PRISM_ASSIGN_OR_RETURN(Ipv4Endpoint listen_at,
                         ParseHostPort(absl::StrCat(config_.listen_host, ":1")));
  listen_at.port = config_.bootstrap_port;
  PRISM_ASSIGN_OR_RETURN(shared_listener_.fd, ListenOn(listen_at));
  shared_listener_.server = this;
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  getsockname(shared_listener_.fd, reinterpret_cast<sockaddr*>(&a), &len);
  shared_port_ = ntohs(a.sin_port);
  PRISM_RETURN_IF_ERROR(loop_.Add(shared_listener_.fd, EPOLLIN, &shared_listener_));
  // prismd hosts the root when the plan has an init communicator whose rank 0
  // is virtual and that has real members.
  bool host_root = false;
  for (const PlanComm& c : plan_.comms) {
    if (c.parent || plan_.IsReal(c.members[0])) continue;
    for (uint32_t g : c.members) host_root |= plan_.IsReal(g);
  }
  if (host_root) {
    auto fd = ListenOn(root_addr_);
    if (!fd.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "bootstrap: rank 0 is virtual, so prismd must host the NCCL root at NCCL_COMM_ID=",
          config_.comm_id, ", but: ", fd.status().message(),
          ". Pick a free port on an address of this host."));
    }
    root_listener_.fd = *fd;
    root_listener_.server = this;
    root_listener_.is_root = true;
    PRISM_RETURN_IF_ERROR(loop_.Add(root_listener_.fd, EPOLLIN, &root_listener_));
  }
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.bootstrap_port = shared_port_;
  }
  spdlog::info("bootstrap: NCCL {} profile, port {}, root {} ({})", profile_->name, shared_port_,
               config_.comm_id, host_root ? "hosted by prismd" : "hosted by real rank 0");
  StartJob();  // before the thread exists: no race
  thread_ = std::thread([this] { loop_.Run(nullptr); });
  return absl::OkStatus();
}

void BootstrapServer::Stop() {
  if (!thread_.joinable()) return;
  loop_.Stop();
  thread_.join();
}

BootstrapStats BootstrapServer::Stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  BootstrapStats s = stats_;
  return s;
}

}  // namespace prism::bootstrap
