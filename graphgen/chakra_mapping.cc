#include "graphgen/chakra_mapping.h"

#include "absl/container/flat_hash_map.h"

namespace prism::graphgen::chakra {

namespace pg = prism::graph;

ChakraProtoMsg::CollectiveCommType ChakraCollective(pg::CollectiveKind kind) {
  switch (kind) {
    case pg::ALLREDUCE: return ChakraProtoMsg::ALL_REDUCE;
    case pg::ALLGATHER: return ChakraProtoMsg::ALL_GATHER;
    case pg::REDUCESCATTER: return ChakraProtoMsg::REDUCE_SCATTER;
    case pg::BROADCAST: return ChakraProtoMsg::BROADCAST;
    case pg::REDUCE: return ChakraProtoMsg::REDUCE;
    case pg::ALLTOALL: return ChakraProtoMsg::ALL_TO_ALL;
    case pg::BARRIER: return ChakraProtoMsg::BARRIER;
    default: return ChakraProtoMsg::ALL_REDUCE;  // unspecified: ValidateGraph refuses it before export
  }
}

std::optional<pg::CollectiveKind> PrismCollective(int64_t chakra_type) {
  switch (chakra_type) {
    case ChakraProtoMsg::ALL_REDUCE: return pg::ALLREDUCE;
    case ChakraProtoMsg::REDUCE: return pg::REDUCE;
    case ChakraProtoMsg::ALL_GATHER: return pg::ALLGATHER;
    case ChakraProtoMsg::BROADCAST: return pg::BROADCAST;
    case ChakraProtoMsg::ALL_TO_ALL: return pg::ALLTOALL;
    case ChakraProtoMsg::REDUCE_SCATTER:
    case ChakraProtoMsg::REDUCE_SCATTER_BLOCK: return pg::REDUCESCATTER;
    case ChakraProtoMsg::BARRIER: return pg::BARRIER;
    default: return std::nullopt;
  }
}

std::vector<std::vector<uint32_t>> ImpliedDeps(const google::protobuf::RepeatedPtrField<pg::Op>& ops) {
  struct StreamState {
    std::optional<uint32_t> last;         // the previous op outside a group (or the last group's end)
    std::optional<uint32_t> group_start;  // set while a group is open
    std::vector<uint32_t> members;        // the open group's ops
  };
  absl::flat_hash_map<uint32_t, StreamState> streams;
  std::vector<std::vector<uint32_t>> implied(ops.size());
  for (int i = 0; i < ops.size(); ++i) {
    const pg::Op& op = ops[i];
    StreamState& s = streams[op.stream()];
    const uint32_t index = static_cast<uint32_t>(i);
    if (op.has_group_start()) {
      if (s.last) implied[i].push_back(*s.last);
      s.group_start = index;
      s.members.clear();
    } else if (op.has_group_end() && s.group_start) {
      implied[i] = s.members.empty() ? std::vector<uint32_t>{*s.group_start} : s.members;
      s.group_start.reset();
      s.last = index;
    } else if (s.group_start) {
      implied[i].push_back(*s.group_start);
      s.members.push_back(index);
    } else {
      if (s.last) implied[i].push_back(*s.last);
      s.last = index;
    }
  }
  return implied;
}

}  // namespace prism::graphgen::chakra
