#include "test/bootstrap_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <set>
#include <thread>

namespace prism::bootstrap::testing {
namespace {

template <typename T>
T Get(const Bytes& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}

bool Contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

void FakeBroker::CommunicatorKnown(const daemon::CommDescription& c) {
  std::lock_guard<std::mutex> lock(mu_);
  communicators_.push_back(c);
}

std::vector<daemon::CommDescription> FakeBroker::communicators() const {
  std::lock_guard<std::mutex> lock(mu_);
  return communicators_;
}

VirtualHandle FakeBroker::MintReceiveHandle(const daemon::VirtualLinkInfo& link) {
  ++mints_;
  VirtualHandle h;
  h.conn_id = next_conn_++;
  h.virtual_rank = link.virtual_rank;
  return h;
}

absl::Status FakeBroker::ConnectToRealListener(const RealListenHandle& listen,
                                               const daemon::VirtualLinkInfo& link) {
  ++connects_;
  std::lock_guard<std::mutex> lock(mu_);
  listen_ids_.push_back(listen.listen_id);
  return absl::OkStatus();
}

std::vector<uint64_t> FakeBroker::listen_ids() const {
  std::lock_guard<std::mutex> lock(mu_);
  return listen_ids_;
}

std::vector<std::string> CheckVirtualSlices(const FakeRealRank& fake, const std::vector<int>& real,
                                            const std::vector<uint32_t>& node_of,
                                            uint16_t daemon_port) {
  std::vector<std::string> errors;
  auto err = [&](int v, const std::string& what) {
    if (errors.size() < 20) errors.push_back("rank " + std::to_string(v) + ": " + what);
  };
  const int n = fake.nranks();
  std::set<std::pair<uint32_t, uint16_t>> p2p_seen;
  std::set<uint64_t> pids;
  std::map<uint32_t, uint64_t> host_of_node;
  std::set<uint64_t> real_hosts;
  for (int r : real) real_hosts.insert(Get<uint64_t>(fake.peer_info()[r], 16));
  for (int v = 0; v < n; ++v) {
    if (Contains(real, v)) continue;
    const Bytes& ring = fake.ring_info()[v];
    auto p2p = DecodeSockAddr(ring.data());
    if (!p2p.ok() || p2p->ip < 0x7f400000u || p2p->ip >= 0x7f800000u || p2p->port != daemon_port) {
      err(v, "P2P address is not a 127.64/10 alias on the daemon port");
    } else if (!p2p_seen.insert({p2p->ip, p2p->port}).second) {
      err(v, "P2P address shared with another rank");
    }
    if (IsAllZero(ring.data() + 28, 28)) err(v, "zero proxy address");
    if (!IsAllZero(ring.data() + 64, 56)) err(v, "non-zero RAS entry");
    const Bytes& pi = fake.peer_info()[v];
    if (Get<int32_t>(pi, 0) != v) err(v, "peerInfo.rank " + std::to_string(Get<int32_t>(pi, 0)));
    if (Get<int32_t>(pi, 112) != 22809) err(v, "peerInfo.version");
    if (Get<uint64_t>(pi, 64) != kFakeTotalMem) err(v, "totalGlobalMem not the real rank's");
    if (Get<int32_t>(pi, 56) != 90) err(v, "cudaCompCap");
    if (!IsAllZero(pi.data() + 72, 36)) err(v, "fabricInfo not zero");
    if (Get<int32_t>(pi, 108) != 1) err(v, "cuMemSupport");
    const uint64_t host = Get<uint64_t>(pi, 16);
    if (real_hosts.count(host)) err(v, "hostHash equals a real host's");
    auto [it, fresh] = host_of_node.emplace(node_of[v], host);
    if (!fresh && it->second != host) err(v, "hostHash differs inside one virtual node");
    if (!pids.insert(Get<uint64_t>(pi, 24)).second) err(v, "pidHash not unique");
    const Bytes& ti = fake.topo_info()[v];
    if (ti.size() != 2292) {
      err(v, "AG3 size");
      continue;
    }
    if (Get<int32_t>(ti, 32 + 4) != kFakeRingChannels) err(v, "ring nChannels not the real rank's");
    if (Get<int32_t>(ti, 4 * 32 + 4) != 0) err(v, "NVLS channels not 0");
    std::vector<int> group;
    for (int u = 0; u < n; ++u) {
      if (!Contains(real, u) && node_of[u] == node_of[v]) group.push_back(u);
    }
    const size_t idx = std::find(group.begin(), group.end(), v) - group.begin();
    const int prev = idx == 0 ? -1 : group[idx - 1];
    const int next = idx + 1 == group.size() ? -1 : group[idx + 1];
    for (int c : {0, 63}) {
      if (Get<int32_t>(ti, 224 + 4 + 4 * c) != group.front()) err(v, "ringRecv");
      if (Get<int32_t>(ti, 224 + 260 + 4 * c) != group.back()) err(v, "ringSend");
      if (Get<int32_t>(ti, 224 + 516 + 4 * c) != prev) err(v, "ringPrev");
      if (Get<int32_t>(ti, 224 + 772 + 4 * c) != next) err(v, "ringNext");
      if (Get<int32_t>(ti, 224 + 1028 + 4 * c) != group.front()) err(v, "treeToParent");
    }
  }
  std::set<uint64_t> hosts;
  for (auto& [node, h] : host_of_node) hosts.insert(h);
  if (hosts.size() != host_of_node.size()) errors.push_back("two virtual nodes share a hostHash");
  return errors;
}

std::vector<std::string> RunRealRanks(const std::vector<int>& real,
                                      const std::function<void(int rank)>& body) {
  std::vector<std::string> errors(real.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < real.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        body(real[i]);
      } catch (const std::exception& e) {
        errors[i] = "real rank " + std::to_string(real[i]) + ": " + e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::string> out;
  for (auto& e : errors) {
    if (!e.empty()) out.push_back(e);
  }
  return out;
}

}  // namespace prism::bootstrap::testing
