// Real peers on one host: payloads through a shared-memory ring
// (shared_ring.h), headers over the Unix socket (real_comms.h).
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "plugin/clock.h"
#include "plugin/comm.h"
#include "plugin/real_comms.h"
#include "plugin/settings.h"
#include "plugin/shared_ring.h"
#include "test/plugin_log_capture.h"

namespace prism::plugin {
namespace {

using testing::LogCapture;

std::vector<char> Pattern(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + static_cast<size_t>(seed) * 7) & 0xff);
  return v;
}

std::unique_ptr<SharedRing> ReaderOf(const SharedRing& writer) {
  std::string why;
  std::vector<int> fds;
  for (int fd : writer.fds()) fds.push_back(dup(fd));
  auto reader = SharedRing::Attach(std::move(fds), &why);
  INFO(why);
  REQUIRE(reader != nullptr);
  return reader;
}

TEST_CASE("shared ring: a stream through two mappings, wrapping, full and empty", "[plugin][unit][ring]") {
  std::string why;
  auto writer = SharedRing::Create(4096, "test ring", &why);
  REQUIRE(writer != nullptr);
  auto reader = ReaderOf(*writer);
  CHECK(reader->capacity() == 4096);
  const std::vector<char> in = Pattern(20000, 1);
  std::vector<char> out(in.size());
  size_t wrote = 0, read = 0;
  CHECK(writer->Write(in.data(), 3000) == 3000);
  wrote = 3000;
  CHECK(writer->Write(in.data() + wrote, 3000) == 1096);  // full after 4096
  wrote += 1096;
  CHECK(writer->Write(in.data() + wrote, 10) == 0);
  CHECK(reader->Readable() == 4096);
  CHECK(reader->Read(out.data(), 1000) == 1000);
  read = 1000;
  // Odd sizes on both ends, so that copies straddle the wrap point.
  while (read < in.size()) {
    wrote += writer->Write(in.data() + wrote, std::min<size_t>(in.size() - wrote, 777));
    read += reader->Read(out.data() + read, std::min<size_t>(in.size() - read, 1234));
  }
  CHECK(wrote == in.size());
  CHECK(reader->Read(out.data(), 1) == 0);
  CHECK(reader->Readable() == 0);
  CHECK(out == in);
}

bool Rung(int bell) {
  pollfd p{bell, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

TEST_CASE("shared ring: the headers the writer announces are counted in the other mapping", "[plugin][unit][ring]") {
  std::string why;
  auto writer = SharedRing::Create(4096, "test ring", &why);
  REQUIRE(writer != nullptr);
  auto reader = ReaderOf(*writer);
  CHECK(reader->HeadersAnnounced() == 0);
  writer->AnnounceHeader();
  writer->AnnounceHeader();
  CHECK(reader->HeadersAnnounced() == 2);
  CHECK(reader->Readable() == 0);  // headers are counted apart from the bytes
}

TEST_CASE("shared ring: an armed end's bell rings once the other end gives it something", "[plugin][unit][ring]") {
  std::string why;
  auto writer = SharedRing::Create(4096, "test ring", &why);
  REQUIRE(writer != nullptr);
  auto reader = ReaderOf(*writer);
  char byte = 7;
  std::vector<char> page(4096, 'x');
  SECTION("the data bell: rung by a write after the reader armed it, not before") {
    CHECK(writer->Write(&byte, 1) == 1);
    CHECK_FALSE(Rung(reader->data_bell()));  // nobody armed it: a write costs no system call
    CHECK(reader->Read(&byte, 1) == 1);
    reader->ArmReader();
    CHECK_FALSE(Rung(reader->data_bell()));
    CHECK(writer->Write(&byte, 1) == 1);
    CHECK(Rung(reader->data_bell()));
    reader->DrainReaderBell();
    CHECK_FALSE(Rung(reader->data_bell()));
    CHECK(writer->Write(&byte, 1) == 1);  // disarmed by the ring: no second one
    CHECK_FALSE(Rung(reader->data_bell()));
  }
  SECTION("arming with data already there rings at once") {
    CHECK(writer->Write(&byte, 1) == 1);
    reader->ArmReader();
    CHECK(Rung(reader->data_bell()));
  }
  SECTION("the space bell: rung by a read after the full writer armed it") {
    CHECK(writer->Write(page.data(), page.size()) == 4096);
    writer->ArmWriter();
    CHECK_FALSE(Rung(writer->space_bell()));
    CHECK(reader->Read(page.data(), 100) == 100);
    CHECK(Rung(writer->space_bell()));
    writer->DrainWriterBell();
    CHECK_FALSE(Rung(writer->space_bell()));
    writer->ArmWriter();  // room already: rings at once
    CHECK(Rung(writer->space_bell()));
  }
  SECTION("draining one end's bell leaves the other end's rung") {
    CHECK(writer->Write(page.data(), page.size()) == 4096);
    writer->ArmWriter();
    reader->ArmReader();  // data there: rings the data bell
    CHECK(reader->Read(page.data(), 10) == 10);  // rings the space bell
    reader->DrainReaderBell();
    CHECK_FALSE(Rung(reader->data_bell()));
    CHECK(Rung(writer->space_bell()));
  }
}

// Sleeps on `bell` (the armed end's) until it rings; false when it did not
// within 10 s: a lost wake-up, as nothing else keeps these threads waiting.
bool SleepOnBell(int bell) {
  pollfd p{bell, POLLIN, 0};
  return poll(&p, 1, 10000) == 1;
}

TEST_CASE("shared ring: two threads that sleep on the bells instead of spinning lose no wake-up",
          "[plugin][unit][ring]") {
  std::string why;
  auto writer = SharedRing::Create(4096, "test ring", &why);
  REQUIRE(writer != nullptr);
  auto reader = ReaderOf(*writer);
  const std::vector<char> in = Pattern(3 << 20, 5);
  std::vector<char> out(in.size());
  std::atomic<bool> writer_ok{true};
  std::thread w([&] {
    size_t at = 0, piece = 1;
    while (at < in.size() && writer_ok) {
      const size_t n = writer->Write(in.data() + at, std::min(piece, in.size() - at));
      at += n;
      piece = piece * 7 % 9001 + 1;  // 1 byte to 9 KiB: across the 4 KiB ring's wrap and full
      if (n > 0) continue;
      writer->ArmWriter();
      if (!SleepOnBell(writer->space_bell())) writer_ok = false;
      writer->DrainWriterBell();
    }
  });
  size_t at = 0, piece = 3;
  bool reader_ok = true;
  while (at < out.size() && reader_ok) {
    const size_t n = reader->Read(out.data() + at, std::min(piece, out.size() - at));
    at += n;
    piece = piece * 5 % 7001 + 1;
    if (n > 0) continue;
    reader->ArmReader();
    reader_ok = SleepOnBell(reader->data_bell());
    reader->DrainReaderBell();
  }
  writer_ok = writer_ok && reader_ok;
  w.join();
  CHECK(reader_ok);
  CHECK(writer_ok);
  CHECK(at == out.size());
  CHECK(out == in);
}

TEST_CASE("shared ring: what is not a ring is refused with the reason", "[plugin][unit][ring]") {
  std::string why;
  CHECK(SharedRing::Create(100, "small", &why) == nullptr);
  CHECK(why.find("ring capacity 100 is outside") != std::string::npos);
  SECTION("too small a file") {
    const int fd = memfd_create("not a ring", MFD_CLOEXEC);
    REQUIRE(ftruncate(fd, 64) == 0);
    CHECK(SharedRing::Attach({fd, dup(fd), dup(fd)}, &why) == nullptr);
    CHECK(why.find("not a ring of this plugin") != std::string::npos);
  }
  SECTION("the right size but no ring in it") {
    const int fd = memfd_create("zeros", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    REQUIRE(ftruncate(fd, 4096 + 8192) == 0);
    REQUIRE(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0);
    CHECK(SharedRing::Attach({fd, dup(fd), dup(fd)}, &why) == nullptr);
    CHECK(why.find("same Prism build") != std::string::npos);
  }
  SECTION("a memfd its sender could still shrink") {
    const int fd = memfd_create("unsealed", MFD_CLOEXEC);
    REQUIRE(ftruncate(fd, 4096 + 8192) == 0);
    CHECK(SharedRing::Attach({fd, dup(fd), dup(fd)}, &why) == nullptr);
    CHECK(why.find("not sealed against resizing") != std::string::npos);
  }
  SECTION("one fd where a ring has three") {
    std::string made;
    auto ring = SharedRing::Create(4096, "ring", &made);
    REQUIRE(ring != nullptr);
    CHECK(SharedRing::Attach({dup(ring->fds()[0])}, &why) == nullptr);
    CHECK(why.find("passed 1 fds for its ring, not 3") != std::string::npos);
  }
}

// A send comm and a receive comm over a socketpair, with a ring of
// `ring_bytes` between them and one progress thread, which copies in and
// out the payloads larger than `inline_bytes`.
struct RingPair {
  explicit RingPair(uint64_t ring_bytes, uint64_t inline_bytes = uint64_t{1} << 30)
      : settings(LoadSettings(nullptr)), nics(1, 0, 0) {
    settings.inline_bytes = inline_bytes;
    env.settings = &settings;
    env.logger = &logger;
    env.nics = &nics;
    int fds[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    for (int fd : fds) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    std::string why;
    auto ring = SharedRing::Create(ring_bytes, "test ring", &why);
    REQUIRE(ring != nullptr);
    auto reader = ReaderOf(*ring);
    pool = std::make_shared<ProgressEnginePool>(1, 1000);
    send = std::make_unique<RealSendComm>(env, pool, std::vector<int>{fds[0]}, "receiver", 0, std::move(ring));
    recv = std::make_unique<RealRecvComm>(env, pool, std::vector<int>{fds[1]}, "sender", std::move(reader));
  }
  Settings settings;
  Logger logger;
  NicLinks nics;
  CommEnv env;
  std::shared_ptr<ProgressEnginePool> pool;
  std::unique_ptr<RealSendComm> send;
  std::unique_ptr<RealRecvComm> recv;
};

// Tests `req` until done or `limit`; the result of the last call.
Result TestUntil(void* req, int* done, std::chrono::milliseconds limit, int* size = nullptr) {
  const auto end = std::chrono::steady_clock::now() + limit;
  Result r = prism_ncclSuccess;
  *done = 0;
  while (!*done && r == prism_ncclSuccess && std::chrono::steady_clock::now() < end)
    r = static_cast<Request*>(req)->Test(done, size);
  return r;
}

TEST_CASE("ring comms: messages larger and smaller than the ring arrive whole and in order", "[plugin][unit][ring]") {
  const uint64_t inline_bytes = GENERATE(uint64_t{1} << 30, 4096);
  INFO("PRISM_INLINE_BYTES " << inline_bytes << (inline_bytes == 4096 ? ": larger payloads copied by the progress thread" : ""));
  RingPair p(8192, inline_bytes);
  const std::vector<size_t> sizes = {0, 1, 4096, 8192, 10000, 300000, 77};
  std::vector<std::vector<char>> in, out;
  std::vector<void*> sreqs, rreqs;
  for (size_t k = 0; k < sizes.size(); ++k) {
    in.push_back(Pattern(sizes[k], static_cast<int>(k)));
    out.emplace_back(sizes[k] + 16, '\0');
    void* data = out.back().data();
    const size_t room = out.back().size();
    const int tag = static_cast<int>(k % 2);
    MessageTag none;
    void* rreq = nullptr;
    REQUIRE(p.recv->Irecv(1, &data, &room, &tag, nullptr, &none, &rreq) == prism_ncclSuccess);
    REQUIRE(rreq != nullptr);
    void* sreq = nullptr;
    REQUIRE(p.send->Isend(in.back().data(), sizes[k], tag, nullptr, none, &sreq) == prism_ncclSuccess);
    REQUIRE(sreq != nullptr);
    rreqs.push_back(rreq);
    sreqs.push_back(sreq);
  }
  // One thread tests both ends in turn: a message larger than the ring
  // completes only if the receiver drains it while the sender fills it.
  std::vector<bool> sent(sizes.size()), got(sizes.size());
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  size_t finished = 0;
  while (finished < 2 * sizes.size() && std::chrono::steady_clock::now() < end) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      int done = 0, size = -1;
      if (!sent[k]) {
        REQUIRE(static_cast<Request*>(sreqs[k])->Test(&done, nullptr) == prism_ncclSuccess);
        if (done) sent[k] = true, ++finished;
      }
      if (!got[k]) {
        REQUIRE(static_cast<Request*>(rreqs[k])->Test(&done, &size) == prism_ncclSuccess);
        if (done) {
          got[k] = true, ++finished;
          CHECK(size == static_cast<int>(sizes[k]));
        }
      }
    }
  }
  REQUIRE(finished == 2 * sizes.size());
  for (size_t k = 0; k < sizes.size(); ++k) {
    INFO("message " << k << " of " << sizes[k] << " bytes");
    if (sizes[k] > 0) CHECK(std::memcmp(out[k].data(), in[k].data(), sizes[k]) == 0);  // an empty vector's data() may be null
  }
}

TEST_CASE("ring comms: a peer that goes away mid-message fails the other end, naming shared memory",
          "[plugin][unit][ring]") {
  RingPair p(4096);
  LogCapture::Capture(&p.logger);
  const std::vector<char> in = Pattern(10000, 3);
  std::vector<char> out(10000);
  void* data = out.data();
  const size_t room = out.size();
  const int tag = 0;
  MessageTag none;
  void *rreq = nullptr, *sreq = nullptr;
  REQUIRE(p.send->Isend(const_cast<char*>(in.data()), in.size(), tag, nullptr, none, &sreq) == prism_ncclSuccess);
  int done = 0;
  SECTION("the receiver closes: the sender's test() fails") {
    p.recv.reset();
    const Result r = TestUntil(sreq, &done, std::chrono::seconds(5));
    CHECK(r == prism_ncclSystemError);
    CHECK_FALSE(done);
    CHECK(LogCapture::Text().find("send to receiver failed: send to receiver: the receiver closed the connection with 5904 "
                        "bytes of a message still to go through shared memory") != std::string::npos);
  }
  SECTION("the sender closes with 4096 of 10000 bytes in the ring: the receive fails") {
    REQUIRE(p.recv->Irecv(1, &data, &room, &tag, nullptr, &none, &rreq) == prism_ncclSuccess);  // reads 4096
    p.send.reset();
    const Result r = TestUntil(rreq, &done, std::chrono::seconds(5));
    CHECK(r == prism_ncclSystemError);
    CHECK_FALSE(done);
    CHECK(LogCapture::Text().find("receive from sender failed: peer sender closed the connection with 5904 bytes of a message "
                        "still to come through shared memory") != std::string::npos);
  }
}

}  // namespace
}  // namespace prism::plugin
