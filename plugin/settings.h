// Every PRISM_* setting of the plugin: one registry (name, default, meaning),
// read once per process from the environment into a typed Settings value.
// docs/plugin.md documents the same list; `PrintSettings` logs it at INFO.
//
// Thread-safety: Settings is an immutable value after LoadSettings returns.
#ifndef PRISM_PLUGIN_SETTINGS_H_
#define PRISM_PLUGIN_SETTINGS_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "plugin/link_model.h"

namespace prism::plugin {

// One registry entry. `default_value` is the text used when the variable is
// unset or empty.
struct EnvParam {
  const char* name;
  const char* default_value;
  const char* doc;
};

// All parameters, in documentation order.
std::span<const EnvParam> AllEnvParams();

enum class RecvFill { kOwn, kZeros, kNone, kPattern };

// PRISM_RETURN_ON_COMPLETE: which real-peer comms stop a call on NCCL's proxy
// thread at a completion (real_comms.h, ReturnToCaller).
enum class ReturnOnComplete {
  kNever = 0,     // every call moves all the sockets take (before 2026-12-02)
  kReceives = 1,  // receive comms stop; send comms write all the socket takes
  kAll = 2,       // send comms stop too (the default of 2a45c0d)
  kLanded = 3,    // as kReceives, but a receive comm reads on while the next message has wholly landed
};

struct NicSettings {
  int count = 1;
  std::string name_pattern;      // "%d" replaced by the device index (FormatNicName)
  int speed_mbps = 0;
  float latency_us = 0;
  int port = 1;
  int max_comms = 0;
  int max_recvs = 1;
  int reg_is_global = 0;
  int force_flush = 0;
  uint64_t max_p2p_bytes = 0;
  uint64_t max_coll_bytes = 0;
  int max_multi_request_size = 1;
  std::string pci_path;          // empty: no PCI path (CPU-attached)
  bool gdr = false;              // advertise NCCL_PTR_CUDA
  bool dmabuf = false;           // advertise NCCL_PTR_DMABUF
};

struct Settings {
  NicSettings nic;
  std::string socket_ifaddr;     // empty: first non-loopback IPv4, else 127.0.0.1
  int socks_per_comm = 1;
  bool same_host_unix = true;    // PRISM_SAME_HOST=unix: real peers on this host over Unix sockets
  int same_host_send_buffer = 0; // PRISM_SAME_HOST_SNDBUF: SO_SNDBUF of those sockets; 0: the kernel's default
  int64_t same_host_ring_bytes = 0; // PRISM_SAME_HOST_RING: payload through shared memory of this size; 0: the socket
  uint64_t min_chunk_bytes = 0;
  uint64_t link_bits_per_second = 0;  // 0: unshaped
  int64_t link_latency_ns = 0;
  LinkOrder link_order = LinkOrder::kPosted;  // PRISM_LINK_ORDER
  int64_t link_decide_ahead_ns = 0;           // PRISM_LINK_DECIDE_AHEAD_US (round-robin)
  int64_t spin_ns = 0;
  int progress_threads = 0;           // per context; 0: one per comm; -1: inline (kInlineProgress)
  uint64_t inline_bytes = 0;          // PRISM_INLINE_BYTES: larger messages go to the progress thread
  uint64_t idle_inline_bytes = 0;     // PRISM_IDLE_INLINE_BYTES: the same while cores are idle; 0: off
  ReturnOnComplete return_on_complete = ReturnOnComplete::kReceives;  // PRISM_RETURN_ON_COMPLETE
  int64_t connect_timeout_ms = 0;
  bool daemon_configured = false;     // PRISM_DAEMON set explicitly
  std::string daemon_address;
  int64_t daemon_timeout_ms = 0;
  std::vector<uint32_t> daemon_trusted_uids;  // PRISM_DAEMON_UIDS, besides this user
  RecvFill recv_fill = RecvFill::kOwn;
  bool recv_zero_once = true;            // PRISM_RECV_ZERO_ONCE (plugin/zeroed_ranges.h)
  int64_t event_flush_ns = 0;
  bool ring_waits_for_schedule = false;  // PRISM_RING_WAITS_FOR_SCHEDULE
  bool ring_lockstep = true;             // PRISM_RING_LOCKSTEP
  bool ring_floor_end = false;           // PRISM_RING_FLOOR=end (model: false)
  bool link_report = false;              // PRISM_LINK_REPORT
  std::string op_times_dir;              // PRISM_OP_TIMES; empty: off (plugin/op_times.h)
  int rank = -1;                      // RANK (set by launchers), for prismd's logs
};

// Reads every registry entry from the environment. Bad values fall back to
// the default and are reported in `*warnings` (one line each).
Settings LoadSettings(std::string* warnings);

// PRISM_NIC_NAME is a pattern, never a printf format: "%d" becomes the
// device index, "%%" a '%', everything else is copied. A pattern holding any
// other '%', a control character, or more than kMaxNicNamePatternBytes is
// refused: NicNamePatternProblem says why ("" when it is fine), and
// LoadSettings then warns and uses the default. Pure; any thread.
inline constexpr size_t kMaxNicNamePatternBytes = 64;
std::string NicNamePatternProblem(const std::string& pattern);
std::string FormatNicName(const std::string& pattern, int index);

// "NAME=value" for every parameter, as the process sees it (effective value).
std::string DescribeSettings();

// Why NCCL cannot be given `pci_path` as the NIC's PCI path (PRISM_NIC_PCI_PATH),
// or "" when it can (empty: no path, a CPU-attached NIC). Refused: a path that
// does not exist, and a display-class device (its sysfs `class` 0x03xxxx, a
// GPU): NCCL 2.28.9 crashes in topology detection when a NIC sits at a GPU's
// PCI address (seen on the GPU host). Reads sysfs; any thread.
std::string NicPciPathProblem(const std::string& pci_path);

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_SETTINGS_H_
