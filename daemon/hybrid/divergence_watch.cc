#include "daemon/hybrid/divergence_watch.h"

#include "absl/strings/str_cat.h"

namespace prism::daemon {
namespace {

const char* SourceName(DivergenceSource s) {
  switch (s) {
    case DivergenceSource::kOperations: return "a real rank's operation";
    case DivergenceSource::kBootstrap: return "the NCCL bootstrap";
    case DivergenceSource::kStore: return "PyTorch's store";
    case DivergenceSource::kStall: return "a stall";
  }
  return "?";
}

// What prismd does instead of stopping, per source.
const char* FollowAction(DivergenceSource s) {
  switch (s) {
    case DivergenceSource::kOperations:
      return "the operation's virtual peers are timed as if it were on time, and the replay goes on";
    case DivergenceSource::kBootstrap:
      return "the communicator the real ranks' NCCL made is kept in place of the graph's";
    case DivergenceSource::kStore:
      return "the error stays on /status; a rank that waits for that group or id may wait until it is stopped";
    case DivergenceSource::kStall:
      return "prismd keeps waiting (nothing it plays can move until a real rank does); the report stays on /status";
  }
  return "";
}

}  // namespace

absl::StatusOr<OnDivergence> ParseOnDivergence(const std::string& text) {
  if (text == "stop") return OnDivergence::kStop;
  if (text == "follow") return OnDivergence::kFollow;
  return absl::InvalidArgumentError(
      absl::StrCat("--on-divergence must be stop or follow, got '", text.substr(0, 32), "'"));
}

void DivergenceWatch::Report(DivergenceSource source, const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  ++reported_;
  if (!first_) first_ = absl::StrCat(SourceName(source), ": ", text);
  if (mode_ == OnDivergence::kFollow && followed_.insert(source).second) {
    pending_notes_.push_back(absl::StrCat("divergence in ", SourceName(source), " (", text,
                                          "); following it (--on-divergence follow): ", FollowAction(source),
                                          ". Later ones of this kind are counted on /status"));
  }
}

DivergenceWatch::Decision DivergenceWatch::Tick() {
  std::lock_guard<std::mutex> lock(mu_);
  Decision d;
  d.notes.swap(pending_notes_);
  if (mode_ == OnDivergence::kStop && first_ && !stop_said_) {
    d.stop_reason = *first_;
    stop_said_ = true;
  }
  return d;
}

uint64_t DivergenceWatch::reported() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reported_;
}

}  // namespace prism::daemon
