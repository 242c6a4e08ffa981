#include "daemon/hybrid/session_recorder.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace prism::daemon {
namespace {

constexpr const char* kFormat = "prism-session-recording/1";

template <typename Msg>
std::string Encode(const Msg& m) {
  std::string bytes;
  m.SerializeToString(&bytes);
  return absl::Base64Escape(bytes);
}

template <typename Msg>
bool Decode(const std::string& text, Msg* m) {
  std::string bytes;
  return absl::Base64Unescape(text, &bytes) && m->ParseFromString(bytes);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SessionRecorder>> SessionRecorder::Open(const std::string& path,
                                                                       int64_t start_realtime_ns,
                                                                       int64_t lookahead_ns,
                                                                       const std::vector<uint32_t>& real_ranks,
                                                                       const std::string& graph_name,
                                                                       uint64_t iterations) {
  // O_NOFOLLOW: a symlink planted at `path` (a shared directory) is refused, not written through.
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  std::FILE* f = fd < 0 ? nullptr : fdopen(fd, "w");
  if (fd >= 0 && f == nullptr) close(fd);
  if (f == nullptr)
    return absl::InvalidArgumentError(
        absl::StrCat("--record-sessions ", path, ": cannot create it: ", std::strerror(errno)));
  std::unique_ptr<SessionRecorder> r(new SessionRecorder(f));
  nlohmann::ordered_json h;
  h["format"] = kFormat;
  h["start_realtime_ns"] = start_realtime_ns;
  h["lookahead_ns"] = lookahead_ns;
  h["real_ranks"] = real_ranks;
  h["graph"] = graph_name;
  if (iterations > 0) h["iterations"] = iterations;
  r->Line(h.dump());
  return r;
}

SessionRecorder::~SessionRecorder() {
  if (file_ != nullptr) std::fclose(file_);
}

void SessionRecorder::Line(const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  if (std::fputs(text.c_str(), file_) < 0 || std::fputc('\n', file_) == EOF || std::fflush(file_) != 0)
    write_failed_ = true;
}

bool SessionRecorder::ok() {
  std::lock_guard<std::mutex> lock(mu_);
  return !write_failed_;
}

void SessionRecorder::Communicator(int64_t at, const CommDescription& c) {
  nlohmann::ordered_json j;
  j["at"] = at;
  j["comm"] = {{"hash", c.comm_hash}, {"graph_comm", c.graph_comm}, {"name", c.name}, {"members", c.members}};
  Line(j.dump());
}

void SessionRecorder::Events(int64_t at, uint64_t session, const rpc::EventBatch& batch) {
  nlohmann::ordered_json j;
  j["at"] = at;
  j["session"] = session;
  j["events"] = Encode(batch);
  Line(j.dump());
}

void SessionRecorder::Schedule(int64_t at, uint64_t session, const rpc::OpSchedule& s) {
  nlohmann::ordered_json j;
  j["at"] = at;
  j["session"] = session;
  j["schedule"] = Encode(s);
  Line(j.dump());
}

absl::StatusOr<Recording> ReadRecording(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the recording"));
  Recording rec;
  std::string text;
  int line = 0;
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", why));
  };
  while (std::getline(in, text)) {
    ++line;
    if (text.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
    if (line == 1) {
      if (j.value("format", "") != kFormat) return bad(absl::StrCat("not a ", kFormat, " recording"));
      rec.start_realtime_ns = j.value("start_realtime_ns", int64_t{0});
      rec.lookahead_ns = j.value("lookahead_ns", int64_t{0});
      rec.real_ranks = j.value("real_ranks", std::vector<uint32_t>{});
      rec.graph = j.value("graph", "");
      rec.iterations = j.value("iterations", uint64_t{0});
      continue;
    }
    RecordedLine r;
    r.at = j.value("at", int64_t{0});
    r.session = j.value("session", uint64_t{0});
    if (j.contains("comm")) {
      r.kind = RecordedLine::kCommunicator;
      const auto& c = j["comm"];
      r.comm.comm_hash = c.value("hash", uint64_t{0});
      r.comm.graph_comm = c.value("graph_comm", int64_t{-1});
      r.comm.name = c.value("name", "");
      r.comm.members = c.value("members", std::vector<uint32_t>{});
    } else if (j.contains("events")) {
      r.kind = RecordedLine::kEvents;
      if (!Decode(j["events"].get<std::string>(), &r.events)) return bad("events do not decode");
    } else if (j.contains("schedule")) {
      r.kind = RecordedLine::kSchedule;
      if (!Decode(j["schedule"].get<std::string>(), &r.schedule)) return bad("schedule does not decode");
    } else {
      return bad("unknown line kind");
    }
    rec.lines.push_back(std::move(r));
  }
  if (line == 0) return absl::InvalidArgumentError(absl::StrCat(path, ": empty recording"));
  return rec;
}

absl::Status WriteRecording(const std::string& path, const Recording& rec) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec))
    return absl::AlreadyExistsError(absl::StrCat(path, ": already exists; name a new file"));
  auto out = SessionRecorder::Open(path, rec.start_realtime_ns, rec.lookahead_ns, rec.real_ranks, rec.graph,
                                   rec.iterations);
  if (!out.ok()) return out.status();
  for (const RecordedLine& l : rec.lines) {
    if (l.kind == RecordedLine::kCommunicator) (*out)->Communicator(l.at, l.comm);
    if (l.kind == RecordedLine::kEvents) (*out)->Events(l.at, l.session, l.events);
    if (l.kind == RecordedLine::kSchedule) (*out)->Schedule(l.at, l.session, l.schedule);
  }
  if (!(*out)->ok()) return absl::InternalError(absl::StrCat(path, ": could not write every line (disk full?)"));
  return absl::OkStatus();
}

}  // namespace prism::daemon
