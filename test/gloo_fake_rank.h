// A fake real rank of a Gloo group for tests (the GPU host's torch is not
// here): does what PyTorch 2.11's ProcessGroupGloo does over Gloo's TCP
// transport (daemon/gloo/gloo_wire.h): publishes its rank record under the
// context's store prefix, reads the others' records (all at once when eager,
// a pair's at its first use when lazy), is the listening or the connecting
// end of each pair as Gloo's address order says, and runs collectives on
// Gloo's message protocol: a dissemination barrier and a ring all-reduce of
// floats, as Gloo's own algorithms exchange them.
//
// Blocking sockets with timeouts; every failure throws std::runtime_error
// naming it (test code only), so a test never hangs. Not thread-safe: one
// per thread.
#ifndef PRISM_TEST_GLOO_FAKE_RANK_H_
#define PRISM_TEST_GLOO_FAKE_RANK_H_

#include <sys/socket.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/gloo/gloo_wire.h"
#include "test/torch_store_client.h"

namespace prism::gloo::testing {

struct FakeGlooOptions {
  uint16_t store_port = 0;
  std::string context = "default_pg/0//cpu//0";  // the store prefix (TorchStoreClient adds '/')
  int rank = 0;
  int size = 1;
  bool lazy = false;      // TORCH_GLOO_LAZY_INIT: no pair sequences, pairs on first use
  int timeout_ms = 10000;
};

class FakeGlooRank {
 public:
  explicit FakeGlooRank(FakeGlooOptions options);
  ~FakeGlooRank();
  FakeGlooRank(const FakeGlooRank&) = delete;
  FakeGlooRank& operator=(const FakeGlooRank&) = delete;

  // Publishes this rank's record and, when eager, connects every pair.
  void Rendezvous();
  void Barrier(uint32_t tag);
  // Ring all-reduce (sum) in place: reduce-scatter then all-gather.
  void Allreduce(std::vector<float>& data, uint32_t tag);
  // Raw access for the malformed-input tests: the pair to `peer` (connected
  // on first use) and one read with the timeout (0: the peer closed).
  int PairFd(int peer);
  ssize_t ReadSome(int peer, char* buf, size_t len);
  size_t pairs_connected() const { return fds_.size(); }
  // Closes every pair as Gloo's Pair::close() does (reset, SO_LINGER 0) or
  // as its destructor does (FIN); the store connection stays.
  void ClosePairs(bool reset);

 private:
  struct Transfer;
  RankRecord Record(int rank);
  void Connect(int peer);
  void AcceptFor(int peer);
  int64_t SequenceFor(int peer, const RankRecord& theirs) const;
  int64_t MySequence(int peer) const;
  void Exchange(std::vector<Transfer>& transfers);
  void WriteAll(int fd, const std::string& bytes);
  void ReadExact(int fd, char* out, size_t n);

  FakeGlooOptions o_;
  prism::testing::TorchStoreClient store_;
  int listen_fd_ = -1;
  sockaddr_storage address_{};
  std::map<int, RankRecord> records_;
  std::map<int, int> fds_;               // peer -> pair socket
  std::map<int64_t, int> early_;         // accepted sockets by sequence, not yet claimed
  std::map<std::pair<int, uint64_t>, int> remote_ready_;  // receive-readies before our send was posted
};

}  // namespace prism::gloo::testing

#endif  // PRISM_TEST_GLOO_FAKE_RANK_H_
