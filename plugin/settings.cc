#include "plugin/settings.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/daemon_address.h"
#include "plugin/daemon_owner.h"

namespace prism::plugin {
namespace {

// The one registry. Keep docs/plugin.md in step with it.
constexpr EnvParam kParams[] = {
    {"PRISM_NIC_COUNT", "1", "number of NICs (devices) the plugin reports"},
    {"PRISM_NIC_NAME", "prism%d",
     "device name pattern (at most 64 bytes); %d becomes the device index, %% a %; any other % is refused"},
    {"PRISM_NIC_SPEED_MBPS", "400000", "NIC speed reported to NCCL, Mbps (400000 = 400 Gb/s)"},
    {"PRISM_NIC_LATENCY_US", "0", "NIC latency reported to NCCL, microseconds"},
    {"PRISM_NIC_PORT", "1", "port number reported for every NIC"},
    {"PRISM_NIC_MAX_COMMS", "65536", "maxComms reported per NIC"},
    {"PRISM_NIC_MAX_RECVS", "8", "maxRecvs: receives NCCL may group in one irecv (1..8)"},
    {"PRISM_NIC_REG_IS_GLOBAL", "0", "regIsGlobal reported per NIC"},
    {"PRISM_NIC_FORCE_FLUSH", "0", "forceFlush reported per NIC"},
    {"PRISM_NIC_MAX_P2P_BYTES", "1099511627776", "maxP2pBytes (must be in (0, 1 TiB])"},
    {"PRISM_NIC_MAX_COLL_BYTES", "1099511627776", "maxCollBytes"},
    {"PRISM_NIC_MAX_MULTI_REQUEST_SIZE", "1", "maxMultiRequestSize (v11)"},
    {"PRISM_NIC_PCI_PATH", "",
     "PCI path reported for every NIC; empty: none (CPU-attached); a path that does not exist, or a GPU's own, "
     "fails init (NCCL crashes on the latter)"},
    {"PRISM_GDR", "0", "1: advertise NCCL_PTR_CUDA; GPU buffers are copied via libcudart"},
    {"PRISM_DMABUF", "0", "1: advertise NCCL_PTR_DMABUF too (regMrDmaBuf; copies like PRISM_GDR)"},
    {"PRISM_SOCKET_IFADDR", "", "IPv4 address real peers dial; empty: first non-loopback, else 127.0.0.1"},
    {"PRISM_SAME_HOST", "unix",
     "how real peers on this host (same boot, same network namespace) connect: unix (abstract Unix-domain "
     "sockets, no TCP stack) | tcp (the address above, as peers on other hosts)"},
    {"PRISM_SAME_HOST_SNDBUF", "4194304",
     "send buffer (SO_SNDBUF, bytes) of a Unix socket to a real peer on this host; the kernel caps it at "
     "net.core.wmem_max; 0: the kernel's default (net.core.wmem_default, often 208 KiB)"},
    {"PRISM_SAME_HOST_RING", "4194304",
     "bytes of shared memory (one memfd ring per connection) that carry the payload between real peers on this "
     "host, the Unix socket carrying only message headers; 4096 .. 4 GiB; 0: the payload goes over the Unix socket too"},
    {"PRISM_SOCKS_PER_COMM", "1", "sockets per real-peer connection (1..16); 1: NCCL Socket's count where it starts no helper threads"},
    {"PRISM_MIN_CHUNK_BYTES", "262144", "messages are striped over sockets in chunks of at least this"},
    {"PRISM_LINK_GBPS", "0", "modelled link bandwidth in Gbit/s (8 = 1 GB/s); 0: unshaped"},
    {"PRISM_LINK_LATENCY_US", "0", "modelled one-way link latency in microseconds"},
    {"PRISM_LINK_ORDER", "posted",
     "in which order a shaped NIC sends the messages of its connections: posted (one FIFO, each message reserved "
     "when NCCL posts it) or round-robin (whenever the NIC frees, the next connection in turn with a message "
     "posted sends its next 64 KiB slice, as a NIC serves its queue pairs)"},
    {"PRISM_LINK_DECIDE_AHEAD_US", "500",
     "round-robin: a NIC's turn is decided this long before it begins, so that a message's times reach its "
     "receiver ahead of its bytes; a message posted within that span takes its turn from the next one on"},
    {"PRISM_LINK_REPORT", "0",
     "1: when the last communicator's net context is finalized (net ABI v11, NCCL 2.28+), print on stderr "
     "how well the shaped real-peer links held the model (bytes landed after the modelled delivery)"},
    {"PRISM_OP_TIMES", "",
     "a directory: the profiler role asks NCCL for its kernel's per-channel timestamps and writes one JSON line "
     "per operation (kind, size, algorithm, GPU start and stop) to DIR/prism-ops.<pid>.jsonl; times collectives "
     "without CUDA events in the program's streams (docs/plugin.md, \"Operation times\"); empty: off"},
    {"PRISM_CONNECT_TIMEOUT_MS", "60000", "connect() to a real peer fails after this long; an accept() (without prismd) whose peer has not connected after half of it says so once (WARN)"},
    {"PRISM_SPIN_US", "50", "progress threads busy-poll this long before sleeping"},
    {"PRISM_INLINE_BYTES", "1073741824",
     "a real-peer message of at most this many bytes is moved by NCCL's proxy thread inside isend/irecv/test "
     "(no thread hand-over); a larger one by the comm's progress thread; 0: every message by the progress thread"},
    {"PRISM_IDLE_INLINE_BYTES", "0",
     "when set: while at most half of this process's CPUs have a runnable thread (/proc/loadavg, sampled every "
     "50 ms), this replaces PRISM_INLINE_BYTES (e.g. 262144: NCCL's 512 KiB steps to progress threads on a host "
     "with idle cores); 0: off"},
    {"PRISM_RETURN_ON_COMPLETE", "1",
     "1: on NCCL's proxy thread a real-peer receive comm's irecv/test returns once one of its receives "
     "completed (as NCCL Socket's test()), the next call reads the next message, while a send comm's isend/test "
     "writes all its socket takes; 2: send comms stop at a completion too (the default of 2a45c0d); 3: as 1, "
     "but a receive comm reads on while the next message has wholly landed in its socket; 0: every call moves "
     "all the sockets take (the scheme before 2026-12-02)"},
    {"PRISM_PROGRESS_THREADS", "0",
     "progress threads per context (communicator), comms spread by load; 0: one per comm; -1: none, NCCL's "
     "proxy thread moves the bytes inside isend/irecv/test (for ground truths that pack many ranks onto one "
     "host's cores)"},
    {"PRISM_DAEMON", "",
     "prismd address; when set, listen() opens the session; unset: only virtual handles do, at prismd's "
     "per-user default unix://$XDG_RUNTIME_DIR/prismd.sock, else unix:///tmp/prismd-$UID.sock"},
    {"PRISM_DAEMON_TIMEOUT_MS", "10000", "how long init waits to reach prismd (announcing the NCCL version); prismd silence after which pending work fails"},
    {"PRISM_DAEMON_UIDS", "",
     "other users whose prismd this plugin trusts, e.g. 0,1001 (a Unix-socket prismd must run as this user or "
     "as one of them)"},
    {"PRISM_RECV_FILL", "own",
     "what a virtual peer's messages carry: own (an all-gather repeats this rank's own contribution, as if every "
     "rank had this rank's data; everything else zeros) | zeros | none | pattern (none/pattern: Simple only; "
     "LL/LL128 always carry valid flag lines)"},
    {"PRISM_RECV_ZERO_ONCE", "1",
     "1: a zero fill skips the bytes of a collective's Simple buffer (host or GPU) that the plugin zeroed and has not "
     "written since (NCCL's kernel only reads them); 0: every receive writes its zeros again"},
    {"PRISM_EVENT_FLUSH_US", "50", "events to prismd are batched at most this long"},
    {"PRISM_RING_WAITS_FOR_SCHEDULE", "0",
     "1: a ring (MIRROR) receive from a virtual peer waits for prismd's schedule (run prismd with "
     "--lookahead-ms 0); 0: without one the virtual members are taken to be on time"},
    {"PRISM_RING_LOCKSTEP", "1",
     "1: a ring (MIRROR) receive from a virtual peer completes no earlier than the ring's lockstep allows "
     "(every step one link latency plus prismd's NCCL step cost after the last member arrived); 0: this rank's "
     "own send of the same step alone paces it; a PAT receive no earlier than prismd's play of its message "
     "(PAT's floor)"},
    {"PRISM_RING_FLOOR", "model",
     "which steps of a ring the lockstep floor (PRISM_RING_LOCKSTEP=1) holds: model (every step at the model's "
     "time from the ring's start) | end (only the ring's last step: this rank's faster steps pay back its slower "
     "ones, the ring ends at the later of the model's time and this rank's own)"},
};

const char* RawValue(const EnvParam& p) {
  const char* v = std::getenv(p.name);
  return (v != nullptr && v[0] != '\0') ? v : p.default_value;
}

const EnvParam& Param(const char* name) {
  for (const EnvParam& p : kParams) {
    if (std::strcmp(p.name, name) == 0) return p;
  }
  std::abort();  // programming error: a name missing from the registry
}

class Reader {
 public:
  explicit Reader(std::string* warnings) : warnings_(warnings) {}

  std::string String(const char* name) { return RawValue(Param(name)); }

  int64_t Int(const char* name, int64_t lo, int64_t hi) {
    const EnvParam& p = Param(name);
    int64_t v = 0;
    if (!ParseInt(RawValue(p), &v) || v < lo || v > hi) {
      Warn(p, lo, hi);
      ParseInt(p.default_value, &v);
    }
    return v;
  }

  double Double(const char* name, double lo, double hi) {
    const EnvParam& p = Param(name);
    double v = 0;
    if (!ParseDouble(RawValue(p), &v) || v < lo || v > hi) {
      Warn(p, lo, hi);
      ParseDouble(p.default_value, &v);
    }
    return v;
  }

 private:
  static bool ParseInt(const char* s, int64_t* out) {
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0') return false;
    *out = v;
    return true;
  }
  static bool ParseDouble(const char* s, double* out) {
    errno = 0;
    char* end = nullptr;
    double v = std::strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !std::isfinite(v)) return false;
    *out = v;
    return true;
  }
  template <typename T>
  void Warn(const EnvParam& p, T lo, T hi) {
    if (warnings_ == nullptr) return;
    *warnings_ += std::string(p.name) + "='" + RawValue(p) + "' is not a number in [" +
                  std::to_string(lo) + ", " + std::to_string(hi) + "]; using " +
                  p.default_value + "\n";
  }

  std::string* warnings_;
};

}  // namespace

std::span<const EnvParam> AllEnvParams() { return kParams; }

Settings LoadSettings(std::string* warnings) {
  Reader r(warnings);
  Settings s;
  NicSettings& n = s.nic;
  n.count = static_cast<int>(r.Int("PRISM_NIC_COUNT", 1, 64));
  n.name_pattern = r.String("PRISM_NIC_NAME");
  if (std::string why = NicNamePatternProblem(n.name_pattern); !why.empty()) {
    if (warnings != nullptr)
      *warnings += "PRISM_NIC_NAME: " + why + "; using " + Param("PRISM_NIC_NAME").default_value + "\n";
    n.name_pattern = Param("PRISM_NIC_NAME").default_value;
  }
  n.speed_mbps = static_cast<int>(r.Int("PRISM_NIC_SPEED_MBPS", 1, 2000000000));
  n.latency_us = static_cast<float>(r.Double("PRISM_NIC_LATENCY_US", 0, 1e6));
  n.port = static_cast<int>(r.Int("PRISM_NIC_PORT", 0, 1 << 20));
  n.max_comms = static_cast<int>(r.Int("PRISM_NIC_MAX_COMMS", 1, 1 << 30));
  n.max_recvs = static_cast<int>(r.Int("PRISM_NIC_MAX_RECVS", 1, 8));
  n.reg_is_global = static_cast<int>(r.Int("PRISM_NIC_REG_IS_GLOBAL", 0, 1));
  n.force_flush = static_cast<int>(r.Int("PRISM_NIC_FORCE_FLUSH", 0, 1));
  n.max_p2p_bytes = r.Int("PRISM_NIC_MAX_P2P_BYTES", 1, int64_t{1} << 40);
  n.max_coll_bytes = r.Int("PRISM_NIC_MAX_COLL_BYTES", 1, int64_t{1} << 40);
  n.max_multi_request_size = static_cast<int>(r.Int("PRISM_NIC_MAX_MULTI_REQUEST_SIZE", 1, 1024));
  n.pci_path = r.String("PRISM_NIC_PCI_PATH");
  n.gdr = r.Int("PRISM_GDR", 0, 1) == 1;
  n.dmabuf = r.Int("PRISM_DMABUF", 0, 1) == 1;

  s.socket_ifaddr = r.String("PRISM_SOCKET_IFADDR");
  s.socks_per_comm = static_cast<int>(r.Int("PRISM_SOCKS_PER_COMM", 1, 16));
  const std::string same_host = r.String("PRISM_SAME_HOST");
  if (same_host != "unix" && same_host != "tcp" && warnings != nullptr) {
    *warnings += "PRISM_SAME_HOST='" + same_host + "' is not unix|tcp; using unix\n";
  }
  s.same_host_unix = same_host != "tcp";
  s.same_host_send_buffer = static_cast<int>(r.Int("PRISM_SAME_HOST_SNDBUF", 0, int64_t{1} << 30));
  s.same_host_ring_bytes = r.Int("PRISM_SAME_HOST_RING", 0, int64_t{1} << 32);
  if (s.same_host_ring_bytes > 0 && s.same_host_ring_bytes < 4096) {
    if (warnings != nullptr) *warnings += "PRISM_SAME_HOST_RING=" + std::to_string(s.same_host_ring_bytes) + " is under 4096; using 4096\n";
    s.same_host_ring_bytes = 4096;
  }
  s.min_chunk_bytes = r.Int("PRISM_MIN_CHUNK_BYTES", 4096, int64_t{1} << 30);
  s.link_bits_per_second =
      static_cast<uint64_t>(std::llround(r.Double("PRISM_LINK_GBPS", 0, 1e5) * 1e9));
  s.link_latency_ns = std::llround(r.Double("PRISM_LINK_LATENCY_US", 0, 1e7) * 1e3);
  s.link_report = r.Int("PRISM_LINK_REPORT", 0, 1) == 1;
  const std::string order = r.String("PRISM_LINK_ORDER");
  if (order != "posted" && order != "round-robin" && warnings != nullptr)
    *warnings += "PRISM_LINK_ORDER='" + order + "' is not posted|round-robin; using posted\n";
  s.link_order = order == "round-robin" ? LinkOrder::kRoundRobin : LinkOrder::kPosted;
  s.link_decide_ahead_ns = std::llround(r.Double("PRISM_LINK_DECIDE_AHEAD_US", 0, 1e6) * 1e3);
  s.op_times_dir = r.String("PRISM_OP_TIMES");
  s.spin_ns = std::llround(r.Double("PRISM_SPIN_US", 0, 1e6) * 1e3);
  s.progress_threads = static_cast<int>(r.Int("PRISM_PROGRESS_THREADS", -1, 64));
  s.inline_bytes = static_cast<uint64_t>(r.Int("PRISM_INLINE_BYTES", 0, int64_t{1} << 40));
  s.idle_inline_bytes = static_cast<uint64_t>(r.Int("PRISM_IDLE_INLINE_BYTES", 0, int64_t{1} << 40));
  s.return_on_complete = static_cast<ReturnOnComplete>(r.Int("PRISM_RETURN_ON_COMPLETE", 0, 3));
  s.connect_timeout_ms = r.Int("PRISM_CONNECT_TIMEOUT_MS", 100, int64_t{1} << 31);
  const char* daemon = std::getenv("PRISM_DAEMON");
  s.daemon_configured = daemon != nullptr && daemon[0] != '\0';
  s.daemon_address = s.daemon_configured ? r.String("PRISM_DAEMON") : prism::DefaultDaemonAddress();
  s.daemon_timeout_ms = r.Int("PRISM_DAEMON_TIMEOUT_MS", 100, int64_t{1} << 31);
  if (!ParseUidList(r.String("PRISM_DAEMON_UIDS"), &s.daemon_trusted_uids) && warnings != nullptr)
    *warnings += "PRISM_DAEMON_UIDS='" + r.String("PRISM_DAEMON_UIDS") +
                 "' is not a comma-separated list of uids; trusting only this user's prismd\n";
  const std::string fill = r.String("PRISM_RECV_FILL");
  if (fill == "own") {
    s.recv_fill = RecvFill::kOwn;
  } else if (fill == "none") {
    s.recv_fill = RecvFill::kNone;
  } else if (fill == "pattern") {
    s.recv_fill = RecvFill::kPattern;
  } else {
    if (fill != "zeros" && warnings != nullptr) {
      *warnings += "PRISM_RECV_FILL='" + fill + "' is not own|zeros|none|pattern; using own\n";
    }
    s.recv_fill = fill == "zeros" ? RecvFill::kZeros : RecvFill::kOwn;
  }
  s.recv_zero_once = r.Int("PRISM_RECV_ZERO_ONCE", 0, 1) == 1;
  s.event_flush_ns = std::llround(r.Double("PRISM_EVENT_FLUSH_US", 0, 1e6) * 1e3);
  s.ring_waits_for_schedule = r.Int("PRISM_RING_WAITS_FOR_SCHEDULE", 0, 1) == 1;
  s.ring_lockstep = r.Int("PRISM_RING_LOCKSTEP", 0, 1) == 1;
  const std::string floor = r.String("PRISM_RING_FLOOR");
  if (floor != "model" && floor != "end" && warnings != nullptr)
    *warnings += "PRISM_RING_FLOOR='" + floor + "' is not model|end; using model\n";
  s.ring_floor_end = floor == "end";
  // Not a Prism setting: the launcher's rank, only reported to prismd.
  const char* rank = std::getenv("RANK");
  s.rank = rank != nullptr ? std::atoi(rank) : -1;
  return s;
}

std::string NicNamePatternProblem(const std::string& pattern) {
  if (pattern.size() > kMaxNicNamePatternBytes) {
    return "'" + pattern.substr(0, 32) + "...' is " + std::to_string(pattern.size()) + " bytes, over the " +
           std::to_string(kMaxNicNamePatternBytes) + " a NIC name may have";
  }
  for (size_t i = 0; i < pattern.size(); ++i) {
    const unsigned char ch = static_cast<unsigned char>(pattern[i]);
    if (ch < 0x20 || ch == 0x7f) return "'" + pattern + "' holds a control character";
    if (ch != '%') continue;
    if (i + 1 < pattern.size() && (pattern[i + 1] == 'd' || pattern[i + 1] == '%')) {
      ++i;
      continue;
    }
    return "'" + pattern + "' holds a '%' other than %d (the device index) or %% (a literal %)";
  }
  return "";
}

std::string FormatNicName(const std::string& pattern, int index) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'd') {
      out += std::to_string(index);
      ++i;
    } else if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == '%') {
      out += '%';
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

std::string DescribeSettings() {
  std::string out;
  for (const EnvParam& p : kParams) {
    if (!out.empty()) out += ' ';
    out += std::string(p.name) + "=" + RawValue(p);
  }
  return out;
}

std::string NicPciPathProblem(const std::string& pci_path) {
  if (pci_path.empty()) return "";
  std::error_code ec;
  if (!std::filesystem::exists(pci_path, ec))
    return "PRISM_NIC_PCI_PATH=" + pci_path + " does not exist; name a PCI device under /sys/devices, or unset it "
           "(a CPU-attached NIC)";
  std::ifstream in(pci_path + "/class");
  std::string pci_class;
  if (in >> pci_class && pci_class.rfind("0x03", 0) == 0)
    return "PRISM_NIC_PCI_PATH=" + pci_path + " is a GPU (PCI class " + pci_class + "); NCCL crashes when a NIC "
           "reports a GPU's own PCI address: name the PCI bridge or switch above it, or unset it";
  return "";
}

}  // namespace prism::plugin
