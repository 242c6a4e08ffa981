// Recording and manifest reading for the wire replayer (the replay loop is in
// wire_replay_loop.cc).
#include "daemon/bootstrap/replay/wire_replay.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "proto/graph.pb.h"
#include "proto/graph_file.h"

namespace prism::bootstrap {
namespace {

namespace fs = std::filesystem;

// Whole file, gunzipped when it is gzip (zlib reads plain files as they are).
absl::StatusOr<std::string> ReadMaybeGzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  const bool failed = n < 0;
  gzclose(f);
  if (failed) return absl::InvalidArgumentError(absl::StrCat("'", path, "' is corrupt gzip"));
  return out;
}

absl::StatusOr<WireRecordEvent> ParseEventLine(const std::string& line) {
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ev") || !j.contains("conn") ||
      !j["conn"].is_number_unsigned() || !j["ev"].is_string()) {
    return absl::InvalidArgumentError("not a wire event (JSON object with conn and ev)");
  }
  WireRecordEvent e;
  e.t_ns = j.value("t_ns", int64_t{0});
  e.conn = j["conn"].get<uint64_t>();
  const std::string ev = j["ev"].get<std::string>();
  const std::string dir = j.value("dir", "");
  if (ev == "open") {
    e.kind = WireRecordEvent::kOpen;
    if (dir != "in" && dir != "out") return absl::InvalidArgumentError("open without dir in/out");
    e.from_daemon = dir == "out";
    auto l = ParseHostPort(j.value("local", ""));
    auto r = ParseHostPort(j.value("remote", ""));
    if (!l.ok() || !r.ok()) return absl::InvalidArgumentError("open without local/remote ip:port");
    e.local = *l;
    e.remote = *r;
    e.note = j.value("note", "");
  } else if (ev == "data") {
    e.kind = WireRecordEvent::kData;
    if (dir != "in" && dir != "out") return absl::InvalidArgumentError("data without dir in/out");
    e.from_daemon = dir == "out";
    const std::string hex = j.value("hex", "");
    if (hex.size() % 2 != 0 ||
        !std::all_of(hex.begin(), hex.end(), [](char c) { return std::isxdigit(c) != 0; })) {
      return absl::InvalidArgumentError("data with a bad hex string");
    }
    e.bytes = absl::HexStringToBytes(hex);
  } else if (ev == "close") {
    e.kind = WireRecordEvent::kClose;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown event '", ev, "'"));
  }
  return e;
}

absl::StatusOr<BootstrapPlan> PlanFromManifest(const nlohmann::json& j, const std::string& dir,
                                               const std::vector<uint32_t>& real) {
  if (j.contains("graph")) {
    const std::string path = (fs::path(dir) / j["graph"].get<std::string>()).string();
    auto graph = prism::graph::ReadGraphFile(path);
    if (!graph.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("manifest graph: ", std::string(graph.status().message())));
    }
    return PlanFromGraph(*graph, real);
  }
  if (!j.contains("plan") || !j["plan"].is_object()) {
    return absl::InvalidArgumentError("manifest needs \"plan\" {world_size, ...} or \"graph\"");
  }
  const auto& p = j["plan"];
  BootstrapPlan plan = WorldPlan(p.value("world_size", 0u), p.value("gpus_per_node", 8u), real);
  for (const auto& s : p.value("splits", nlohmann::json::array())) {
    AddSplit(plan, s.value("parent", 0u), s.value("members", std::vector<uint32_t>{}),
             s.value("color", 0), s.value("key0", 0), s.value("name", std::string("split")));
  }
  absl::Status v = ValidatePlan(plan);
  if (!v.ok()) return v;
  return plan;
}

}  // namespace

VirtualHandle ReplayBroker::MintReceiveHandle(const daemon::VirtualLinkInfo& link) {
  VirtualHandle h;
  h.conn_id = next_conn_++;
  h.virtual_rank = link.virtual_rank;
  return h;
}

absl::Status ReplayBroker::ConnectToRealListener(const RealListenHandle&,
                                                 const daemon::VirtualLinkInfo&) {
  return absl::OkStatus();
}

absl::StatusOr<std::vector<WireRecordEvent>> ReadWireRecording(const std::string& path) {
  auto text = ReadMaybeGzip(path);
  if (!text.ok()) return text.status();
  std::vector<WireRecordEvent> out;
  size_t pos = 0;
  int line_no = 0;
  while (pos < text->size()) {
    size_t nl = text->find('\n', pos);
    if (nl == std::string::npos) nl = text->size();
    const std::string line = text->substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (line.empty()) continue;
    auto e = ParseEventLine(line);
    if (!e.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_no, ": ", std::string(e.status().message())));
    }
    e->line = line_no;
    out.push_back(std::move(*e));
  }
  return out;
}

absl::StatusOr<WireManifest> ReadWireManifest(const std::string& fixture_dir) {
  const std::string path = (fs::path(fixture_dir) / "manifest.json").string();
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no manifest.json in '", fixture_dir, "'"));
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  try {
    WireManifest m;
    m.name = j.value("name", fs::path(fixture_dir).filename().string());
    m.recording = j.value("recording", std::string("wire.jsonl"));
    m.nccl_version = j.value("nccl_version", 22809);
    m.nccl_comm_id = j.value("nccl_comm_id", std::string());
    if (!ParseHostPort(m.nccl_comm_id).ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": \"nccl_comm_id\" must be the recorded NCCL_COMM_ID ip:port"));
    }
    const auto real = j.value("real_ranks", std::vector<uint32_t>{});
    if (real.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no \"real_ranks\""));
    auto plan = PlanFromManifest(j, fixture_dir, real);
    if (!plan.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", std::string(plan.status().message())));
    }
    m.plan = std::move(*plan);
    const auto env = j.value("env", nlohmann::json::object());
    m.env.runtime_connect = env.value("runtime_connect", true);
    m.env.register_ag = env.value("register_ag", true);
    const std::string mode = j.value("address_mode", std::string("loopback_aliases"));
    if (mode != "loopback_aliases" && mode != "port_per_endpoint") {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": address_mode must be loopback_aliases or port_per_endpoint"));
    }
    m.address_mode = mode == "loopback_aliases" ? AddressMode::kLoopbackAliases
                                                : AddressMode::kPortPerEndpoint;
    const std::string src = j.value("contributions", std::string("first_real_record"));
    if (src != "first_real_record" && src != "template") {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": contributions must be first_real_record or template"));
    }
    m.contributions = src == "template" ? ContributionSource::kTemplate
                                        : ContributionSource::kFirstRealRecord;
    m.expect_job_complete = j.value("expect_job_complete", true);
    return m;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": wrong field type: ", e.what()));
  }
}

absl::StatusOr<ReplayReport> ReplayFixture(const std::string& fixture_dir,
                                           const ReplayOptions& options) {
  auto manifest = ReadWireManifest(fixture_dir);
  if (!manifest.ok()) return manifest.status();
  auto events = ReadWireRecording((fs::path(fixture_dir) / manifest->recording).string());
  if (!events.ok()) return events.status();
  return ReplayRecording(*events, *manifest, options);
}

std::vector<std::string> ListWireFixtures(const std::string& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(root, ec)) {
    if (d.is_directory() && fs::exists(d.path() / "manifest.json")) out.push_back(d.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace prism::bootstrap
