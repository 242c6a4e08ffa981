// The operation-times log (PRISM_OP_TIMES=DIR): one JSON line per NCCL
// operation, with the times NCCL's own kernel stamped on it.
//
// Why: timing a collective from the program (CUDA events recorded around
// the call) adds work to the streams the collective waits on, and on a GPU
// shared by many ranks that changed what a program did (a DP8 step of the
// fidelity bench ran 530 ms an iteration without such events and 697 ms
// with them, 2026-12-04). NCCL 2.28's profiler interface reports, per
// channel of every operation, the GPU's %globaltimer when the kernel began
// and finished that channel's work (KernelCh events); the profiler role
// (op_tracker.h) asks for them only while this log is on and hands each
// finished operation here.
//
// The file is DIR/prism-ops.<pid>.jsonl, made on the first line (DIR too,
// one level, when missing); a line per operation once every channel that
// started has stopped and at least the operation's channel count has, and
// at the communicator's finalize for the operations still without one
// (those carry "complete":false). The tracker hands them over through
// KernelTimesSink (op_tracker.h), as it hands operations to prismd through
// OpListener. Each line is one write(2) with O_APPEND,
// so a program that ends without destroying its communicators keeps every
// line of the operations that had finished.
//
// Line (OpTimesLine): {"pid","comm" (NCCL commHash, hex),"rank","nranks",
// "op" (process-unique id),"kind","seq","peer","root","bytes","algo",
// "proto","channels","enqueued_wall_ns" (CLOCK_REALTIME when NCCL started
// the operation's profiler event, inside the launching call),
// "kernel_start_ns","kernel_stop_ns" (GPU %globaltimer: earliest channel
// start, latest channel stop; null without KernelCh events),
// "kernel_channels","complete"}.
//
// Thread-safety: Append may be called from any thread (NCCL's proxy thread
// stops kernel events; finalize runs on the application's).
#ifndef PRISM_PLUGIN_OP_TIMES_H_
#define PRISM_PLUGIN_OP_TIMES_H_

#include <cstdint>
#include <mutex>
#include <string>

#include "plugin/log.h"
#include "plugin/op_tracker.h"

namespace prism::plugin {

// The JSON line (with its '\n') for one operation. Pure; any thread.
std::string OpTimesLine(const OpInfo& info, const KernelSpan& span, int pid);

class OpTimesLog final : public KernelTimesSink {
 public:
  // `directory`: non-empty. `logger` (nullable) must outlive the log; the
  // one warning when the file cannot be written goes there and to stderr.
  OpTimesLog(std::string directory, Logger* logger);
  ~OpTimesLog() override;
  OpTimesLog(const OpTimesLog&) = delete;
  OpTimesLog& operator=(const OpTimesLog&) = delete;

  // Writes the operation's line (opening the file on first use). A failure
  // is warned once, naming the path and the fix; the line is dropped.
  void Append(const OpInfo& info, const KernelSpan& span);
  // KernelTimesSink: the tracker's finished operations.
  void OnKernelSpan(const OpInfo& info, const KernelSpan& span) override { Append(info, span); }

  // DIR/prism-ops.<pid>.jsonl for this process.
  std::string path() const;
  uint64_t lines_written() const;

 private:
  bool OpenLocked();

  const std::string directory_;
  Logger* const logger_;
  mutable std::mutex mu_;  // guards the members below
  int fd_ = -1;
  bool failed_ = false;    // warned; every later line is dropped
  uint64_t lines_ = 0;
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_OP_TIMES_H_
