#include "daemon/bootstrap/wire_recorder.h"

#include <unistd.h>

#include <ctime>
#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace prism::bootstrap {

absl::StatusOr<std::unique_ptr<WireRecorder>> WireRecorder::Open(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--record-wire: cannot create directory '", dir, "': ", ec.message()));
  }
  std::unique_ptr<WireRecorder> r(new WireRecorder());
  r->path_ = absl::StrCat(dir, "/wire-", static_cast<int64_t>(std::time(nullptr)), "-", getpid(),
                          ".jsonl");
  r->out_.open(r->path_, std::ios::out | std::ios::trunc);
  if (!r->out_) {
    return absl::InvalidArgumentError(absl::StrCat("--record-wire: cannot write '", r->path_, "'"));
  }
  return r;
}

int64_t WireRecorder::Now() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              start_).count();
}

void WireRecorder::Opened(uint64_t conn, bool daemon_connected, const Ipv4Endpoint& local,
                          const Ipv4Endpoint& remote, const std::string& note) {
  nlohmann::json j = {{"t_ns", Now()},           {"conn", conn},
                      {"ev", "open"},            {"dir", daemon_connected ? "out" : "in"},
                      {"local", ToString(local)}, {"remote", ToString(remote)},
                      {"note", note}};
  out_ << j.dump() << '\n';
  out_.flush();
}

void WireRecorder::Data(uint64_t conn, bool from_real, const char* data, size_t size) {
  nlohmann::json j = {{"t_ns", Now()},
                      {"conn", conn},
                      {"ev", "data"},
                      {"dir", from_real ? "in" : "out"},
                      {"hex", absl::BytesToHexString(std::string(data, size))}};
  out_ << j.dump() << '\n';
  out_.flush();
}

void WireRecorder::Closed(uint64_t conn) {
  nlohmann::json j = {{"t_ns", Now()}, {"conn", conn}, {"ev", "close"}};
  out_ << j.dump() << '\n';
  out_.flush();
}

}  // namespace prism::bootstrap
