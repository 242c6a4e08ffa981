// A one-line progress display for long replays on a terminal:
//   prismd: 42.0% replayed (1.31 M events/s), about 1 min 10 s left
// redrawn in place at most once a second, from the first second on, and
// erased when the replay ends (Finish or destruction). Nothing is written
// when `out` is not a terminal (logs and pipes stay clean) unless `force`.
// The fraction done is the engine's completed op instances over all of them
// (EngineProgress), so the estimate assumes ops of even cost.
// Engine-thread only (an EngineObserver); not thread-safe.
#ifndef PRISM_DAEMON_SERVER_PROGRESS_LINE_H_
#define PRISM_DAEMON_SERVER_PROGRESS_LINE_H_

#include <chrono>
#include <cstdio>
#include <string>

#include "daemon/engine/replay_engine.h"

namespace prism::server {

class ProgressLine final : public engine::EngineObserver {
 public:
  // `out` is not owned and must outlive this object.
  explicit ProgressLine(std::FILE* out, bool force = false);
  ~ProgressLine() override { Finish(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void OnProgress(const engine::EngineProgress& p) override;
  void Finish();  // erases the line if one is shown

  // The text for `fraction` done after `elapsed_s`, `events` handled.
  static std::string Format(double fraction, double elapsed_s, uint64_t events);

 private:
  std::FILE* out_;
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double last_drawn_s_ = 0;
};

}  // namespace prism::server

#endif  // PRISM_DAEMON_SERVER_PROGRESS_LINE_H_
