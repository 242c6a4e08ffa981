// PRISM_RETURN_ON_COMPLETE (plugin/real_comms.h, ReturnToCaller). Send
// side: by default an isend writes its own message even when the same call
// finished an older send whose bytes had waited for a full socket; with 2
// (2a45c0d's scheme) the isend stopped at that completion and left its
// message unsent until a later call. Receive side, 3: a test() reads on
// past its completion only while the next message has wholly landed.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <memory>
#include <vector>

#include "plugin/comm.h"
#include "plugin/real_comms.h"
#include "plugin/real_wire.h"

namespace {

using prism::plugin::CommEnv;
using prism::plugin::Logger;
using prism::plugin::MessageTag;
using prism::plugin::NicLinks;
using prism::plugin::ProgressEnginePool;
using prism::plugin::MessageHeader;
using prism::plugin::RealRecvComm;
using prism::plugin::RealSendComm;
using prism::plugin::Request;
using prism::plugin::ReturnOnComplete;
using prism::plugin::Settings;

// Reads what the socket holds now; how many bytes.
size_t Drain(int fd) {
  std::vector<char> buf(1 << 16);
  size_t total = 0;
  for (;;) {
    const ssize_t got = read(fd, buf.data(), buf.size());
    if (got <= 0) return total;
    total += static_cast<size_t>(got);
  }
}

// Settings and a connected non-blocking socketpair for one comm under test.
struct Bench {
  explicit Bench(ReturnOnComplete setting) : nics(1, 0, 0) {
    settings.min_chunk_bytes = 262144;
    settings.return_on_complete = setting;
    env.settings = &settings;
    env.logger = &logger;
    env.nics = &nics;
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    for (int fd : fds) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  Settings settings;
  Logger logger;
  NicLinks nics;
  CommEnv env;
  int fds[2] = {-1, -1};
  std::shared_ptr<ProgressEnginePool> pool =
      std::make_shared<ProgressEnginePool>(prism::plugin::kInlineProgress, 1000);
};

}  // namespace

TEST_CASE("real peers, no progress threads: with 3 a test() reads on past its receive only while the next message "
          "has wholly landed",
          "[plugin][unit]") {
  const auto setting = GENERATE(ReturnOnComplete::kLanded, ReturnOnComplete::kReceives, ReturnOnComplete::kAll,
                                ReturnOnComplete::kNever);
  const bool whole = GENERATE(true, false);
  INFO("PRISM_RETURN_ON_COMPLETE " << static_cast<int>(setting) << ", next message wholly landed " << whole);
  Bench b(setting);
  RealRecvComm recv(b.env, b.pool, std::vector<int>{b.fds[1]}, "peer");
  constexpr size_t kSize = 4096;
  const int tag = 7;
  MessageTag none;
  std::vector<char> first(kSize, 0), second(kSize, 0);
  void* rreq[2] = {};
  for (int i = 0; i < 2; ++i) {
    void* data = (i == 0 ? first : second).data();
    REQUIRE(recv.Irecv(1, &data, &kSize, &tag, nullptr, &none, &rreq[i]) == prism_ncclSuccess);
  }
  // The peer's bytes as its send comm frames them: the first message whole,
  // the second whole or half of its payload.
  const std::vector<char> payload(kSize, 'x');
  for (int i = 0; i < 2; ++i) {
    const MessageHeader h{kSize, tag, 1, 0, static_cast<uint64_t>(i)};
    const size_t part = i == 1 && !whole ? kSize / 2 : kSize;
    REQUIRE(write(b.fds[0], &h, sizeof(h)) == static_cast<ssize_t>(sizeof(h)));
    REQUIRE(write(b.fds[0], payload.data(), part) == static_cast<ssize_t>(part));
  }
  int done = 0;
  REQUIRE(static_cast<Request*>(rreq[0])->Test(&done, nullptr) == prism_ncclSuccess);
  CHECK(done == 1);
  CHECK(first[kSize - 1] == 'x');
  const bool read_on = setting == ReturnOnComplete::kNever || (setting == ReturnOnComplete::kLanded && whole);
  CHECK((second[0] == 'x') == read_on);
  if (!whole) REQUIRE(write(b.fds[0], payload.data() + kSize / 2, kSize / 2) == static_cast<ssize_t>(kSize / 2));
  done = 0;
  for (int i = 0; i < 1000 && !done; ++i) REQUIRE(static_cast<Request*>(rreq[1])->Test(&done, nullptr) == prism_ncclSuccess);
  CHECK(done == 1);
  CHECK(second[kSize - 1] == 'x');
  recv.Close();
  close(b.fds[0]);
}

TEST_CASE("real peers, no progress threads: an isend writes its message even when it finished older sends first",
          "[plugin][unit]") {
  const auto setting = GENERATE(ReturnOnComplete::kReceives, ReturnOnComplete::kNever, ReturnOnComplete::kAll,
                                ReturnOnComplete::kLanded);
  INFO("PRISM_RETURN_ON_COMPLETE " << static_cast<int>(setting));
  Bench b(setting);
  const int* fds = b.fds;
  RealSendComm send(b.env, b.pool, std::vector<int>{fds[0]}, "peer", 0);

  // The socket full (the peer reads nothing yet), so 8 small sends queue up:
  // 16 pieces, as many as one sendmsg takes.
  const std::vector<char> junk(1 << 16, 'j');
  size_t junk_bytes = 0;
  for (ssize_t n; (n = write(fds[0], junk.data(), junk.size())) > 0;) junk_bytes += static_cast<size_t>(n);
  REQUIRE(errno == EAGAIN);
  constexpr size_t kSize = 1024;
  const std::vector<char> payload(kSize, 'p');
  MessageTag none;
  std::vector<void*> older(8, nullptr);
  for (void*& req : older) {
    REQUIRE(send.Isend(const_cast<char*>(payload.data()), kSize, 7, nullptr, none, &req) == prism_ncclSuccess);
    REQUIRE(req != nullptr);
  }
  // The peer reads the junk; the socket has room for all of them and more.
  REQUIRE(Drain(fds[1]) == junk_bytes);

  // This isend's step sends the 8 queued messages in one sendmsg (they
  // complete), then its own.
  void* last = nullptr;
  REQUIRE(send.Isend(const_cast<char*>(payload.data()), kSize, 7, nullptr, none, &last) == prism_ncclSuccess);
  const size_t per_message = sizeof(MessageHeader) + kSize;
  const size_t landed = Drain(fds[1]);
  CHECK(landed >= 8 * per_message);
  // Stopping at the older completions (2) leaves the new message in the queue.
  CHECK((landed == 9 * per_message) == (setting != ReturnOnComplete::kAll));

  for (void* req : older) {
    int done = 0;
    REQUIRE(static_cast<Request*>(req)->Test(&done, nullptr) == prism_ncclSuccess);
    CHECK(done == 1);
  }
  int done = 0;
  for (int i = 0; i < 1000 && !done; ++i) REQUIRE(static_cast<Request*>(last)->Test(&done, nullptr) == prism_ncclSuccess);
  CHECK(done == 1);
  send.Close();
  close(fds[1]);
}
