#include "proto/graph_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace prism::graph {
namespace {

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t GetU32(std::string_view data, size_t off) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(data[off + i])) << (8 * i);
  return v;
}

absl::Status Invalid(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("invalid graph: ", std::string(what),
                                                 " (regenerate it with prism-graphgen)"));
}

absl::Status ValidateCommunicators(const Graph& g) {
  const uint64_t world = g.ranks_size();
  std::vector<uint8_t> seen(world, 0);
  for (int i = 0; i < g.communicators_size(); ++i) {
    const Communicator& c = g.communicators(i);
    if (c.id() != static_cast<uint32_t>(i))
      return Invalid(absl::StrCat("communicator ", i, " has id ", c.id()));
    if (c.members_size() == 0) return Invalid(absl::StrCat("communicator ", i, " has no members"));
    for (uint32_t m : c.members()) {
      if (m >= world)
        return Invalid(absl::StrCat("communicator ", i, " names rank ", m, " of a ", world, "-rank world"));
      if (seen[m]) return Invalid(absl::StrCat("communicator ", i, " lists rank ", m, " twice"));
      seen[m] = 1;
    }
    for (uint32_t m : c.members()) seen[m] = 0;
    if (c.has_split() && c.split().parent() >= static_cast<uint32_t>(i))
      return Invalid(absl::StrCat("communicator ", i, " is split from ", c.split().parent(),
                                  ", which is not created before it"));
  }
  return absl::OkStatus();
}

absl::Status ValidateProgram(const Graph& g, const Program& p, int index) {
  if (p.id() != static_cast<uint32_t>(index))
    return Invalid(absl::StrCat("program ", index, " has id ", p.id()));
  const uint32_t slots = p.comm_slot_names_size();
  for (int k = 0; k < p.ops_size(); ++k) {
    const Op& op = p.ops(k);
    const std::string where = absl::StrCat("program ", index, " op ", k);
    if (op.stream() >= p.streams()) return Invalid(absl::StrCat(where, " uses stream ", op.stream(),
                                                                " of ", p.streams()));
    for (uint32_t d : op.deps())
      if (d >= static_cast<uint32_t>(k)) return Invalid(absl::StrCat(where, " depends on later op ", d));
    uint32_t slot = 0;
    switch (op.kind_case()) {
      case Op::kCollective: slot = op.collective().comm_slot(); break;
      case Op::kSend: slot = op.send().comm_slot(); break;
      case Op::kRecv: slot = op.recv().comm_slot(); break;
      case Op::KIND_NOT_SET: return Invalid(absl::StrCat(where, " has no kind"));
      default: continue;
    }
    if (slot >= slots) return Invalid(absl::StrCat(where, " uses comm slot ", slot, " of ", slots));
  }
  (void)g;
  return absl::OkStatus();
}

// Per-rank checks: program index, slot count, membership, peers in range.
absl::Status ValidateRanks(const Graph& g) {
  const auto& comms = g.communicators();
  const uint32_t nodes = g.cluster().nodes();
  const uint32_t gpn = g.cluster().gpus_per_node();
  for (int r = 0; r < g.ranks_size(); ++r) {
    const Rank& rk = g.ranks(r);
    if (rk.rank() != static_cast<uint32_t>(r)) return Invalid(absl::StrCat("rank ", r, " has id ", rk.rank()));
    if (rk.program() >= static_cast<uint32_t>(g.programs_size()))
      return Invalid(absl::StrCat("rank ", r, " uses program ", rk.program(), " of ", g.programs_size()));
    if (rk.node() >= nodes || rk.local_gpu() >= gpn)
      return Invalid(absl::StrCat("rank ", r, " is placed on node ", rk.node(), " gpu ", rk.local_gpu(),
                                  " of a ", nodes, "x", gpn, " cluster"));
    const Program& p = g.programs(rk.program());
    if (rk.comm_slots_size() != p.comm_slot_names_size())
      return Invalid(absl::StrCat("rank ", r, " maps ", rk.comm_slots_size(), " comm slots, its program has ",
                                  p.comm_slot_names_size()));
    for (uint32_t c : rk.comm_slots()) {
      if (c >= static_cast<uint32_t>(comms.size()))
        return Invalid(absl::StrCat("rank ", r, " names communicator ", c, " of ", comms.size()));
    }
  }
  return absl::OkStatus();
}

// Every slot communicator contains its rank; peers and roots are below the
// smallest communicator size a slot maps to. Linear in ranks x slots plus
// total membership plus ops.
absl::Status ValidateMembership(const Graph& g) {
  const auto& comms = g.communicators();
  absl::flat_hash_set<uint64_t> membership;
  for (const Communicator& c : comms)
    for (uint32_t m : c.members()) membership.insert((uint64_t{c.id()} << 32) | m);
  std::vector<std::vector<uint32_t>> min_slot_size(g.programs_size());
  for (int i = 0; i < g.programs_size(); ++i)
    min_slot_size[i].assign(g.programs(i).comm_slot_names_size(), UINT32_MAX);
  for (int r = 0; r < g.ranks_size(); ++r) {
    const Rank& rk = g.ranks(r);
    for (int s = 0; s < rk.comm_slots_size(); ++s) {
      const uint32_t c = rk.comm_slots(s);
      if (!membership.contains((uint64_t{c} << 32) | static_cast<uint32_t>(r)))
        return Invalid(absl::StrCat("rank ", r, " slot ", s, " names communicator ", c,
                                    " which does not contain it"));
      uint32_t& m = min_slot_size[rk.program()][s];
      m = std::min<uint32_t>(m, comms[c].members_size());
    }
  }
  for (int i = 0; i < g.programs_size(); ++i) {
    const Program& p = g.programs(i);
    for (int k = 0; k < p.ops_size(); ++k) {
      const Op& op = p.ops(k);
      uint32_t slot = 0, peer = 0;
      if (op.has_send()) { slot = op.send().comm_slot(); peer = op.send().peer(); }
      else if (op.has_recv()) { slot = op.recv().comm_slot(); peer = op.recv().peer(); }
      else if (op.has_collective()) { slot = op.collective().comm_slot(); peer = op.collective().root(); }
      else continue;
      const uint32_t size = min_slot_size[i][slot];
      if (size != UINT32_MAX && peer >= size)
        return Invalid(absl::StrCat("program ", i, " op ", k, " names peer/root ", peer,
                                    " in a communicator of ", size, " ranks"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGraph(const Graph& g) {
  if (g.ranks_size() == 0) return Invalid("no ranks");
  const Cluster& cl = g.cluster();
  if (cl.nodes() == 0 || cl.gpus_per_node() == 0) return Invalid("cluster has zero nodes or GPUs per node");
  if (static_cast<uint64_t>(cl.nodes()) * cl.gpus_per_node() < static_cast<uint64_t>(g.ranks_size()))
    return Invalid(absl::StrCat("cluster of ", cl.nodes(), "x", cl.gpus_per_node(), " GPUs cannot hold ",
                                g.ranks_size(), " ranks"));
  if (cl.nic().count() > 0 && cl.nic().bandwidth_bps() == 0) return Invalid("NIC bandwidth is zero");
  if (g.programs_size() == 0) return Invalid("no programs");
  if (auto s = ValidateCommunicators(g); !s.ok()) return s;
  for (int i = 0; i < g.programs_size(); ++i)
    if (auto s = ValidateProgram(g, g.programs(i), i); !s.ok()) return s;
  if (auto s = ValidateRanks(g); !s.ok()) return s;
  return ValidateMembership(g);
}

absl::StatusOr<std::string> EncodeGraph(const Graph& graph) {
  std::string out(kGraphMagic, sizeof(kGraphMagic));
  PutU32(out, kGraphFormatVersion);
  PutU32(out, 0);
  Graph copy_if_needed;
  const Graph* g = &graph;
  if (graph.format_version() != kGraphFormatVersion) {
    copy_if_needed = graph;
    copy_if_needed.set_format_version(kGraphFormatVersion);
    g = &copy_if_needed;
  }
  if (!g->AppendToString(&out)) return absl::InternalError("graph serialisation failed");
  return out;
}

absl::StatusOr<Graph> DecodeGraph(std::string_view data, std::string_view origin) {
  if (data.size() < kGraphHeaderBytes || std::memcmp(data.data(), kGraphMagic, sizeof(kGraphMagic)) != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(origin), " is not a Prism graph file (no PRISMGRF header); make one with prism-graphgen"));
  const uint32_t version = GetU32(data, 8);
  if (version != kGraphFormatVersion)
    return absl::InvalidArgumentError(absl::StrCat(std::string(origin), " has graph format version ", version,
                                                   ", this build reads version ", kGraphFormatVersion,
                                                   "; regenerate it with this build's prism-graphgen"));
  Graph g;
  const std::string_view body = data.substr(kGraphHeaderBytes);
  if (!g.ParseFromArray(body.data(), static_cast<int>(body.size())))
    return absl::InvalidArgumentError(absl::StrCat(std::string(origin), " is truncated or corrupt (protobuf parse failed)"));
  if (auto s = ValidateGraph(g); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat(std::string(origin), ": ", s.message()));
  return g;
}

absl::Status WriteGraphFile(const Graph& graph, const std::string& path) {
  auto bytes = EncodeGraph(graph);
  if (!bytes.ok()) return bytes.status();
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return absl::UnavailableError(absl::StrCat("cannot create ", tmp, ": ", std::strerror(errno)));
    f.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      return absl::UnavailableError(absl::StrCat("cannot write ", tmp, " (disk full?)"));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    std::remove(tmp.c_str());
    return absl::UnavailableError(absl::StrCat("cannot rename ", tmp, " to ", path, ": ", err));
  }
  return absl::OkStatus();
}

absl::StatusOr<Graph> ReadGraphFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open graph file ", path, ": ", std::strerror(errno),
                                                  " (make one with prism-graphgen)"));
  const std::streamoff size = f.tellg();
  if (size < 0 || static_cast<uint64_t>(size) > kMaxGraphFileBytes)
    return absl::InvalidArgumentError(absl::StrCat(path, " is larger than the 1 GiB graph limit"));
  std::string data(static_cast<size_t>(size), '\0');
  f.seekg(0);
  f.read(data.data(), size);
  if (!f) return absl::UnavailableError(absl::StrCat("cannot read ", path));
  return DecodeGraph(data, path);
}

}  // namespace prism::graph
