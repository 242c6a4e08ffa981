// Which NCCL release the real ranks run, as prismd knows it: given on the
// command line (--wire-profile), or learnt from the first real rank that
// says (the plugin's Announce at NCCL init, or a session Hello). Every later
// rank must run the same release; one that does not is refused with the fix.
//
// Thread-safe: gRPC threads call Admit() concurrently. `choose` runs at most
// once at a time, under the gate's lock, and must not call back into the gate.
#ifndef PRISM_DAEMON_SESSION_NCCL_VERSION_GATE_H_
#define PRISM_DAEMON_SESSION_NCCL_VERSION_GATE_H_

#include <functional>
#include <mutex>
#include <string>

#include "absl/status/status.h"

namespace prism::daemon {

class NcclVersionGate {
 public:
  // Decides whether prismd can serve `code` and, if so, arms everything that
  // depends on it (the bootstrap's wire profile). Its error is the refusal
  // the rank sees (it names the supported releases).
  using Chooser = std::function<absl::Status(int code)>;

  // `fixed_code` != 0: prismd serves that release only (--wire-profile);
  // 0: the first rank's release is chosen through `choose`.
  NcclVersionGate(int fixed_code, Chooser choose);
  NcclVersionGate(const NcclVersionGate&) = delete;
  NcclVersionGate& operator=(const NcclVersionGate&) = delete;

  // A real rank runs NCCL `code` (0: it could not tell; admitted, nothing
  // chosen). OK when prismd serves that release (choosing it if none was
  // yet); FailedPrecondition naming both releases and the fix otherwise.
  // `who` names the rank in messages, e.g. "rank 3 (pid 812)".
  absl::Status Admit(int code, const std::string& who);

  // The release served, 0 while none is known.
  int chosen() const;

 private:
  mutable std::mutex mu_;
  const bool fixed_;
  int chosen_ = 0;        // guarded by mu_
  std::string chosen_by_; // guarded by mu_: who announced it
  Chooser choose_;
};

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_SESSION_NCCL_VERSION_GATE_H_
