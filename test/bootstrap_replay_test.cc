// Recording format: a session recorded with --record-wire is readable and
// holds what went over the wire (replay against the server: not yet).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/bootstrap_service.h"
#include "test/bootstrap_fake_rank.h"
#include "test/bootstrap_replay.h"
#include "test/bootstrap_test_util.h"

namespace prism::bootstrap::testing {
namespace {

TEST_CASE("--record-wire writes a readable JSON-lines recording", "[bootstrap][record]") {
  const std::string dir = absl::StrCat(std::filesystem::temp_directory_path().string(),
                                       "/prism-wire-", getpid());
  std::filesystem::remove_all(dir);
  const uint16_t root_port = FreePort();
  BootstrapConfig config;
  config.comm_id = absl::StrCat("127.0.0.1:", root_port);
  config.record_wire_dir = dir;
  BootstrapService service(config, WorldPlan(8, 8, {5}), nullptr);
  REQUIRE(service.Start().ok());
  FakeRankOptions o;
  o.rank = 5;
  o.nranks = 8;
  o.comm_id = {0x7f000001, root_port};
  FakeRealRank fake(o);
  REQUIRE_NOTHROW(fake.Init());
  fake.Destroy();
  for (int i = 0; i < 200 && service.Stats().jobs_completed == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  service.Stop();
  std::vector<std::string> files;
  for (auto& f : std::filesystem::directory_iterator(dir)) files.push_back(f.path().string());
  REQUIRE(files.size() == 1);
  auto events = ReadRecording(files[0]);
  REQUIRE(events.ok());
  size_t opens = 0, closes = 0, in_bytes = 0, out_bytes = 0;
  bool saw_checkin = false;
  for (const WireEvent& e : *events) {
    if (e.kind == WireEvent::kOpen) ++opens;
    if (e.kind == WireEvent::kClose) ++closes;
    if (e.kind == WireEvent::kData) (e.daemon_side ? out_bytes : in_bytes) += e.bytes.size();
    // The real rank's check-in to prismd's root: NCCL_MAGIC, type 1, int 172.
    if (e.kind == WireEvent::kData && !e.daemon_side && e.bytes.size() >= 16 &&
        e.bytes.substr(0, 8) == std::string("\x80\x02\x80\x02\x80\x02\x80\x02", 8) &&
        e.bytes[12] == static_cast<char>(172)) {
      saw_checkin = true;
    }
  }
  CHECK(saw_checkin);
  CHECK(opens >= 4);  // check-in, root delivery, two ring links
  CHECK(closes == opens);
  // Three all-gathers of 8 ranks cross the two ring links both ways.
  CHECK(in_bytes > 2 * (120 + 120 + 2292));
  CHECK(out_bytes > 2 * (120 + 120 + 2292));
  std::filesystem::remove_all(dir);
}

TEST_CASE("recordings with bad lines are refused", "[bootstrap][record]") {
  const std::string path = absl::StrCat(std::filesystem::temp_directory_path().string(),
                                        "/prism-bad-", getpid(), ".jsonl");
  {
    std::ofstream out(path);
    out << "{\"t_ns\":1,\"conn\":1,\"ev\":\"open\",\"dir\":\"in\"}\nnot json\n";
  }
  CHECK_FALSE(ReadRecording(path).ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace prism::bootstrap::testing
