// Where the replay's streams stand, for the engine's reports: the error of
// a stalled replay (ReplayEngine::StallError) and the real ranks' positions
// while the engine waits for them (ReplayEngine::RealRankPositions). Read
// only; kept apart from replay_engine.cc, which holds the event loop.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/engine/replay_engine.h"

namespace prism::engine {

absl::Status ReplayEngine::StallError() const {
  for (size_t a = 0; a < state_.size(); ++a) {
    const ProgramInfo& p = world_.programs[world_.actors[a].program];
    for (uint32_t st = 0; st < state_[a].streams; ++st) {
      const StreamState& ss = streams_[state_[a].stream_base + st];
      const uint64_t len = p.stream_ops[st].size();
      const uint64_t at = ss.Pos(len);
      if (len == 0 || (at >= len * options_.iterations && ss.inflight == 0)) continue;
      const uint64_t pos = ss.inflight > 0 && at > 0 ? at - 1 : at;
      const uint32_t k = p.stream_ops[st][std::min(pos, len * options_.iterations - 1) % len];
      return absl::FailedPreconditionError(absl::StrCat(
          "replay stalled at ", now_.count(), " ns: rank ", world_.actors[a].rep_rank, " (", p.name, ") waits at op ", k,
          " on stream ", st, ", iteration ", pos / len,
          ": a collective that not every member reaches, a send without its receive, or dependencies that "
          "wait on each other; check the graph (prism-graphgen) for this op"));
    }
  }
  return absl::FailedPreconditionError("replay stalled with no runnable op");
}

std::vector<RealRankPosition> ReplayEngine::RealRankPositions() const {
  std::vector<RealRankPosition> out;
  for (uint32_t a = 0; a < state_.size(); ++a) {
    if (!state_[a].real) continue;
    const ProgramInfo& p = world_.programs[world_.actors[a].program];
    for (uint32_t st = 0; st < state_[a].streams; ++st) {
      const StreamState& ss = streams_[state_[a].stream_base + st];
      const std::vector<uint32_t>& ops = p.stream_ops[st];
      const uint64_t len = ops.size(), total = len * options_.iterations;
      const uint64_t at = ss.Pos(len);
      if (len == 0 || (at >= total && ss.inflight == 0)) continue;
      RealRankPosition r{world_.actors[a].rep_rank, st, 0, 0, ss.inflight > 0};
      uint64_t pos = r.reached ? at - 1 : at;
      while (!r.reached && pos + 1 < total && !LaunchOrder::IsComm(p.ops[ops[pos % len]].kind)) ++pos;  // compute: ends on its own
      r.op = ops[pos % len];
      r.iteration = pos / len;
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace prism::engine
