// NCCL hash, unique id and wire-profile selection against measured vectors
// (measured against a real NCCL 2.28.9 rank; docs/bootstrap.md).
#include <catch2/catch.hpp>

#include "absl/strings/escaping.h"
#include "daemon/bootstrap/nccl_ids.h"
#include "daemon/bootstrap/wire_profile.h"

namespace prism::bootstrap {
namespace {

UniqueId IdFromHex(const std::string& hex40) {
  const std::string bytes = absl::HexStringToBytes(hex40);
  UniqueId id{};
  std::copy(bytes.begin(), bytes.end(), id.begin());
  return id;
}

TEST_CASE("commHash of ids measured on a real NCCL 2.28.9 rank", "[bootstrap][ids]") {
  // uid / commId pairs printed by the probe and by NCCL's INFO log.
  CHECK(CommHashOfId(IdFromHex("94607b77060119fc0200c6f17f000001"), CommHashScheme::kAccumulator) == 0xd3d7b1cd935fcdd9ull);
  CHECK(CommHashOfId(IdFromHex("fbb04f03a1cb24590200ec597f000001"), CommHashScheme::kAccumulator) == 0xf3bb7730376c7263ull);
  CHECK(CommHashOfId(IdFromHex("aba8d70d595c48490200ad877f000001"), CommHashScheme::kAccumulator) == 0xa53da5b83036f73eull);
  CHECK(CommHashOfId(IdFromHex("8002800280028002020074517f000001"), CommHashScheme::kAccumulator) == 0x6fe6fdec4455c931ull);
}

TEST_CASE("child commHash of a split (measured via the real child's hostHash)", "[bootstrap][ids]") {
  CHECK(ChildCommHash(0xd3d7b1cd935fcdd9ull, 1, 0, CommHashScheme::kAccumulator) == 0x6a11c45d44f66dbeull);
  CHECK(ChildCommHash(0xd3d7b1cd935fcdd9ull, 2, 0, CommHashScheme::kAccumulator) != 0x6a11c45d44f66dbeull);
}

TEST_CASE("commHash of NCCL 2.23-2.25 (DJB2a) measured on real ranks", "[bootstrap][ids]") {
  // NCCL_COMM_ID=127.0.0.1:29711 (NCCL logged its id digest 0xec37fd62dfea21ca);
  // the real ranks' listeners refused prismd's 2.26+ child magic and named
  // their own: 2.24.3 and 2.25.1 0x9f656c5352c2b98e, 2.23.4 0x5f8ee971ccf56932
  // (ncclCommSplit splitCount 1 color 1266629538).
  auto ep = ParseHostPort("127.0.0.1:29711");
  REQUIRE(ep.ok());
  const uint64_t world = CommHashOfId(UniqueIdForCommId(*ep), CommHashScheme::kDjb2aCountColor);
  CHECK(world == 0xb5ea249cf0cc4da2ull);
  CHECK(CommHashOfId(UniqueIdForCommId(*ep), CommHashScheme::kDjb2aColor) == world);
  CHECK(ChildCommHash(world, 1, 1266629538, CommHashScheme::kDjb2aCountColor) == 0x9f656c5352c2b98eull);
  CHECK(ChildCommHash(world, 1, 1266629538, CommHashScheme::kDjb2aColor) == 0x5f8ee971ccf56932ull);
  CHECK(ChildCommHash(world, 1, 1266629538, CommHashScheme::kAccumulator) != 0x9f656c5352c2b98eull);
}

TEST_CASE("separate feeds differ from one feed of the concatenation", "[bootstrap][ids]") {
  const uint64_t parent = 0x1234;
  const int32_t a = 1, b = 0;
  uint8_t cat[16];
  std::memcpy(cat, &parent, 8);
  std::memcpy(cat + 8, &a, 4);
  std::memcpy(cat + 12, &b, 4);
  CHECK(NcclHash(cat, 16) != ChildCommHash(parent, a, b, CommHashScheme::kAccumulator));
}

TEST_CASE("unique id for NCCL_COMM_ID is byte-identical to NCCL's", "[bootstrap][ids]") {
  auto ep = ParseHostPort("127.0.0.1:29555");
  REQUIRE(ep.ok());
  const UniqueId id = UniqueIdForCommId(*ep);
  const uint8_t expect[16] = {0x80, 0x02, 0x80, 0x02, 0x80, 0x02, 0x80, 0x02,
                              0x02, 0x00, 0x73, 0x73, 0x7f, 0x00, 0x00, 0x01};
  CHECK(std::equal(expect, expect + 16, id.begin()));
  CHECK(IsAllZero(id.data() + 16, 112));
  // The T4 id (port 29777) hashes to the commId NCCL logged.
  auto ep2 = ParseHostPort("127.0.0.1:29777");
  REQUIRE(ep2.ok());
  CHECK(CommHashOfId(UniqueIdForCommId(*ep2), CommHashScheme::kAccumulator) == 0x6fe6fdec4455c931ull);
  CHECK(UniqueIdMagic(id) == kNcclMagic);
  auto root = UniqueIdRoot(id);
  REQUIRE(root.ok());
  CHECK(*root == *ep);
}

TEST_CASE("bad NCCL_COMM_ID values are refused with a message", "[bootstrap][ids]") {
  CHECK_FALSE(ParseHostPort("127.0.0.1").ok());
  CHECK_FALSE(ParseHostPort("127.0.0.1:0").ok());
  CHECK_FALSE(ParseHostPort("127.0.0.1:70000").ok());
  CHECK_FALSE(ParseHostPort("no-such-host.invalid:1234").ok());
}

TEST_CASE("wire profiles: served releases complete, others refused clearly", "[bootstrap][profile]") {
  auto p = SelectWireProfile(22809);
  REQUIRE(p.ok());
  CHECK((*p)->ext_info_size == 172);
  CHECK((*p)->peer_info.size == 120);
  CHECK((*p)->topo_info.size == 2292);
  CHECK((*p)->topo_info.topo_ranks + (*p)->topo_info.nvls_head_num + 4 == 2280);
  CHECK((*p)->ring_record_size == 120);
  CHECK((*p)->allgather == AllGatherAlgorithm::kDoubleRing);
  for (int verified : {22304, 22403, 22501, 22606, 22707, 22907, 23007}) {  // served real ranks of those releases
    auto v = SelectWireProfile(verified);
    REQUIRE(v.ok());
    CHECK((*v)->version_code == verified);
  }
  for (int partial : {22105, 22203}) {
    auto s = SelectWireProfile(partial);
    REQUIRE_FALSE(s.ok());
    CHECK(absl::IsUnimplemented(s.status()));
    CHECK(std::string(s.status().message()).find("not yet supported") != std::string::npos);
    CHECK(std::string(s.status().message()).find("2.28.9") != std::string::npos);
  }
  auto unknown = SelectWireProfile(21903);
  REQUIRE_FALSE(unknown.ok());
  CHECK(absl::IsInvalidArgument(unknown.status()));
  CHECK(std::string(unknown.status().message()).find("2.19.3") != std::string::npos);
  CHECK(VersionCodeName(22809) == "2.28.9");
}

}  // namespace
}  // namespace prism::bootstrap
