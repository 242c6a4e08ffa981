// An independent "fake real rank" for tests: performs the REAL side of NCCL
// 2.28.9's bootstrap exactly as docs/bootstrap.md describes (blocking
// sockets, its own double-ring all-gather with round-robin progress, NCCL's
// serial root). It shares no protocol code with daemon/bootstrap (only the
// hash and address helpers, tested against measured vectors). Errors throw
// std::runtime_error (test code only).
#ifndef PRISM_TEST_BOOTSTRAP_FAKE_RANK_H_
#define PRISM_TEST_BOOTSTRAP_FAKE_RANK_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon/bootstrap/nccl_ids.h"

namespace prism::bootstrap::testing {

using Bytes = std::vector<uint8_t>;

struct FakeRankOptions {
  int rank = 0;
  int nranks = 0;
  Ipv4Endpoint comm_id;          // NCCL_COMM_ID (when `id` is not given)
  std::optional<UniqueId> id;    // the unique id (from PyTorch's store), NCCL_COMM_ID unset
  std::string host_name = "real-host-a";
  int version = 22809;
  int timeout_ms = 60000;        // every blocking wait
};

// Records this fake rank sends (what NCCL on an H200 would), made so a test
// can tell derived virtual records from the built-in template.
Bytes FakePeerInfo(int rank, uint64_t host_hash, uint64_t pid_hash, int version);
Bytes FakeTopoInfo(int rank);
inline constexpr uint64_t kFakeTotalMem = uint64_t{141} << 30;
inline constexpr int32_t kFakeRingChannels = 2;

class FakeRealRank {
 public:
  explicit FakeRealRank(FakeRankOptions options);
  ~FakeRealRank();
  FakeRealRank(const FakeRealRank&) = delete;
  FakeRealRank& operator=(const FakeRealRank&) = delete;

  // ncclGetUniqueId without NCCL_COMM_ID (comm rank 0 only): listens for
  // the root on 127.0.0.1 (kernel port) and returns the id (random magic).
  UniqueId MakeUniqueId();
  // ncclCommInitRank: rank 0 hosts the root (at NCCL_COMM_ID, or where
  // MakeUniqueId put it); every rank checks in.
  void Init();
  // Generic bootstrap all-gather (double ring, socket mode).
  std::vector<Bytes> AllGather(const Bytes& mine);
  void Send(int peer, int32_t tag, const Bytes& data);
  Bytes Recv(int peer, int32_t tag);
  void Barrier(int32_t tag);
  // ncclTransportP2pSetup for the ring (g = 1, i = 1) with `channels`
  // channels, Prism listen handles, then the 2-byte ring-connect all-gather.
  void RingConnect(int channels);
  // ncclCommSplit: parent all-gather, bootstrapSplit, child init all-gathers.
  std::unique_ptr<FakeRealRank> Split(int32_t color, int32_t key);
  void Destroy();
  // Closes the ring sockets abruptly in the middle of nothing in particular.
  void Crash() { Destroy(); }

  int rank() const { return opt_.rank; }
  int nranks() const { return opt_.nranks; }
  uint64_t comm_hash() const { return comm_hash_; }
  const std::vector<Bytes>& ring_info() const { return ring_info_; }
  const std::vector<Bytes>& peer_info() const { return peer_info_; }
  const std::vector<Bytes>& topo_info() const { return topo_info_; }
  const std::vector<Bytes>& ring_connect_info() const { return ring_connect_info_; }
  // Replies received in RingConnect: from next (its recv entries) and prev.
  const Bytes& setup_from_next() const { return setup_from_next_; }
  const Bytes& setup_from_prev() const { return setup_from_prev_; }
  double init_seconds() const { return init_seconds_; }

 private:
  struct Unexpected { int peer; int32_t tag; int fd; };
  FakeRealRank(FakeRankOptions options, uint64_t hash, uint64_t magic);
  void RunRoot();
  void InitAllGathers();
  int AcceptChecked(int listen_fd, uint64_t magic);

  FakeRankOptions opt_;
  uint64_t comm_hash_ = 0;
  uint64_t magic_ = 0;
  int32_t split_count_ = 0;
  int ring_listen_ = -1, p2p_listen_ = -1, root_listen_ = -1;
  int next_fd_ = -1, prev_fd_ = -1;
  std::vector<Ipv4Endpoint> p2p_addrs_;
  std::vector<Unexpected> unexpected_;
  std::thread root_thread_;
  std::string root_error_;
  std::vector<Bytes> ring_info_, peer_info_, topo_info_, ring_connect_info_;
  Bytes setup_from_next_, setup_from_prev_;
  double init_seconds_ = 0;
};

}  // namespace prism::bootstrap::testing

#endif  // PRISM_TEST_BOOTSTRAP_FAKE_RANK_H_
