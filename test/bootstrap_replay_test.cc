// Recording format: a session recorded with --record-wire is readable and
// holds what went over the wire; every fixture under test/fixtures/wire/
// replays against a fresh prismd (daemon/bootstrap/replay/wire_replay.h), and a
// changed prismd byte is reported as the first divergence.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/bootstrap_service.h"
#include "daemon/bootstrap/replay/wire_replay.h"
#include "nlohmann/json.hpp"
#include "test/bootstrap_fake_rank.h"
#include "test/bootstrap_test_util.h"

namespace prism::bootstrap::testing {
namespace {

TEST_CASE("record-wire writes a readable JSON-lines recording", "[bootstrap][record]") {
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
  auto events = ReadWireRecording(files[0]);
  REQUIRE(events.ok());
  size_t opens = 0, closes = 0, in_bytes = 0, out_bytes = 0;
  std::map<uint64_t, std::string> received;  // per connection, what the ranks sent, in order
  for (const WireRecordEvent& e : *events) {
    if (e.kind == WireRecordEvent::kOpen) ++opens;
    if (e.kind == WireRecordEvent::kClose) ++closes;
    if (e.kind == WireRecordEvent::kData) (e.from_daemon ? out_bytes : in_bytes) += e.bytes.size();
    if (e.kind == WireRecordEvent::kData && !e.from_daemon) received[e.conn] += e.bytes;
  }
  // The real rank's check-in to prismd's root: NCCL_MAGIC, type 1, int 172
  // at the start of a connection's stream (one read may hold only part).
  bool saw_checkin = false;
  for (const auto& [conn, bytes] : received)
    saw_checkin |= bytes.size() >= 16 && bytes.substr(0, 8) == std::string("\x80\x02\x80\x02\x80\x02\x80\x02", 8) &&
                   bytes[12] == static_cast<char>(172);
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
  CHECK_FALSE(ReadWireRecording(path).ok());
  std::filesystem::remove(path);
}

// ---- Replay of wire fixtures (daemon/bootstrap/replay/wire_replay.h) ----

// The fake's scenario recorded as a fixture: init, ring connect (P2pSetup
// with broker handles), a 0xbeef barrier, three splits (the real rank's tp
// and dp groups, one group without it), destroy.
struct FixtureScenario {
  std::string name;
  uint32_t n = 8;
  uint32_t real = 0;
};

std::vector<std::vector<uint32_t>> FixtureGroups(uint32_t n, uint32_t real) {
  std::vector<uint32_t> tp, dp, other;
  for (uint32_t m = real / 8 * 8; m < real / 8 * 8 + 8 && m < n; ++m) tp.push_back(m);
  for (uint32_t m = real % 8; m < n; m += 8) dp.push_back(m);
  for (uint32_t m = n - 8; m < n; ++m) {
    if (m != real) other.push_back(m);
  }
  return {tp, dp, other};
}

// Runs the scenario with recording on; writes DIR/manifest.json and
// DIR/wire.jsonl (gzip -9: wire.jsonl.gz). Returns problems (empty = ok).
std::vector<std::string> RecordFixture(const FixtureScenario& s, const std::string& dir,
                                       bool gzip) {
  const std::string rec_dir = dir + "/.rec";
  std::filesystem::remove_all(rec_dir);
  const uint16_t root_port = FreePort();
  BootstrapConfig config;
  config.comm_id = absl::StrCat("127.0.0.1:", root_port);
  config.record_wire_dir = rec_dir;
  BootstrapPlan plan = WorldPlan(s.n, 8, {s.real});
  const auto groups = FixtureGroups(s.n, s.real);
  nlohmann::json splits = nlohmann::json::array();
  for (size_t g = 0; g < groups.size(); ++g) {
    AddSplit(plan, 0, groups[g], static_cast<int32_t>(100 + g), 0, absl::StrCat("group", g));
    splits.push_back({{"parent", 0}, {"members", groups[g]}, {"color", 100 + g}, {"key0", 0},
                      {"name", absl::StrCat("group", g)}});
  }
  FakeBroker broker;
  BootstrapService service(config, plan, &broker);
  if (!service.Start().ok()) return {"service did not start"};
  const auto errors = RunRealRanks({static_cast<int>(s.real)}, [&](int rank) {
    FakeRankOptions o;
    o.rank = rank;
    o.nranks = static_cast<int>(s.n);
    o.comm_id = {0x7f000001, root_port};
    FakeRealRank fake(o);
    fake.Init();
    fake.RingConnect(2);
    fake.Barrier(0xbeef);
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto it = std::find(groups[g].begin(), groups[g].end(), static_cast<uint32_t>(rank));
      const bool member = it != groups[g].end();
      auto child = fake.Split(member ? static_cast<int32_t>(100 + g) : kSplitNoColor,
                              member ? static_cast<int32_t>(it - groups[g].begin()) : 0);
      if (child) child->Destroy();
    }
    fake.Destroy();
  });
  for (int i = 0; i < 500 && service.Stats().jobs_completed == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const BootstrapStats st = service.Stats();
  service.Stop();
  std::vector<std::string> problems = errors;
  if (st.jobs_completed != 1 || st.divergences != 0) problems.push_back("job did not complete cleanly");
  std::vector<std::filesystem::path> files;
  for (auto& f : std::filesystem::directory_iterator(rec_dir)) files.push_back(f.path());
  if (files.size() != 1) {
    problems.push_back("expected one recording");
    return problems;
  }
  std::filesystem::create_directories(dir);
  std::filesystem::rename(files[0], dir + "/wire.jsonl");
  std::filesystem::remove_all(rec_dir);
  std::string recording = "wire.jsonl";
  if (gzip) {
    if (std::system(absl::StrCat("gzip -9 -n -f '", dir, "/wire.jsonl'").c_str()) != 0) {
      problems.push_back("gzip failed");
    }
    recording += ".gz";
  }
  nlohmann::json m = {
      {"name", s.name},
      {"description", absl::StrCat("fake real rank ", s.real, " of ", s.n,
                                   " (test/bootstrap_fake_rank): init, ring connect, barrier, "
                                   "3 splits, destroy")},
      {"recording", recording},
      {"nccl_version", 22809},
      {"nccl_comm_id", config.comm_id},
      {"real_ranks", {s.real}},
      {"plan", {{"world_size", s.n}, {"gpus_per_node", 8}, {"splits", splits}}},
      {"env", {{"runtime_connect", true}, {"register_ag", true}}},
      {"address_mode", "loopback_aliases"},
      {"contributions", "first_real_record"},
      {"expect_job_complete", true}};
  std::ofstream(dir + "/manifest.json") << m.dump(2) << "\n";
  return problems;
}

// Regenerates the committed fixtures:
//   PRISM_WIRE_FIXTURE_OUT=test/fixtures/wire bootstrap_tests "[.generate]"
TEST_CASE("generate fake-rank wire fixtures", "[.generate]") {
  const char* out = std::getenv("PRISM_WIRE_FIXTURE_OUT");
  REQUIRE(out != nullptr);
  for (const FixtureScenario& s : {FixtureScenario{"fake-n8-r0", 8, 0},
                                   FixtureScenario{"fake-n64-r5", 64, 5}}) {
    const auto problems = RecordFixture(s, absl::StrCat(out, "/", s.name), true);
    for (const auto& p : problems) UNSCOPED_INFO(p);
    CHECK(problems.empty());
  }
}

// Replays dir against a fresh prismd, up to `attempts` times while the
// replay diverges (each divergence but the last is printed), and checks the
// last replay.
void CheckReplay(const std::string& dir, int attempts = 1) {
  auto r = ReplayFixture(dir);
  for (int a = 1; a < attempts && r.ok() && !r->matched; ++a) {
    UNSCOPED_INFO("replay " << a << " diverged: " << r->divergence);
    r = ReplayFixture(dir);
  }
  INFO(dir);
  REQUIRE(r.ok());
  INFO(r->divergence);
  CHECK(r->matched);
  CHECK(r->bytes_compared > 0);
  CHECK(r->bytes_sent > 0);
  auto manifest = ReadWireManifest(dir);
  REQUIRE(manifest.ok());
  if (manifest->expect_job_complete) CHECK(r->server.jobs_completed == 1);
}

TEST_CASE("every wire fixture replays against prismd", "[bootstrap][replay]") {
  const auto fixtures = ListWireFixtures(PRISM_WIRE_FIXTURES);
  REQUIRE(fixtures.size() >= 2);   // the fake ones at least
  for (const std::string& dir : fixtures) {
    SECTION(std::filesystem::path(dir).filename().string()) { CheckReplay(dir); }
  }
}

TEST_CASE("a fresh recording of the fake replays (fixtures still reproducible)",
          "[bootstrap][replay]") {
  const std::string dir = absl::StrCat(std::filesystem::temp_directory_path().string(),
                                       "/prism-fixture-", getpid());
  // A loaded machine running other socket tests beside this one (ctest -j)
  // made one recording in a few hundred fail (2026-12-02: a stray
  // NCCL_COMM_ID-magic connection on the fake's listener; a retried connect
  // in the replay). A second recording is taken then; a real regression fails
  // both, and the first attempt's problems are still printed.
  std::vector<std::string> problems = RecordFixture({"fresh-n8-r0", 8, 0}, dir, false);
  if (!problems.empty()) {
    for (const auto& p : problems) UNSCOPED_INFO("first recording: " << p);
    std::filesystem::remove_all(dir);
    problems = RecordFixture({"fresh-n8-r0", 8, 0}, dir, false);
  }
  for (const auto& p : problems) UNSCOPED_INFO(p);
  REQUIRE(problems.empty());
  CheckReplay(dir, 2);
  std::filesystem::remove_all(dir);
}

// prismd's recorded bytes of one connection, concatenated, with a way back
// to the data event and offset that holds each byte.
struct DaemonStream {
  uint64_t conn = 0;
  std::string bytes;
  std::vector<std::pair<size_t, size_t>> pieces;   // (event index, stream offset)

  char& At(std::vector<WireRecordEvent>& ev, size_t off) const {
    size_t k = pieces.size() - 1;
    while (pieces[k].second > off) --k;
    return ev[pieces[k].first].bytes[off - pieces[k].second];
  }
};

std::vector<DaemonStream> DaemonStreams(const std::vector<WireRecordEvent>& ev) {
  std::map<uint64_t, DaemonStream> by_conn;
  for (size_t i = 0; i < ev.size(); ++i) {
    if (ev[i].kind != WireRecordEvent::kData || !ev[i].from_daemon) continue;
    DaemonStream& d = by_conn[ev[i].conn];
    d.conn = ev[i].conn;
    d.pieces.push_back({i, d.bytes.size()});
    d.bytes += ev[i].bytes;
  }
  std::vector<DaemonStream> out;
  for (auto& [id, d] : by_conn) out.push_back(std::move(d));
  return out;
}

struct LoadedFixture {
  WireManifest manifest;
  std::vector<WireRecordEvent> events;
};

LoadedFixture LoadFixture(const std::string& name) {
  const std::string dir = std::string(PRISM_WIRE_FIXTURES) + "/" + name;
  auto manifest = ReadWireManifest(dir);
  REQUIRE(manifest.ok());
  auto events = ReadWireRecording(dir + "/" + manifest->recording);
  REQUIRE(events.ok());
  return {*manifest, *events};
}

TEST_CASE("a changed prismd byte in a compared field is the first divergence",
          "[bootstrap][replay]") {
  LoadedFixture f = LoadFixture("fake-n8-r0");
  // Byte 100 of the first AG3 (allGatherInfo, 2292 bytes) frame prismd sent:
  // plain topology data, never renamed.
  const std::string ag3_len("\xf4\x08\x00\x00", 4);
  const auto streams = DaemonStreams(f.events);
  const DaemonStream* victim = nullptr;
  size_t at = 0;
  for (const DaemonStream& d : streams) {
    const size_t p = d.bytes.find(ag3_len);
    if (p != std::string::npos && p + 4 + 2292 <= d.bytes.size()) {
      victim = &d;
      at = p + 4 + 100;
      break;
    }
  }
  REQUIRE(victim != nullptr);
  char& b = victim->At(f.events, at);
  b = static_cast<char>(b ^ 0x5a);
  auto r = ReplayRecording(f.events, f.manifest);
  REQUIRE(r.ok());
  INFO(r->divergence);
  CHECK_FALSE(r->matched);
  CHECK(r->divergence.find(absl::StrCat("conn ", victim->conn, " ")) == 0);
  CHECK(r->divergence.find(absl::StrCat("byte ", at, " of ")) != std::string::npos);
  CHECK(r->divergence.find("payload offset 100)") != std::string::npos);
}

TEST_CASE("a renamed field must be renamed consistently", "[bootstrap][replay]") {
  LoadedFixture f = LoadFixture("fake-n8-r0");
  // Make the recorded P2P addresses of two virtual ranks (ringAllInfo
  // records: 120-byte frames starting with an address) equal: prismd's two
  // distinct new addresses can no longer be one consistent renaming.
  const std::string rec_len("\x78\x00\x00\x00", 4);
  const auto streams = DaemonStreams(f.events);
  std::vector<std::pair<const DaemonStream*, size_t>> addrs;
  for (const DaemonStream& d : streams) {
    for (size_t p = d.bytes.find(rec_len); p != std::string::npos && p + 4 + 120 <= d.bytes.size();
         p = d.bytes.find(rec_len, p + 1)) {
      if (d.bytes[p + 4] == 2 && d.bytes[p + 5] == 0 && d.bytes[p + 6] != 0) {
        addrs.push_back({&d, p + 4});
      }
    }
  }
  REQUIRE(addrs.size() >= 2);
  const std::string first = addrs[0].first->bytes.substr(addrs[0].second, 28);
  REQUIRE(addrs[1].first->bytes.substr(addrs[1].second, 28) != first);
  for (size_t k = 0; k < 28; ++k) addrs[1].first->At(f.events, addrs[1].second + k) = first[k];
  auto r = ReplayRecording(f.events, f.manifest);
  REQUIRE(r.ok());
  INFO(r->divergence);
  CHECK_FALSE(r->matched);
  CHECK(r->divergence.find("inconsistent address") != std::string::npos);
}

TEST_CASE("bad manifests and recordings are refused with a reason", "[bootstrap][replay]") {
  const std::string dir = absl::StrCat(std::filesystem::temp_directory_path().string(),
                                       "/prism-badfix-", getpid());
  std::filesystem::create_directories(dir);
  CHECK(ReplayFixture(dir).status().code() == absl::StatusCode::kNotFound);
  std::ofstream(dir + "/manifest.json") << "{\"nccl_comm_id\":\"127.0.0.1:1\",\"real_ranks\":[0]}";
  auto no_plan = ReadWireManifest(dir);
  REQUIRE_FALSE(no_plan.ok());
  CHECK(std::string(no_plan.status().message()).find("plan") != std::string::npos);
  std::ofstream(dir + "/manifest.json")
      << "{\"nccl_comm_id\":\"127.0.0.1:1\",\"real_ranks\":[0],\"plan\":{\"world_size\":2}}";
  std::ofstream(dir + "/wire.jsonl") << "{\"t_ns\":1,\"conn\":1,\"ev\":\"data\",\"dir\":\"in\","
                                        "\"hex\":\"00\"}\n";
  auto used_before_open = ReplayFixture(dir);
  REQUIRE_FALSE(used_before_open.ok());
  CHECK(std::string(used_before_open.status().message()).find("before its open") !=
        std::string::npos);
  std::ofstream(dir + "/wire.jsonl") << "{\"conn\":1,\"ev\":\"data\",\"dir\":\"in\",\"hex\":\"0\"}\n";
  CHECK_FALSE(ReplayFixture(dir).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace prism::bootstrap::testing
