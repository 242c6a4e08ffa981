// prismd without --wire-profile: the bootstrap learns the real ranks' NCCL
// from the first announcement (SetNcclVersion), holds what needs the wire
// profile until then, and refuses a real rank's bootstrap that comes first.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/bootstrap_service.h"
#include "test/bootstrap_fake_rank.h"
#include "test/bootstrap_test_util.h"

namespace prism::bootstrap::testing {
namespace {

bool Eventually(const std::function<bool()>& pred) {
  for (int i = 0; i < 500; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// One fake 2.28.9 rank `rank` of `n` through init and destroy, with NCCL_COMM_ID
// at `root_port`; empty when it finished.
std::string InitAndDestroy(int rank, int n, uint16_t root_port) {
  const auto errors = RunRealRanks({rank}, [&](int r) {
    FakeRankOptions o;
    o.rank = r;
    o.nranks = n;
    o.comm_id = {0x7f000001, root_port};
    o.timeout_ms = 10000;
    FakeRealRank fake(o);
    fake.Init();
    fake.Destroy();
  });
  return errors.empty() ? "" : errors.front();
}

TEST_CASE("without a wire profile the bootstrap learns the first rank's NCCL, then serves the job",
          "[bootstrap][server][version]") {
  for (int real : {0, 5}) {  // real root, and prismd hosting the root at NCCL_COMM_ID
    SECTION(absl::StrCat("real rank ", real)) {
      const uint16_t root_port = FreePort();
      BootstrapConfig config;
      config.comm_id = absl::StrCat("127.0.0.1:", root_port);
      config.nccl_version = 0;
      BootstrapService service(config, WorldPlan(8, 8, {static_cast<uint32_t>(real)}), nullptr);
      REQUIRE(service.Start().ok());
      CHECK(service.Stats().nccl_version == 0);
      // A release prismd cannot play is refused and chooses nothing.
      const absl::Status partial = service.SetNcclVersion(22203);
      CHECK(absl::IsUnimplemented(partial));
      CHECK(std::string(partial.message()).find("2.28.9") != std::string::npos);
      CHECK(absl::IsInvalidArgument(service.SetNcclVersion(21903)));
      CHECK(service.Stats().nccl_version == 0);
      REQUIRE(service.SetNcclVersion(22809).ok());
      CHECK(service.SetNcclVersion(22809).ok());  // the same again
      const absl::Status other = service.SetNcclVersion(23007);
      CHECK(absl::IsFailedPrecondition(other));
      CHECK(std::string(other.message()).find("2.28.9") != std::string::npos);
      CHECK(service.Stats().nccl_version == 22809);
      CHECK(InitAndDestroy(real, 8, root_port) == "");
      REQUIRE(Eventually([&] { return service.Stats().jobs_completed >= 1; }));
      CHECK(service.Stats().divergences == 0);
      service.Stop();
    }
  }
}

TEST_CASE("a real rank's bootstrap before any rank said its NCCL is refused, not left waiting",
          "[bootstrap][server][version]") {
  const uint16_t root_port = FreePort();
  BootstrapConfig config;
  config.comm_id = absl::StrCat("127.0.0.1:", root_port);
  config.nccl_version = 0;
  BootstrapService service(config, WorldPlan(8, 8, {5}), nullptr);  // prismd hosts the root
  REQUIRE(service.Start().ok());
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(root_port);
  a.sin_addr.s_addr = htonl(0x7f000001);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  const uint64_t magic = 0x0280028002800280ull;  // NCCL_COMM_ID's
  const int32_t type = 1;
  char header[12];
  std::memcpy(header, &magic, 8);
  std::memcpy(header + 8, &type, 4);
  REQUIRE(write(fd, header, sizeof(header)) == sizeof(header));
  char byte;
  CHECK(read(fd, &byte, 1) == 0);  // closed by prismd, at once
  close(fd);
  CHECK(service.Stats().rejected_connections >= 1);
  // Once a rank announces its NCCL, the job runs.
  REQUIRE(service.SetNcclVersion(22809).ok());
  CHECK(InitAndDestroy(5, 8, root_port) == "");
  service.Stop();
}

TEST_CASE("ids handed out before the NCCL version is known are served once it is", "[bootstrap][server][version]") {
  BootstrapConfig config;  // ids from PyTorch's store
  config.nccl_version = 0;
  config.stall_report_ms = 100;
  BootstrapService service(config, WorldPlan(8, 8, {5}), nullptr);
  REQUIRE(service.Start().ok());
  CommRequest world;
  world.plan_id = 0;
  world.key = "store-key-world";
  auto id = service.HostRoot(world);  // prismd plays comm rank 0: it mints the id now
  REQUIRE(id.ok());
  auto again = service.HostRoot(world);  // a second waiter gets the same id
  REQUIRE(again.ok());
  CHECK(*again == *id);
  // Nobody has announced a version: reported, never a silent wait.
  REQUIRE(Eventually([&] { return !service.Stats().waiting.empty(); }));
  CHECK(service.Stats().waiting.front().waits_for.find("NCCL_NET_PLUGIN=prism") != std::string::npos);
  REQUIRE(service.SetNcclVersion(22809).ok());
  auto after = service.HostRoot(world);
  REQUIRE(after.ok());
  CHECK(*after == *id);
  const auto errors = RunRealRanks({5}, [&](int r) {
    FakeRankOptions o;
    o.rank = r;
    o.nranks = 8;
    o.id = *id;
    o.timeout_ms = 10000;
    FakeRealRank fake(o);
    fake.Init();
    fake.Destroy();
  });
  for (const auto& e : errors) UNSCOPED_INFO(e);
  CHECK(errors.empty());
  REQUIRE(Eventually([&] { return service.Stats().jobs_completed >= 1; }));
  CHECK(service.Stats().divergences == 0);
  service.Stop();
}

}  // namespace
}  // namespace prism::bootstrap::testing
