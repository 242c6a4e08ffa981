#include "plugin/op_times.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>


namespace prism::plugin {
namespace {

const char* KindName(OpKind kind) {
  switch (kind) {
    case OpKind::kAllReduce: return "allreduce";
    case OpKind::kAllGather: return "allgather";
    case OpKind::kReduceScatter: return "reducescatter";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kReduce: return "reduce";
    case OpKind::kAllToAll: return "alltoall";
    case OpKind::kSend: return "send";
    case OpKind::kRecv: return "recv";
    case OpKind::kOtherCollective: return "other";
    case OpKind::kUnknown: break;
  }
  return "unknown";
}

// NCCL's algorithm and protocol names ("RING", "SIMPLE"), kept to the
// characters a JSON string needs no escape for.
std::string PlainName(const std::string& name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '?';
  return out;
}

std::string StampOrNull(uint64_t ns) { return ns == 0 ? "null" : std::to_string(ns); }

}  // namespace

std::string OpTimesLine(const OpInfo& info, const KernelSpan& span, int pid) {
  char head[512];
  std::snprintf(head, sizeof(head),
                "{\"pid\":%d,\"comm\":\"0x%016" PRIx64 "\",\"rank\":%d,\"nranks\":%d,\"op\":%" PRIu64
                ",\"kind\":\"%s\",\"seq\":%" PRIu64 ",\"peer\":%d,\"root\":%d,\"bytes\":%" PRIu64
                ",\"algo\":\"%s\",\"proto\":\"%s\",\"channels\":%d,\"enqueued_wall_ns\":%" PRId64,
                pid, info.comm_hash, info.comm_rank, info.comm_size, info.id, KindName(info.kind), info.seq,
                info.peer, info.root, info.bytes, PlainName(info.algo_name).c_str(),
                PlainName(info.proto_name).c_str(), int{info.channels}, info.enqueued_ns);
  return std::string(head) + ",\"kernel_start_ns\":" + StampOrNull(span.first_start_ns) +
         ",\"kernel_stop_ns\":" + StampOrNull(span.last_stop_ns) +
         ",\"kernel_channels\":" + std::to_string(span.channels_stopped) +
         ",\"complete\":" + (span.complete ? "true" : "false") + "}\n";
}

OpTimesLog::OpTimesLog(std::string directory, Logger* logger)
    : directory_(std::move(directory)), logger_(logger) {}

OpTimesLog::~OpTimesLog() {
  if (fd_ >= 0) ::close(fd_);
}

std::string OpTimesLog::path() const {
  return directory_ + "/prism-ops." + std::to_string(::getpid()) + ".jsonl";
}

uint64_t OpTimesLog::lines_written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lines_;
}

bool OpTimesLog::OpenLocked() {
  if (fd_ >= 0) return true;
  if (failed_) return false;
  (void)::mkdir(directory_.c_str(), 0755);  // one level; any failure shows in the open below
  const std::string file = path();
  fd_ = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ >= 0) return true;
  failed_ = true;
  const std::string why = "PRISM_OP_TIMES: cannot write " + file + ": " + std::strerror(errno) +
                          "; operation times are not kept (point PRISM_OP_TIMES at a writable directory)";
  if (logger_ != nullptr) PRISM_WARN(*logger_, "%s", why.c_str());
  std::fprintf(stderr, "NET/Prism: pid %d: %s\n", static_cast<int>(::getpid()), why.c_str());
  return false;
}

void OpTimesLog::Append(const OpInfo& info, const KernelSpan& span) {
  const std::string line = OpTimesLine(info, span, static_cast<int>(::getpid()));
  std::lock_guard<std::mutex> lock(mu_);
  if (!OpenLocked()) return;
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failed_ = true;
      const std::string why = "PRISM_OP_TIMES: writing " + path() + " failed: " + std::strerror(errno) +
                              "; later operation times are not kept";
      if (logger_ != nullptr) PRISM_WARN(*logger_, "%s", why.c_str());
      std::fprintf(stderr, "NET/Prism: pid %d: %s\n", static_cast<int>(::getpid()), why.c_str());
      ::close(fd_);
      fd_ = -1;
      return;
    }
    done += static_cast<size_t>(n);
  }
  ++lines_;
}

}  // namespace prism::plugin
