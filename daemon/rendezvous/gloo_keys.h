// PyTorch 2.11's store keys for Gloo rank records (docs/bootstrap.md,
// "Gloo groups"). ProcessGroupGloo gets the group's store (prefix
// "<group>/" inside the default group's, "default_pg/" first for env://,
// tcp:// and torchrun), c10d adds "<device type>/" ("cpu/", also "cuda/" for
// backend="gloo"), ProcessGroupGloo "<device index>" per Gloo context, and
// Gloo the rank:
//   [default_pg/]0//[<group>//]<device type>//<device index>/<rank>
// NCCL id keys (torch_groups.h) never end in "/<rank>". The rendezvous
// leaves these keys' waits to daemon/gloo, which plays the Gloo ranks.
// Pure functions; thread-safe.
#ifndef PRISM_DAEMON_RENDEZVOUS_GLOO_KEYS_H_
#define PRISM_DAEMON_RENDEZVOUS_GLOO_KEYS_H_

#include <cstdint>
#include <optional>
#include <string>

namespace prism::rendezvous {

struct GlooKey {
  std::string key;          // as the store saw it
  std::string context;      // the key without "/<rank>": one Gloo context
  std::string group = "0";  // PyTorch group name ("0" = the default group)
  std::string device_type;  // "cpu", "cuda"
  int64_t rank = 0;         // group rank whose record this is
};

// nullopt for keys that are not Gloo rank records.
std::optional<GlooKey> ParseGlooKey(const std::string& store_key);

// The store key of `rank`'s record in `context`.
std::string RecordKey(const std::string& context, int64_t rank);

}  // namespace prism::rendezvous

#endif  // PRISM_DAEMON_RENDEZVOUS_GLOO_KEYS_H_
