// The bootstrap server against independent fake real ranks (NCCL 2.28.9's
// real side written from docs/bootstrap.md): root in both modes, ring,
// double-ring all-gathers, AG1/AG3 synthesis, P2pSetup with the broker,
// barriers, splits, destroy, a real rank dying mid-protocol.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net_handles.h"
#include "daemon/bootstrap/bootstrap_service.h"
#include "daemon/bootstrap/replay/wire_replay.h"
#include "daemon/bootstrap/split_source.h"
#include "graphgen/split_color.h"
#include "test/bootstrap_fake_rank.h"
#include "test/bootstrap_test_util.h"

namespace prism::bootstrap::testing {
namespace {

struct Scenario {
  int n = 8;
  std::vector<int> real = {0};
  bool ring_connect = false;
  bool barrier = false;
  bool split = false;
  bool framework_colors = false;
  // prismd --follow: prismd's plan has the world only; the real ranks pass
  // PyTorch's colors and keys for groups only the test knows.
  bool follow = false;
  ContributionSource source = ContributionSource::kFirstRealRecord;
  std::string record_dir;
};

std::vector<uint32_t> Nodes(int n) {
  std::vector<uint32_t> v;
  for (int r = 0; r < n; ++r) v.push_back(r / 8);
  return v;
}

bool WaitFor(const std::function<bool()>& pred) {
  for (int i = 0; i < 500; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Splits in program order: tp group of every real rank, dp group of every
// real rank (one ncclCommSplit call each, PyTorch new_group style), and one
// tp group without real members (every real rank passes NOCOLOR).
void AddSplits(BootstrapPlan& plan, const Scenario& s, std::vector<int32_t>* colors) {
  std::vector<std::vector<uint32_t>> groups;
  for (int r : s.real) {
    std::vector<uint32_t> tp;
    for (int m = r / 8 * 8; m < r / 8 * 8 + 8 && m < s.n; ++m) tp.push_back(m);
    if (std::find(groups.begin(), groups.end(), tp) == groups.end()) groups.push_back(tp);
  }
  for (int r : s.real) {
    std::vector<uint32_t> dp;
    for (int m = r % 8; m < s.n; m += 8) dp.push_back(m);
    if (std::find(groups.begin(), groups.end(), dp) == groups.end()) groups.push_back(dp);
  }
  std::vector<uint32_t> other;
  for (int m = s.n - 8; m < s.n; ++m) {
    if (std::find(s.real.begin(), s.real.end(), m) == s.real.end()) other.push_back(m);
  }
  if (other.size() == 8) groups.push_back(other);
  for (size_t g = 0; g < groups.size(); ++g) {
    AddSplit(plan, 0, groups[g], static_cast<int32_t>(100 + g), 0, absl::StrCat("group", g));
    colors->push_back(static_cast<int32_t>(100 + g));
  }
}

void RunScenario(const Scenario& s) {
  const uint16_t root_port = FreePort();
  BootstrapConfig config;
  config.comm_id = absl::StrCat("127.0.0.1:", root_port);
  config.contributions = s.source;
  config.record_wire_dir = s.record_dir;
  config.follow_real_ranks = s.follow;
  std::vector<uint32_t> real_u(s.real.begin(), s.real.end());
  BootstrapPlan plan = WorldPlan(s.n, 8, real_u);
  std::vector<int32_t> colors;
  if (s.split) AddSplits(plan, s, &colors);
  if (s.follow) {
    for (size_t g = 0; g < colors.size(); ++g) {
      colors[g] = graphgen::PyTorchSplitColor(plan.comms[g + 1].members);
    }
  }
  FakeBroker broker;
  BootstrapService service(config, s.follow ? WorldPlan(s.n, 8, real_u) : plan, &broker);
  REQUIRE(service.Start().ok());
  const std::vector<uint32_t> nodes = Nodes(s.n);
  std::vector<std::string> slice_errors;
  std::mutex mu;
  const auto errors = RunRealRanks(s.real, [&](int rank) {
    FakeRankOptions o;
    o.rank = rank;
    o.nranks = s.n;
    o.comm_id = {0x7f000001, root_port};
    o.host_name = absl::StrCat("real-host-", rank);
    FakeRealRank fake(o);
    fake.Init();
    auto problems = CheckVirtualSlices(fake, s.real, nodes, service.port());
    if (s.ring_connect) {
      fake.RingConnect(2);
      const bool next_virtual = std::find(s.real.begin(), s.real.end(), (rank + 1) % s.n) == s.real.end();
      if (next_virtual && HandleMagic(fake.setup_from_next().data()) != kVirtualHandleMagic) {
        problems.push_back("ring setup reply from next is not a virtual handle");
      }
      for (int r = 0; r < s.n; ++r) {
        if (fake.ring_connect_info()[r].size() != 2) problems.push_back("ring-connect slice size");
      }
    }
    if (s.barrier) fake.Barrier(0xbeef);
    if (s.split) {
      for (size_t g = 0; g < colors.size(); ++g) {
        const auto& members = plan.comms[g + 1].members;
        const auto it = std::find(members.begin(), members.end(), static_cast<uint32_t>(rank));
        const bool member = it != members.end();
        // framework_colors: the real rank passes its own color (as PyTorch
        // does, a hash of the member list), not the plan's.
        const int32_t color = s.framework_colors ? colors[g] * 7919 + 12345 : colors[g];
        auto child = fake.Split(member ? color : -1, member ? static_cast<int32_t>(it - members.begin()) : 0);
        if (member != (child != nullptr)) problems.push_back("split membership");
        if (!child) continue;
        if (child->nranks() != static_cast<int>(members.size())) problems.push_back("child size");
        std::vector<int> child_real;
        std::vector<uint32_t> child_nodes;
        for (size_t i = 0; i < members.size(); ++i) {
          if (std::find(s.real.begin(), s.real.end(), static_cast<int>(members[i])) != s.real.end()) {
            child_real.push_back(static_cast<int>(i));
          }
          child_nodes.push_back(members[i] / 8);
        }
        for (auto& p : CheckVirtualSlices(*child, child_real, child_nodes, service.port())) {
          problems.push_back("child " + std::to_string(g) + ": " + p);
        }
        child->Destroy();
      }
    }
    fake.Destroy();
    std::lock_guard<std::mutex> lock(mu);
    for (auto& p : problems) slice_errors.push_back(absl::StrCat("real ", rank, ": ", p));
  });
  for (const auto& e : errors) UNSCOPED_INFO(e);
  for (const auto& e : slice_errors) UNSCOPED_INFO(e);
  CHECK(errors.empty());
  CHECK(slice_errors.empty());
  REQUIRE(WaitFor([&] { return service.Stats().jobs_completed >= 1; }));
  const BootstrapStats st = service.Stats();
  for (const auto& d : st.recent_divergences) UNSCOPED_INFO(d);
  CHECK(st.divergences == 0);
  CHECK(st.jobs_failed == 0);
  CHECK(st.comms_destroyed == st.comms_initialized);
  if (s.ring_connect) {
    int virtual_next = 0, virtual_prev = 0;
    for (int r : s.real) {
      virtual_next += std::find(s.real.begin(), s.real.end(), (r + 1) % s.n) == s.real.end();
      virtual_prev += std::find(s.real.begin(), s.real.end(), (r - 1 + s.n) % s.n) == s.real.end();
    }
    CHECK(broker.mints() == 2 * virtual_next);
    CHECK(broker.connects() == 2 * virtual_prev);
  }
  service.Stop();
}

TEST_CASE("a test port one process reserved is not handed to another process", "[bootstrap][server][ports]") {
  const uint16_t mine = FreePort();
  REQUIRE(mine != 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Its own open of the lock file: the parent's flock makes it fail.
    _exit(prism::testing::ReserveTestPort(mine) ? 1 : 0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("init with real rank 0 hosting the root", "[bootstrap][server]") {
  for (int n : {2, 3, 8, 64}) {
    SECTION(absl::StrCat("n=", n)) {
      Scenario s;
      s.n = n;
      RunScenario(s);
    }
  }
}

TEST_CASE("init with prismd hosting the root (rank 0 virtual)", "[bootstrap][server]") {
  for (int n : {2, 8, 64}) {
    SECTION(absl::StrCat("n=", n)) {
      Scenario s;
      s.n = n;
      s.real = {n > 5 ? 5 : 1};
      RunScenario(s);
    }
  }
}

TEST_CASE("two real ranks, adjacent and apart, both root modes", "[bootstrap][server]") {
  for (std::vector<int> real : {std::vector<int>{0, 1}, {0, 5}, {3, 4}, {5, 40}}) {
    SECTION(absl::StrCat("real ", real[0], ",", real[1])) {
      Scenario s;
      s.n = 64;
      s.real = real;
      RunScenario(s);
    }
  }
}

TEST_CASE("N=1024 with one real rank, both root modes", "[bootstrap][server][scale]") {
  for (int real : {0, 5}) {
    SECTION(absl::StrCat("real ", real)) {
      Scenario s;
      s.n = 1024;
      s.real = {real};
      RunScenario(s);
    }
  }
}

TEST_CASE("templates only: virtual records do not wait for a real one", "[bootstrap][server]") {
  Scenario s;
  s.n = 16;
  s.source = ContributionSource::kTemplate;
  // Built-in template: totalGlobalMem/channels differ from the fake's, so
  // only the rank-field checks are meaningful here: run without slice checks.
  const uint16_t root_port = FreePort();
  BootstrapConfig config;
  config.comm_id = absl::StrCat("127.0.0.1:", root_port);
  config.contributions = ContributionSource::kTemplate;
  BootstrapService service(config, WorldPlan(16, 8, {0}), nullptr);
  REQUIRE(service.Start().ok());
  FakeRankOptions o;
  o.nranks = 16;
  o.comm_id = {0x7f000001, root_port};
  FakeRealRank fake(o);
  REQUIRE_NOTHROW(fake.Init());
  int32_t mem_gib = 0;
  std::memcpy(&mem_gib, fake.peer_info()[3].data() + 64 + 4, 4);
  uint64_t mem = 0;
  std::memcpy(&mem, fake.peer_info()[3].data() + 64, 8);
  CHECK(mem == (uint64_t{140} << 30));
  int32_t rank = -1;
  std::memcpy(&rank, fake.peer_info()[3].data(), 4);
  CHECK(rank == 3);
  fake.Destroy();
  service.Stop();
}

TEST_CASE("eager ring connect: P2pSetup with the broker and the 2-byte all-gather",
          "[bootstrap][server]") {
  for (std::vector<int> real : {std::vector<int>{0}, {5}, {0, 1}, {1, 6}}) {
    SECTION(absl::StrCat("real ", real[0], real.size() > 1 ? "+" : "")) {
      Scenario s;
      s.n = real.size() > 1 ? 8 : 2 + 6 * (real[0] == 5);
      s.real = real;
      s.ring_connect = true;
      RunScenario(s);
    }
  }
}

TEST_CASE("global barrier (tag 0xbeef)", "[bootstrap][server]") {
  Scenario s;
  s.n = 64;
  s.real = {0, 9};
  s.barrier = true;
  RunScenario(s);
}

TEST_CASE("splits: TP/DP-like groups and a NOCOLOR split", "[bootstrap][server][split]") {
  for (std::vector<int> real : {std::vector<int>{0}, {5}, {0, 5}}) {
    SECTION(absl::StrCat("real ", real[0], real.size() > 1 ? "+5" : "")) {
      Scenario s;
      s.n = 64;
      s.real = real;
      s.split = true;
      s.ring_connect = true;
      RunScenario(s);
    }
  }
}

// A split of N ranks is N-1 ring steps on each link to the real rank; prismd
// knows every virtual slice once armed, so it writes them in one send per
// link, not one per header and slice (at 8192 ranks those 16,382 sends and
// their epoll changes were most of prismd's cost of a split; the wire bytes
// are the same: every wire fixture replays unchanged).
TEST_CASE("splits: prismd writes the known steps of a ring link in one send", "[bootstrap][server][split]") {
  Scenario s;
  s.n = 64;
  s.real = {0};
  s.split = true;
  s.record_dir = absl::StrCat(std::filesystem::temp_directory_path().string(), "/prism-split-sends-", getpid());
  std::filesystem::remove_all(s.record_dir);
  RunScenario(s);
  size_t sends = 0;
  for (const auto& f : std::filesystem::directory_iterator(s.record_dir)) {
    auto events = ReadWireRecording(f.path().string());
    REQUIRE(events.ok());
    for (const WireRecordEvent& e : *events) sends += e.kind == WireRecordEvent::kData && e.from_daemon;
  }
  std::filesystem::remove_all(s.record_dir);
  // Init (root, AG1/AG3 on two links) and 3 splits (each its parent's
  // all-gather, and the member groups' child inits): a few dozen writes in
  // all, where one per header and slice made over 2 x 63 per all-gather.
  INFO(sends << " sends by prismd");
  CHECK(sends < 126);
}

TEST_CASE("splits: virtual members adopt the color a real member passes", "[bootstrap][server][split]") {
  for (std::vector<int> real : {std::vector<int>{0}, {0, 5}}) {
    SECTION(absl::StrCat("real ", real[0], real.size() > 1 ? "+5" : "")) {
      Scenario s;
      s.n = 64;
      s.real = real;
      s.split = true;
      s.framework_colors = true;
      RunScenario(s);
    }
  }
}

TEST_CASE("follow: virtual members join the groups the real ranks split off, no plan needed",
          "[bootstrap][server][split][follow]") {
  for (std::vector<int> real : {std::vector<int>{0}, {5}, {0, 5}, {9, 50}}) {
    SECTION(absl::StrCat("real ", absl::StrJoin(real, "+"))) {
      Scenario s;
      s.n = 64;
      s.real = real;
      s.split = true;
      s.follow = true;
      s.ring_connect = true;
      RunScenario(s);
    }
  }
}

TEST_CASE("follow: a group is the strided or contiguous rank set of its PyTorch color", "[bootstrap][follow]") {
  const std::vector<uint32_t> dp = {3, 11, 19, 27};
  const int32_t color = graphgen::PyTorchSplitColor(dp);
  CHECK(GroupsOfColor(64, 19, 2, color) == std::vector<std::vector<uint32_t>>{dp});
  CHECK(GroupsOfColor(64, 3, 0, color) == std::vector<std::vector<uint32_t>>{dp});
  CHECK(GroupsOfColor(64, 19, 1, color).empty());  // another key: not its position in that group
  const std::vector<uint32_t> tp = {1024, 1025, 1026, 1027, 1028, 1029, 1030, 1031};
  CHECK(GroupsOfColor(8192, 1029, 5, graphgen::PyTorchSplitColor(tp)) == std::vector<std::vector<uint32_t>>{tp});
  std::vector<uint32_t> pp;
  for (uint32_t r = 7; r < 8192; r += 512) pp.push_back(r);
  CHECK(GroupsOfColor(8192, 7 + 512 * 3, 3, graphgen::PyTorchSplitColor(pp)) ==
        std::vector<std::vector<uint32_t>>{pp});
  CHECK(GroupsOfColor(8, 0, 0, graphgen::PyTorchSplitColor({0})) == std::vector<std::vector<uint32_t>>{{0}});
  // Not an arithmetic progression: no group found (prismd refuses the split).
  CHECK(GroupsOfColor(64, 1, 0, graphgen::PyTorchSplitColor({1, 2, 7})).empty());
}

TEST_CASE("follow: a split_group color (the group's lowest rank) names no group", "[bootstrap][follow]") {
  // TorchTitan FSDP2+TP at 1024 ranks, TP 8: DeviceMesh splits the eager world into the tensor-parallel
  // ranges and the strided data-parallel sets with split_group, which colors each by its lowest rank.
  // Many sets start there, so the color does not name one (prismd refuses such a split, naming why).
  const std::vector<uint32_t> tp = {512, 513, 514, 515, 516, 517, 518, 519};
  CHECK(GroupsOfColor(1024, 517, 5, graphgen::SplitGroupColor(tp)).empty());
  std::vector<uint32_t> fsdp;
  for (uint32_t r = 5; r < 1024; r += 8) fsdp.push_back(r);
  CHECK(GroupsOfColor(1024, 5, 0, graphgen::SplitGroupColor(fsdp)).empty());
}

TEST_CASE("a real rank dying mid-init is cleaned up and the next job is served",
          "[bootstrap][server]") {
  const uint16_t root_port = FreePort();
  BootstrapConfig config;
  config.comm_id = absl::StrCat("127.0.0.1:", root_port);
  BootstrapService service(config, WorldPlan(8, 8, {0}), nullptr);
  REQUIRE(service.Start().ok());
  FakeRankOptions o;
  o.nranks = 8;
  o.comm_id = {0x7f000001, root_port};
  o.timeout_ms = 2000;
  {
    // Checks in and connects the ring, then dies before the all-gathers end:
    // a 120-byte ringAllInfo header with a wrong size makes it look like a
    // different protocol, then it closes.
    FakeRealRank dying(o);
    REQUIRE_NOTHROW(dying.Init());
    dying.Crash();
  }
  // Crash after init is a clean destroy: the job completes.
  REQUIRE(WaitFor([&] { return service.Stats().jobs_completed == 1; }));
  o.timeout_ms = 60000;
  FakeRealRank next(o);
  REQUIRE_NOTHROW(next.Init());
  next.Destroy();
  REQUIRE(WaitFor([&] { return service.Stats().jobs_completed == 2; }));
  CHECK(service.Stats().divergences == 0);
  service.Stop();
}

TEST_CASE("a real rank with another NCCL version fails fast instead of hanging",
          "[bootstrap][server]") {
  const uint16_t root_port = FreePort();
  BootstrapConfig config;
  config.comm_id = absl::StrCat("127.0.0.1:", root_port);
  BootstrapService service(config, WorldPlan(8, 8, {0}), nullptr);
  REQUIRE(service.Start().ok());
  FakeRankOptions o;
  o.nranks = 8;
  o.comm_id = {0x7f000001, root_port};
  o.timeout_ms = 5000;
  o.version = 22907;  // a 2.29 peer-info version code in a 2.28-shaped exchange
  FakeRealRank fake(o);
  CHECK_THROWS(fake.Init());  // its sockets are closed: an error, not a wait
  REQUIRE(WaitFor([&] { return service.Stats().jobs_failed == 1; }));
  const BootstrapStats st = service.Stats();
  REQUIRE_FALSE(st.recent_divergences.empty());
  CHECK(st.recent_divergences.back().find("NCCL version code 22907") != std::string::npos);
  service.Stop();
}

TEST_CASE("a 2.29-style root check-in is refused with a fatal socket type, not left waiting",
          "[bootstrap][server]") {
  const uint16_t root_port = FreePort();
  BootstrapConfig config;
  config.comm_id = absl::StrCat("127.0.0.1:", root_port);
  // Rank 0 virtual: prismd hosts the root; rank 1 is the (2.29) real rank.
  BootstrapService service(config, WorldPlan(4, 8, {1}), nullptr);
  REQUIRE(service.Start().ok());
  // The real rank's root listener, where NCCL waits for its delivery.
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in la{};
  la.sin_family = AF_INET;
  la.sin_addr.s_addr = htonl(0x7f000001);
  REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&la), sizeof(la)) == 0);
  REQUIRE(listen(listener, 4) == 0);
  socklen_t len = sizeof(la);
  getsockname(listener, reinterpret_cast<sockaddr*>(&la), &len);
  // Check in as 2.29 does: 176-byte extInfo, listenRootAddress at offset 20.
  const int c = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in root{};
  root.sin_family = AF_INET;
  root.sin_port = htons(root_port);
  root.sin_addr.s_addr = htonl(0x7f000001);
  REQUIRE(connect(c, reinterpret_cast<sockaddr*>(&root), sizeof(root)) == 0);
  std::string msg(12 + 4 + 176, '\0');
  const uint64_t magic = 0x0280028002800280ull;
  const int32_t type = 1, size = 176, rank = 1, nranks = 4;
  std::memcpy(msg.data(), &magic, 8);
  std::memcpy(msg.data() + 8, &type, 4);
  std::memcpy(msg.data() + 12, &size, 4);
  std::memcpy(msg.data() + 16, &rank, 4);
  std::memcpy(msg.data() + 20, &nranks, 4);
  std::memcpy(msg.data() + 16 + 20, &la, sizeof(la));  // sockaddr_in layout = ncclSocketAddress's start
  REQUIRE(write(c, msg.data(), msg.size()) == static_cast<ssize_t>(msg.size()));
  close(c);
  pollfd pfd{listener, POLLIN, 0};
  REQUIRE(poll(&pfd, 1, 5000) == 1);  // prismd answers at once
  const int a = accept(listener, nullptr, nullptr);
  REQUIRE(a >= 0);
  char header[12];
  size_t got = 0;
  while (got < sizeof(header)) {
    const ssize_t n = read(a, header + got, sizeof(header) - got);
    REQUIRE(n > 0);
    got += static_cast<size_t>(n);
  }
  uint64_t got_magic;
  int32_t got_type;
  std::memcpy(&got_magic, header, 8);
  std::memcpy(&got_type, header + 8, 4);
  CHECK(got_magic == magic);   // NCCL reads the magic first: it must match ...
  CHECK(got_type != 1);        // ... then a type other than bootstrap is fatal for it
  close(a);
  close(listener);
  const BootstrapStats st = service.Stats();
  REQUIRE_FALSE(st.recent_divergences.empty());
  CHECK(st.recent_divergences.back().find("runs NCCL 2.29") != std::string::npos);
  service.Stop();
}

TEST_CASE("unexpected all-gather size from a real rank is diagnosed, job reset",
          "[bootstrap][server]") {
  const uint16_t root_port = FreePort();
  BootstrapConfig config;
  config.comm_id = absl::StrCat("127.0.0.1:", root_port);
  BootstrapService service(config, WorldPlan(4, 8, {0}), nullptr);
  REQUIRE(service.Start().ok());
  FakeRankOptions o;
  o.nranks = 4;
  o.comm_id = {0x7f000001, root_port};
  o.timeout_ms = 3000;
  FakeRealRank fake(o);
  REQUIRE_NOTHROW(fake.Init());
  // A 16-byte all-gather nobody planned (e.g. a window-registration AG).
  CHECK_THROWS(fake.AllGather(Bytes(16, 7)));
  REQUIRE(WaitFor([&] { return service.Stats().jobs_failed == 1; }));
  const BootstrapStats st = service.Stats();
  CHECK(st.divergences >= 1);
  REQUIRE_FALSE(st.recent_divergences.empty());
  CHECK(st.recent_divergences.back().find("16-byte") != std::string::npos);
  fake.Destroy();
  service.Stop();
}

TEST_CASE("unsupported NCCL version is refused at start", "[bootstrap][server]") {
  BootstrapConfig config;
  config.comm_id = "127.0.0.1:1";
  config.nccl_version = 22203;  // a partial profile
  BootstrapService service(config, WorldPlan(8, 8, {0}), nullptr);
  const absl::Status s = service.Start();
  CHECK(absl::IsUnimplemented(s));
  CHECK(std::string(s.message()).find("2.22.3") != std::string::npos);
}

}  // namespace
}  // namespace prism::bootstrap::testing
