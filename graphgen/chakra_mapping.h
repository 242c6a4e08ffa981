// What Prism's ops become in a Chakra trace and back (module: chakra), shared
// by graphgen/chakra_export.cc and graphgen/chakra_import.cc: attribute names,
// the collective kinds, and which dependencies a trace spells out that a
// Prism program implies (its stream order and its groups). docs/chakra.md
// states the mapping for users. Internal to graphgen; pure functions.
#ifndef PRISM_GRAPHGEN_CHAKRA_MAPPING_H_
#define PRISM_GRAPHGEN_CHAKRA_MAPPING_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "proto/chakra/et_def.pb.h"
#include "proto/graph.pb.h"

namespace prism::graphgen::chakra {

// Attributes Chakra's feeder and ASTRA-sim read (et_feeder_node.cpp's names
// and value types).
inline constexpr char kAttrIsCpuOp[] = "is_cpu_op";   // bool_val
inline constexpr char kAttrNumOps[] = "num_ops";      // int64_val: the compute op's FLOPs
inline constexpr char kAttrCommType[] = "comm_type";  // int64_val: CollectiveCommType
inline constexpr char kAttrCommSize[] = "comm_size";  // int64_val: bytes
inline constexpr char kAttrCommSrc[] = "comm_src";    // int32_val: global rank
inline constexpr char kAttrCommDst[] = "comm_dst";    // int32_val: global rank
inline constexpr char kAttrCommTag[] = "comm_tag";    // int32_val: the communicator id
inline constexpr char kAttrPgName[] = "pg_name";      // string_val: the communicator id, decimal
// Chakra's PyTorch converter's name for an op's stream (int64_val).
inline constexpr char kAttrStream[] = "stream";
// Prism's own, so that import gives back exactly what was exported.
inline constexpr char kAttrOp[] = "prism_op";  // string_val: "group_start" | "group_end" on those COMP_NODEs
inline constexpr char kAttrDurationNs[] = "prism_duration_ns";          // uint64_val
inline constexpr char kAttrMemoryDelta[] = "prism_memory_delta_bytes";  // int64_val
inline constexpr char kAttrSlot[] = "prism_slot";                       // int64_val: program comm slot
inline constexpr char kAttrDtype[] = "prism_dtype";                     // int64_val: prism.graph.DType
inline constexpr char kAttrAlgorithm[] = "prism_algorithm";             // int64_val: prism.graph.Algorithm
inline constexpr char kAttrRoot[] = "prism_root";                       // int64_val: communicator rank
inline constexpr char kAttrPeer[] = "prism_peer";                       // int64_val: SendOp/RecvOp.peer
inline constexpr char kAttrPeerRelative[] = "prism_peer_relative";      // bool_val
inline constexpr char kAttrPayload[] = "prism_payload";                 // bytes_val: RecvOp.payload
inline constexpr char kGroupStart[] = "group_start";
inline constexpr char kGroupEnd[] = "group_end";
// GlobalMetadata attributes.
inline constexpr char kMetaRank[] = "prism_rank";        // int64_val
inline constexpr char kMetaProgram[] = "prism_program";  // string_val: the program's name

ChakraProtoMsg::CollectiveCommType ChakraCollective(prism::graph::CollectiveKind kind);
// nullopt for Chakra kinds Prism has no collective for (GATHER, SCATTER).
std::optional<prism::graph::CollectiveKind> PrismCollective(int64_t chakra_type);

// The dependencies of each op that a Prism program implies and a Chakra
// trace must spell out (Chakra orders nothing by itself): outside a group,
// the previous op on the same stream; a group's start, that same previous op;
// an op inside a group, its group's start (the group's ops are concurrent, as
// in NCCL); a group's end, every op of its group. `ops` needs only stream and
// kind set. Contract: groups pair up on each stream (ValidateGraph's rule).
std::vector<std::vector<uint32_t>> ImpliedDeps(const google::protobuf::RepeatedPtrField<prism::graph::Op>& ops);

}  // namespace prism::graphgen::chakra

#endif  // PRISM_GRAPHGEN_CHAKRA_MAPPING_H_
