#include "daemon/server/progress_line.h"

#include <unistd.h>

#include <cmath>

#include "absl/strings/str_format.h"

namespace prism::server {
namespace {

constexpr double kFirstDrawS = 1.0;   // short replays stay silent
constexpr double kRedrawS = 1.0;

std::string Duration(double s) {
  if (s < 60) return absl::StrFormat("%.0f s", std::ceil(s));
  if (s < 3600) return absl::StrFormat("%d min %d s", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  return absl::StrFormat("%d h %d min", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
}

}  // namespace

ProgressLine::ProgressLine(std::FILE* out, bool force)
    : out_(out), enabled_(out != nullptr && (force || isatty(fileno(out)) == 1)) {}

std::string ProgressLine::Format(double fraction, double elapsed_s, uint64_t events) {
  std::string line = absl::StrFormat("prismd: %.1f%% replayed (%.2f M events/s)", fraction * 100,
                                     elapsed_s > 0 ? static_cast<double>(events) / elapsed_s / 1e6 : 0.0);
  if (fraction > 0 && fraction < 1) line += ", about " + Duration(elapsed_s * (1 - fraction) / fraction) + " left";
  return line;
}

void ProgressLine::OnProgress(const engine::EngineProgress& p) {
  if (!enabled_ || p.ops_total == 0) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (elapsed < kFirstDrawS || elapsed - last_drawn_s_ < kRedrawS) return;
  if (p.ops_done >= p.ops_total) return;  // the end: Finish erases the line
  last_drawn_s_ = elapsed;
  const double fraction = static_cast<double>(p.ops_done) / static_cast<double>(p.ops_total);
  std::fprintf(out_, "\r%s\033[K", Format(fraction, elapsed, p.events).c_str());
  std::fflush(out_);
  shown_ = true;
}

void ProgressLine::Finish() {
  if (!shown_) return;
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
  shown_ = false;
}

}  // namespace prism::server
