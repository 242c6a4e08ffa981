#include "plugin/virtual_peers.h"

namespace prism::plugin {
namespace {
class NoVirtualPeers final : public VirtualPeers {
 public:
  explicit NoVirtualPeers(const CommEnv& env) : env_(env) {}
  Result Connect(const VirtualHandle&, int, std::unique_ptr<NetComm>*) override {
    PRISM_WARN(*env_.logger, "virtual peers are not supported yet");
    return prism_ncclInvalidUsage;
  }
  void ListenOpened(uint64_t, int) override {}
  void ListenClosed(uint64_t) override {}
  std::unique_ptr<NetComm> Accept(uint64_t) override { return nullptr; }

 private:
  CommEnv env_;
};
}  // namespace

std::unique_ptr<VirtualPeers> MakeVirtualPeers(const CommEnv& env, uint64_t comm_id) {
  return std::make_unique<NoVirtualPeers>(env);
}
}  // namespace prism::plugin
