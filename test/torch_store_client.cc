#include "test/torch_store_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

#include "daemon/store/tcp_store_protocol.h"

namespace prism::testing {
namespace {

using store::Query;
using store::Request;

Request Make(Query q, std::vector<std::string> keys = {}, std::vector<std::string> values = {}) {
  Request r;
  r.query = q;
  for (auto& k : keys) r.keys.push_back("/" + k);
  r.values = std::move(values);
  return r;
}

}  // namespace

TorchStoreClient::TorchStoreClient(uint16_t port, int timeout_ms) : timeout_ms_(timeout_ms) {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(0x7f000001);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd_);
    fd_ = -1;
    throw std::runtime_error("store client: cannot connect to 127.0.0.1:" + std::to_string(port));
  }
  Request v;
  v.query = Query::kValidate;
  v.word = store::kValidationMagic;
  Send(store::EncodeRequest(v));
}

TorchStoreClient::~TorchStoreClient() { Close(); }

void TorchStoreClient::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

void TorchStoreClient::Send(const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t w = send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (w <= 0) throw std::runtime_error("store client: send failed");
    off += static_cast<size_t>(w);
  }
}

void TorchStoreClient::Read(void* out, size_t n, int timeout_ms) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    pollfd pfd{fd_, POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) != 1) throw std::runtime_error("store client: timeout");
    const ssize_t r = recv(fd_, p, n, 0);
    if (r <= 0) throw std::runtime_error("store client: connection closed");
    p += r;
    n -= static_cast<size_t>(r);
  }
}

std::string TorchStoreClient::ReadValue() {
  uint64_t n = 0;
  Read(&n, 8, timeout_ms_);
  std::string v(n, '\0');
  if (n > 0) Read(v.data(), n, timeout_ms_);
  return v;
}

void TorchStoreClient::Set(const std::string& key, const std::string& value) {
  Send(store::EncodeRequest(Make(Query::kSet, {key}, {value})));
}

void TorchStoreClient::Wait(const std::vector<std::string>& keys) {
  if (!WaitFor(keys, timeout_ms_)) throw std::runtime_error("store client: wait timed out");
}

bool TorchStoreClient::WaitFor(const std::vector<std::string>& keys, int timeout_ms) {
  Send(store::EncodeRequest(Make(Query::kWait, keys)));
  uint8_t reply = 0;
  pollfd pfd{fd_, POLLIN, 0};
  if (poll(&pfd, 1, timeout_ms) == 1) {
    Read(&reply, 1, timeout_ms_);
    return reply == static_cast<uint8_t>(store::WaitReply::kStopWaiting);
  }
  Send(store::EncodeRequest(Make(Query::kCancelWait)));
  Read(&reply, 1, timeout_ms_);
  if (reply == static_cast<uint8_t>(store::WaitReply::kStopWaiting)) Read(&reply, 1, timeout_ms_);
  return false;
}

std::string TorchStoreClient::Get(const std::string& key) {
  Wait({key});
  Send(store::EncodeRequest(Make(Query::kGet, {key})));
  return ReadValue();
}

int64_t TorchStoreClient::Add(const std::string& key, int64_t delta) {
  Request r = Make(Query::kAdd, {key});
  r.number = delta;
  Send(store::EncodeRequest(r));
  int64_t sum = 0;
  Read(&sum, 8, timeout_ms_);
  return sum;
}

bool TorchStoreClient::Check(const std::vector<std::string>& keys) {
  Send(store::EncodeRequest(Make(Query::kCheck, keys)));
  uint8_t reply = 0;
  Read(&reply, 1, timeout_ms_);
  return reply == static_cast<uint8_t>(store::CheckReply::kReady);
}

int64_t TorchStoreClient::NumKeys() {
  Send(store::EncodeRequest(Make(Query::kNumKeys)));
  int64_t n = 0;
  Read(&n, 8, timeout_ms_);
  return n;
}

bool TorchStoreClient::Delete(const std::string& key) {
  Send(store::EncodeRequest(Make(Query::kDeleteKey, {key})));
  int64_t n = 0;
  Read(&n, 8, timeout_ms_);
  return n == 1;
}

std::vector<std::string> TorchStoreClient::ListKeys() {
  Send(store::EncodeRequest(Make(Query::kListKeys)));
  int64_t n = 0;
  Read(&n, 8, timeout_ms_);
  std::vector<std::string> keys;
  for (int64_t i = 0; i < n; ++i) {
    std::string k = ReadValue();
    if (!k.empty() && k[0] == '/') k.erase(0, 1);
    keys.push_back(k);
  }
  return keys;
}

std::string TorchStoreClient::CompareSet(const std::string& key, const std::string& expected,
                                         const std::string& desired) {
  Send(store::EncodeRequest(Make(Query::kCompareSet, {key}, {expected, desired})));
  return ReadValue();
}

std::vector<std::string> TorchStoreClient::MultiGet(const std::vector<std::string>& keys) {
  Send(store::EncodeRequest(Make(Query::kMultiGet, keys)));
  std::vector<std::string> out;
  for (size_t i = 0; i < keys.size(); ++i) out.push_back(ReadValue());
  return out;
}

void TorchStoreClient::MultiSet(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  Send(store::EncodeRequest(Make(Query::kMultiSet, keys, values)));
}

uint32_t TorchStoreClient::Ping(uint32_t nonce) {
  Request r = Make(Query::kPing);
  r.word = nonce;
  Send(store::EncodeRequest(r));
  uint32_t back = 0;
  Read(&back, 4, timeout_ms_);
  return back;
}

}  // namespace prism::testing
