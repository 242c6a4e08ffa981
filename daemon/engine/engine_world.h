// The world the replay engine plays, as data: actors (one per rank, or one
// per equivalence class of provably symmetric ranks), the communicators
// between them and each program's operations in a compact form. world.h
// builds it (BuildWorld), equivalence.h reduces it; both build on this
// header, which knows neither. Plain values: thread-compatible.
#ifndef PRISM_DAEMON_ENGINE_ENGINE_WORLD_H_
#define PRISM_DAEMON_ENGINE_ENGINE_WORLD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/units.h"
#include "daemon/engine/network_model.h"
#include "proto/graph.pb.h"

namespace prism::engine {

enum class OpKind : uint8_t { kCompute, kCollective, kSend, kRecv, kGroupStart, kGroupEnd };

// One op of a program, flattened for the hot loop.
struct OpInfo {
  OpKind kind = OpKind::kCompute;
  uint32_t stream = 0;
  uint32_t slot = 0;             // comm slot (collective, send, recv)
  int32_t p2p_desc = -1;         // index into ProgramInfo::p2p (send, recv)
  graph::CollectiveKind collective = graph::COLLECTIVE_KIND_UNSPECIFIED;
  graph::Algorithm algorithm = graph::ALGORITHM_DEFAULT;
  int64_t memory_delta = 0;
  Nanoseconds duration;          // compute; a collective: its measured own pace (0: none), a floor
  Bytes bytes;
  uint32_t deps_begin = 0, deps_end = 0;  // range in ProgramInfo::deps
};

// A distinct (slot, peer, relative) send/recv target of a program.
struct P2PDesc {
  uint32_t slot = 0;
  uint32_t peer = 0;
  bool relative = false;
  bool is_send = false;
};

struct ProgramInfo {
  std::string name;
  uint64_t static_memory = 0;
  uint32_t streams = 0;                        // streams actually used
  std::vector<OpInfo> ops;
  std::vector<uint32_t> deps;
  std::vector<std::vector<uint32_t>> stream_ops;  // op indices per stream, in order
  std::vector<P2PDesc> p2p;
};

struct Actor {
  uint32_t program = 0;
  uint32_t rep_rank = 0;                       // a rank this actor plays
  uint64_t weight = 1;                         // ranks it stands for
  bool real = false;                           // progress comes from the inbox
  std::vector<uint32_t> slot_comm;             // engine communicator per slot
  std::vector<uint32_t> slot_canonical;        // first slot naming the same communicator
  std::vector<uint32_t> peer_actor;            // per P2P desc of its program
  std::vector<uint8_t> peer_same_node;         // per P2P desc
};

struct EngineComm {
  std::vector<uint32_t> members;               // actor ids
  CommShape shape;
  graph::CommKind kind = graph::COMM_KIND_UNSPECIFIED;
  std::string name;
};

struct EngineWorld {
  std::vector<ProgramInfo> programs;
  std::vector<Actor> actors;
  std::vector<EngineComm> comms;
  std::vector<uint32_t> actor_of_rank;         // rank -> actor
  uint32_t classes = 0;                        // colour classes found (== actors when reduced)
  bool reduced = false;
  std::string reduction_note;                  // why not reduced (or "" when reduced / off)
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_ENGINE_WORLD_H_
