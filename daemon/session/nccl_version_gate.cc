#include "daemon/session/nccl_version_gate.h"

#include "absl/strings/str_cat.h"
#include "common/nccl_version.h"

namespace prism::daemon {

NcclVersionGate::NcclVersionGate(int fixed_code, Chooser choose)
    : fixed_(fixed_code != 0), chosen_(fixed_code), chosen_by_("--wire-profile"), choose_(std::move(choose)) {}

absl::Status NcclVersionGate::Admit(int code, const std::string& who) {
  if (code == 0) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  if (chosen_ == code) return absl::OkStatus();
  if (chosen_ != 0) {
    const std::string fix =
        fixed_ ? absl::StrCat("restart prismd with --wire-profile ", code, " (prism run: --nccl-version ",
                              NcclVersionName(code), ") or without --wire-profile, or run the rank with NCCL ",
                              NcclVersionName(chosen_))
               : absl::StrCat("every real rank of a job must load the same NCCL (check LD_LIBRARY_PATH and "
                              "LD_PRELOAD), or restart prismd for the other release");
    return absl::FailedPreconditionError(absl::StrCat(
        who, " runs NCCL ", NcclVersionName(code), " (version code ", code, ") but prismd plays NCCL ",
        NcclVersionName(chosen_), "'s bootstrap (", fixed_ ? "--wire-profile" : "announced by ", fixed_ ? "" : chosen_by_,
        "): ", fix));
  }
  if (choose_) {
    if (absl::Status s = choose_(code); !s.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(who, " runs NCCL ", NcclVersionName(code), ": ", s.message()));
    }
  }
  chosen_ = code;
  chosen_by_ = who;
  return absl::OkStatus();
}

int NcclVersionGate::chosen() const {
  std::lock_guard<std::mutex> lock(mu_);
  return chosen_;
}

}  // namespace prism::daemon
