// A fake PyTorch TCPStore client for tests (the GPU host's torch is not
// here): speaks the protocol of daemon/store/tcp_store_protocol.h the way
// c10d's TCPStore client does — VALIDATE on connect, every key prefixed with
// '/', get = WAIT then GET. Blocking sockets; errors throw std::runtime_error
// (test code only). Not thread-safe: one per thread.
#ifndef PRISM_TEST_TORCH_STORE_CLIENT_H_
#define PRISM_TEST_TORCH_STORE_CLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace prism::testing {

class TorchStoreClient {
 public:
  TorchStoreClient(uint16_t port, int timeout_ms = 30000);
  ~TorchStoreClient();
  TorchStoreClient(const TorchStoreClient&) = delete;
  TorchStoreClient& operator=(const TorchStoreClient&) = delete;

  void Set(const std::string& key, const std::string& value);
  std::string Get(const std::string& key);           // waits until set
  int64_t Add(const std::string& key, int64_t delta);
  bool Check(const std::vector<std::string>& keys);
  void Wait(const std::vector<std::string>& keys);
  // WAIT with a timeout: false when it ran out (CANCEL_WAIT sent, as c10d does).
  bool WaitFor(const std::vector<std::string>& keys, int timeout_ms);
  int64_t NumKeys();
  bool Delete(const std::string& key);
  std::vector<std::string> ListKeys();
  std::string CompareSet(const std::string& key, const std::string& expected, const std::string& desired);
  std::vector<std::string> MultiGet(const std::vector<std::string>& keys);
  void MultiSet(const std::vector<std::string>& keys, const std::vector<std::string>& values);
  uint32_t Ping(uint32_t nonce);
  void Close();

 private:
  void Send(const std::string& bytes);
  void Read(void* out, size_t n, int timeout_ms);
  std::string ReadValue();
  int fd_ = -1;
  int timeout_ms_;
};

}  // namespace prism::testing

#endif  // PRISM_TEST_TORCH_STORE_CLIENT_H_
