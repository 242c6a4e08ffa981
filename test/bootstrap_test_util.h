// Shared helpers for the bootstrap tests: a fake VirtualConnectionBroker, a
// free-port picker, a scenario runner (server + fake real ranks in threads)
// and the checks of what virtual ranks sent.
#ifndef PRISM_TEST_BOOTSTRAP_TEST_UTIL_H_
#define PRISM_TEST_BOOTSTRAP_TEST_UTIL_H_

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "daemon/bootstrap/bootstrap_service.h"
#include "daemon/bootstrap/virtual_connections.h"
#include "test/bootstrap_fake_rank.h"
#include "test/free_port.h"

namespace prism::bootstrap::testing {

class FakeBroker : public daemon::VirtualConnectionBroker {
 public:
  void CommunicatorKnown(const daemon::CommDescription& c) override;
  VirtualHandle MintReceiveHandle(const daemon::VirtualLinkInfo& link) override;
  absl::Status ConnectToRealListener(const RealListenHandle& listen,
                                     const daemon::VirtualLinkInfo& link) override;
  int mints() const { return mints_.load(); }
  int connects() const { return connects_.load(); }
  std::vector<uint64_t> listen_ids() const;
  // Every CommunicatorKnown so far, in order.
  std::vector<daemon::CommDescription> communicators() const;

 private:
  std::atomic<int> mints_{0}, connects_{0};
  std::atomic<uint64_t> next_conn_{1};
  mutable std::mutex mu_;
  std::vector<uint64_t> listen_ids_;
  std::vector<daemon::CommDescription> communicators_;
};

inline uint16_t FreePort() { return prism::testing::FreeLoopbackPort(); }

// Problems with what the virtual ranks sent to `fake` (empty = none).
// `real` = comm ranks that are real; `node_of` = graph node per comm rank.
std::vector<std::string> CheckVirtualSlices(const FakeRealRank& fake, const std::vector<int>& real,
                                            const std::vector<uint32_t>& node_of,
                                            uint16_t daemon_port);

// Runs `body` for every real rank in its own thread; returns the errors.
std::vector<std::string> RunRealRanks(const std::vector<int>& real,
                                      const std::function<void(int rank)>& body);

}  // namespace prism::bootstrap::testing

#endif  // PRISM_TEST_BOOTSTRAP_TEST_UTIL_H_
