// Two-process transfers between real peers, through dlopen of the built
// plugin (test/plugin_peer.cc runs each side).
#include <catch2/catch.hpp>

#include "test/plugin_process.h"

namespace {

std::pair<int, int> Run(const std::string& scenario, std::vector<std::string> env = {}) {
  return prism::testing::RunPeerPair(PRISM_PLUGIN_PEER, PRISM_PLUGIN_SO, scenario, env);
}

}  // namespace

TEST_CASE("real peers: 0 B to 64 MiB both ways, data verified", "[plugin][real]") {
  auto [a, b] = Run("sizes");
  CHECK(a == 0);
  CHECK(b == 0);
}

TEST_CASE("real peers: 0 B to 64 MiB both ways over TCP (PRISM_SAME_HOST=tcp)", "[plugin][real]") {
  auto [a, b] = Run("sizes", {"PRISM_SAME_HOST=tcp"});
  CHECK(a == 0);
  CHECK(b == 0);
}

TEST_CASE("real peers: striping over 4 sockets with small chunks", "[plugin][real]") {
  auto [a, b] = Run("sizes", {"PRISM_SOCKS_PER_COMM=4", "PRISM_MIN_CHUNK_BYTES=4096"});
  CHECK(a == 0);
  CHECK(b == 0);
}

TEST_CASE("real peers: one socket", "[plugin][real]") {
  auto [a, b] = Run("stream", {"PRISM_SOCKS_PER_COMM=1"});
  CHECK(a == 0);
  CHECK(b == 0);
}

TEST_CASE("real peers: grouped receive matches by tag", "[plugin][real]") {
  auto [a, b] = Run("grouped");
  CHECK(a == 0);
  CHECK(b == 0);
}

TEST_CASE("real peers: receives posted in another tag order", "[plugin][real]") {
  auto [a, b] = Run("out_of_order");
  CHECK(a == 0);
  CHECK(b == 0);
}

TEST_CASE("real peers: 32 requests in flight per comm, the 33rd is refused", "[plugin][real]") {
  auto [a, b] = Run("limits");
  CHECK(a == 0);
  CHECK(b == 0);
}

TEST_CASE("real peers: random sizes, window of 8, 3 sockets", "[plugin][real]") {
  auto [a, b] = Run("stream", {"PRISM_SOCKS_PER_COMM=3", "PRISM_MIN_CHUNK_BYTES=4096"});
  CHECK(a == 0);
  CHECK(b == 0);
}

TEST_CASE("real peers: random sizes, window of 8, 3 TCP sockets", "[plugin][real]") {
  auto [a, b] = Run("stream", {"PRISM_SOCKS_PER_COMM=3", "PRISM_MIN_CHUNK_BYTES=4096", "PRISM_SAME_HOST=tcp"});
  CHECK(a == 0);
  CHECK(b == 0);
}

TEST_CASE("real peers: shaped link still delivers everything", "[plugin][real]") {
  auto [a, b] = Run("stream", {"PRISM_LINK_GBPS=80", "PRISM_LINK_LATENCY_US=30"});
  CHECK(a == 0);
  CHECK(b == 0);
}

// Real peers on one host move payloads through a shared-memory ring by
// default (PRISM_SAME_HOST_RING); a ring of one page makes every larger
// message wrap it and wait for the reader, across two processes.
TEST_CASE("real peers: random sizes through a one-page shared-memory ring", "[plugin][real][ring]") {
  for (const char* inline_bytes : {"PRISM_INLINE_BYTES=1073741824", "PRISM_INLINE_BYTES=4096"}) {
    INFO(inline_bytes);
    auto [a, b] = Run("stream", {"PRISM_SAME_HOST_RING=4096", inline_bytes});
    CHECK(a == 0);
    CHECK(b == 0);
  }
}

TEST_CASE("real peers: 10 comms through shared-memory rings, one progress thread each by default",
          "[plugin][real][ring]") {
  auto [a, b] = Run("multi", {"PRISM_TEST_EXPECT_THREADS=10"});
  CHECK(a == 0);
  CHECK(b == 0);
}

TEST_CASE("real peers: payloads over 64 KiB copied out of the rings by progress threads", "[plugin][real][ring]") {
  auto [a, b] = Run("multi", {"PRISM_INLINE_BYTES=65536", "PRISM_PROGRESS_THREADS=2", "PRISM_TEST_EXPECT_THREADS=2"});
  CHECK(a == 0);
  CHECK(b == 0);
}

// PRISM_PROGRESS_THREADS (comms whose payload goes over sockets): 5 connections each way in one context (10 comms
// per process) streaming at once, data verified; the peer also checks how
// many progress threads the comms started.
TEST_CASE("real peers: 10 comms on PRISM_PROGRESS_THREADS=1", "[plugin][real][threads]") {
  auto [a, b] = Run("multi", {"PRISM_SAME_HOST_RING=0", "PRISM_PROGRESS_THREADS=1", "PRISM_TEST_EXPECT_THREADS=1"});
  CHECK(a == 0);
  CHECK(b == 0);
}

TEST_CASE("real peers: 10 comms on PRISM_PROGRESS_THREADS=3", "[plugin][real][threads]") {
  auto [a, b] = Run("multi", {"PRISM_SAME_HOST_RING=0", "PRISM_PROGRESS_THREADS=3", "PRISM_TEST_EXPECT_THREADS=3",
                              "PRISM_SOCKS_PER_COMM=3", "PRISM_MIN_CHUNK_BYTES=4096"});
  CHECK(a == 0);
  CHECK(b == 0);
}

TEST_CASE("real peers: 10 comms, PRISM_PROGRESS_THREADS=0 (one per comm)",
          "[plugin][real][threads]") {
  auto [a, b] = Run("multi", {"PRISM_SAME_HOST_RING=0", "PRISM_PROGRESS_THREADS=0", "PRISM_TEST_EXPECT_THREADS=10"});
  CHECK(a == 0);
  CHECK(b == 0);
}

TEST_CASE("real peers: 10 comms with the default thread count (one per comm)", "[plugin][real][threads]") {
  auto [a, b] = Run("multi", {"PRISM_SAME_HOST_RING=0", "PRISM_TEST_EXPECT_THREADS=10"});
  CHECK(a == 0);
  CHECK(b == 0);
}

// PRISM_PROGRESS_THREADS=-1: no progress threads at all; the bytes move only
// inside isend/irecv/test, on the caller's thread (as NCCL's proxy thread).
TEST_CASE("real peers: 10 comms with no progress threads (inline)", "[plugin][real][threads][inline]") {
  auto [a, b] = Run("multi", {"PRISM_SAME_HOST_RING=0", "PRISM_PROGRESS_THREADS=-1", "PRISM_TEST_EXPECT_THREADS=0",
                              "PRISM_SOCKS_PER_COMM=3", "PRISM_MIN_CHUNK_BYTES=4096"});
  CHECK(a == 0);
  CHECK(b == 0);
}

TEST_CASE("real peers: inline progress, 0 B to 64 MiB both ways and grouped receives",
          "[plugin][real][inline]") {
  for (const char* scenario : {"sizes", "grouped", "out_of_order", "limits"}) {
    INFO(scenario);
    auto [a, b] = Run(scenario, {"PRISM_PROGRESS_THREADS=-1"});
    CHECK(a == 0);
    CHECK(b == 0);
  }
}

TEST_CASE("real peers: inline progress on a shaped link", "[plugin][real][inline]") {
  auto [a, b] = Run("stream", {"PRISM_PROGRESS_THREADS=-1", "PRISM_LINK_GBPS=80", "PRISM_LINK_LATENCY_US=30"});
  CHECK(a == 0);
  CHECK(b == 0);
}

// PRISM_LINK_ORDER: a NIC shared by two connections, one of which posted
// NCCL's window of eight 512 KiB steps (21 ms each at 0.2 Gbit/s) before
// the other posted 4 KiB. As posted, the 4 KiB waits for all eight. Round-
// robin through the shared-memory ring, only for one 64 KiB slice of the
// first (done before any of the eight); with the payload on the socket
// behind its header, the connections take whole-message turns: the 4 KiB
// waits for the first 512 KiB.
TEST_CASE("real peers: a NIC's connections take turns under PRISM_LINK_ORDER=round-robin", "[plugin][real][order]") {
  for (const char* inline_bytes : {"PRISM_INLINE_BYTES=1073741824", "PRISM_INLINE_BYTES=4096"}) {
    INFO(inline_bytes);  // the proxy thread moves the bytes, or the progress thread
    auto [a, b] = Run("turns", {"PRISM_SAME_HOST_RING=4194304", "PRISM_LINK_GBPS=0.2",
                                "PRISM_LINK_ORDER=round-robin", "PRISM_TEST_EXPECT_AHEAD_MAX=0", inline_bytes});
    CHECK(a == 0);
    CHECK(b == 0);
  }
  {
    auto [a, b] = Run("turns", {"PRISM_SAME_HOST_RING=0", "PRISM_LINK_GBPS=0.2", "PRISM_LINK_ORDER=round-robin",
                                "PRISM_TEST_EXPECT_AHEAD_MAX=1"});
    CHECK(a == 0);
    CHECK(b == 0);
  }
  // As posted: at least seven of the eight (the eighth ends only 4 KiB's
  // wire time, 164 us, before the 4 KiB; a test() pass slower than that on a
  // loaded host sees the two done together, the 4 KiB looked at last).
  auto [a, b] = Run("turns", {"PRISM_LINK_GBPS=0.2", "PRISM_TEST_EXPECT_AHEAD_MIN=7"});
  CHECK(a == 0);
  CHECK(b == 0);
}

TEST_CASE("real peers: 10 comms streaming on a round-robin NIC, data verified", "[plugin][real][order]") {
  auto [a, b] = Run("multi", {"PRISM_LINK_GBPS=80", "PRISM_LINK_LATENCY_US=30", "PRISM_LINK_ORDER=round-robin"});
  CHECK(a == 0);
  CHECK(b == 0);
}
