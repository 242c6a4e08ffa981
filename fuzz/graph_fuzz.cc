// libFuzzer target: graph file loader (DecodeGraph + ValidateGraph) and the
// engine setup and replay behind it (BuildWorld, equivalence classes, Run).
// Any input must give a Status, never a crash, hang or unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <google/protobuf/stubs/logging.h>

#include "daemon/engine/simulation.h"
#include "proto/graph_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  google::protobuf::LogSilencer quiet;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto graph = prism::graph::DecodeGraph(bytes, "<fuzz>");
  if (!graph.ok()) return 0;
  for (bool classes : {true, false}) {
    prism::engine::SimulationOptions options;
    options.iterations = 1 + (size % 3);
    options.use_classes = classes;
    options.trace_ranks = std::vector<uint32_t>{0};
    auto result = prism::engine::Simulate(*graph, options);
    if (result.ok()) {
      (void)result->report.ToJson();
      (void)result->TraceJson(*graph);
    }
  }
  return 0;
}
