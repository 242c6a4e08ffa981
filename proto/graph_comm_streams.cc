#include "proto/graph_comm_streams.h"

#include <map>

#include "absl/strings/str_cat.h"

namespace prism::graph {
namespace {

std::optional<uint32_t> SlotOf(const Op& op) {
  if (op.has_collective()) return op.collective().comm_slot();
  if (op.has_send()) return op.send().comm_slot();
  if (op.has_recv()) return op.recv().comm_slot();
  return std::nullopt;
}

std::string KindOf(const Op& op) {
  if (op.has_collective()) return CollectiveKind_Name(op.collective().kind());
  return op.has_send() ? "send" : "recv";
}

}  // namespace

std::optional<std::string> CommunicatorStreamCrossing(const Program& program, uint32_t index) {
  std::map<uint32_t, int> last_on_slot;  // slot -> its latest op so far
  for (int k = 0; k < program.ops_size(); ++k) {
    const Op& op = program.ops(k);
    const auto slot = SlotOf(op);
    if (!slot) continue;
    const auto [it, first] = last_on_slot.emplace(*slot, k);
    if (first) continue;
    const Op& before = program.ops(it->second);
    if (before.stream() != op.stream()) {
      const std::string name = *slot < static_cast<uint32_t>(program.comm_slot_names_size())
                                   ? absl::StrCat(" (", program.comm_slot_names(static_cast<int>(*slot)), ")")
                                   : "";
      return absl::StrCat("program ", index, " (", program.name(), ") op ", k, " (", KindOf(op), ", stream ",
                          op.stream(), ") follows op ", it->second, " (", KindOf(before), ", stream ",
                          before.stream(), ") on comm slot ", *slot, name,
                          ": NCCL runs one communicator's operations in the order they were issued, but prismd "
                          "calls a real rank's operations per stream, so it may pair this one with another of its "
                          "peers' and stall; put a communicator's operations on one stream");
    }
    it->second = k;
  }
  return std::nullopt;
}

std::optional<std::string> CommunicatorStreamCrossing(const Graph& graph) {
  for (int p = 0; p < graph.programs_size(); ++p)
    if (auto c = CommunicatorStreamCrossing(graph.programs(p), static_cast<uint32_t>(p))) return c;
  return std::nullopt;
}

}  // namespace prism::graph
