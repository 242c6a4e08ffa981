// One real rank's capture recording (proto/capture.proto, docs/capture.md):
// reading and writing the JSON-lines file, and the stand-in that records a
// rank's view of an existing graph (what a capture on that rank would record
// if the program ran that graph). Pure functions apart from the named
// files; thread-safe.
#ifndef PRISM_GRAPHGEN_CAPTURE_RECORDING_H_
#define PRISM_GRAPHGEN_CAPTURE_RECORDING_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/capture.pb.h"
#include "proto/graph.pb.h"

namespace prism::graphgen {

inline constexpr char kCaptureFormat[] = "prism-capture/1";

struct Recording {
  prism::capture::CaptureHeader header;
  std::vector<prism::graph::Communicator> comms;  // creation order; comms[i].id == i
  std::vector<prism::graph::Op> ops;              // comm_slot = communicator id; absolute peers
  // Collectives before the first repeating iteration (start-up), comm_slot
  // = communicator id; the graph's Program.startup_ops.
  std::vector<prism::graph::Op> startup_ops;
  // PyTorch's groups in creation order (Graph.process_groups); empty: group k is comms[k].
  std::vector<prism::graph::ProcessGroup> process_groups;
};

// Parses a recording; `origin` names it in errors ("<file>:<line>: ...").
// Checks the format, the line order (header, comms, start-up ops, ops), ids, members
// (distinct, below world_size, the rank a member of every communicator an op
// uses), deps (earlier ops) and peers (in the communicator).
absl::StatusOr<Recording> ParseRecording(std::string_view text, const std::string& origin);
absl::StatusOr<Recording> ReadRecordingFile(const std::string& path);  // at most 1 GiB, a regular file

std::string EncodeRecording(const Recording& recording);

// What rank `rank` of `graph` (a valid graph) would record: every
// communicator, its program's ops with slots turned into communicator ids and
// relative peers into absolute ones, its program's static and peak memory.
absl::StatusOr<Recording> RecordingFromGraph(const prism::graph::Graph& graph, uint32_t rank);

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_CAPTURE_RECORDING_H_
