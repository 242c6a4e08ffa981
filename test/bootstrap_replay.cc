#include "test/bootstrap_replay.h"

#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace prism::bootstrap::testing {

absl::StatusOr<std::vector<WireEvent>> ReadRecording(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::vector<WireEvent> out;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("ev") || !j.contains("conn")) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": not a wire event"));
    }
    WireEvent e;
    e.t_ns = j.value("t_ns", int64_t{0});
    e.conn = j["conn"].get<uint64_t>();
    const std::string ev = j["ev"].get<std::string>();
    if (ev == "open") {
      e.kind = WireEvent::kOpen;
      e.daemon_side = j.value("dir", "") == "out";
      auto l = ParseHostPort(j.value("local", ""));
      auto r = ParseHostPort(j.value("remote", ""));
      if (l.ok()) e.local = *l;
      if (r.ok()) e.remote = *r;
      e.note = j.value("note", "");
    } else if (ev == "data") {
      e.kind = WireEvent::kData;
      e.daemon_side = j.value("dir", "") == "out";
      e.bytes = absl::HexStringToBytes(j.value("hex", ""));
    } else if (ev == "close") {
      e.kind = WireEvent::kClose;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": unknown event ", ev));
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace prism::bootstrap::testing
