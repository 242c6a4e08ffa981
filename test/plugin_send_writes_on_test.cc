// PRISM_RETURN_ON_COMPLETE on the send side (plugin/real_comms.h,
// ReturnToCaller): by default an isend writes its own message even when the
// same call finished an older send whose bytes had waited for a full
// socket; with 2 (2a45c0d's scheme) the isend stopped at that completion
// and left its message unsent until a later call.
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

}  // namespace

TEST_CASE("real peers, no progress threads: an isend writes its message even when it finished older sends first",
          "[plugin][unit]") {
  const auto setting = GENERATE(ReturnOnComplete::kReceives, ReturnOnComplete::kNever, ReturnOnComplete::kAll);
  INFO("PRISM_RETURN_ON_COMPLETE " << static_cast<int>(setting));
  Settings settings;
  settings.min_chunk_bytes = 262144;
  settings.return_on_complete = setting;
  Logger logger;
  NicLinks nics(1, 0, 0);
  CommEnv env;
  env.settings = &settings;
  env.logger = &logger;
  env.nics = &nics;
  int fds[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  for (int fd : fds) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  auto pool = std::make_shared<ProgressEnginePool>(prism::plugin::kInlineProgress, 1000);
  RealSendComm send(env, pool, std::vector<int>{fds[0]}, "peer", 0);

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
  const size_t per_message = sizeof(prism::plugin::MessageHeader) + kSize;
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
