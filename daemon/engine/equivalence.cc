#include "daemon/engine/equivalence.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace prism::engine {
namespace {

// Work the symmetry analysis may spend (elementary steps) before it gives up
// and replays every rank: hostile graphs must not make it hang.
constexpr uint64_t kAnalysisBudget = uint64_t{1} << 30;

// Dense ids for vectors of integers, in first-seen order (deterministic).
class Interner {
 public:
  uint32_t Id(const std::vector<uint64_t>& key) {
    auto [it, fresh] = ids_.try_emplace(key, static_cast<uint32_t>(ids_.size()));
    return it->second;
  }
  size_t size() const { return ids_.size(); }

 private:
  absl::flat_hash_map<std::vector<uint64_t>, uint32_t> ids_;
};

// The sorted distinct colours of c's members, into `set`: each colour once
// (`seen`, one flag per colour, is all zero on entry and on return), then
// only the few distinct colours sorted, not every member.
void DistinctMemberColours(const EngineComm& c, const std::vector<uint32_t>& colour, std::vector<uint8_t>& seen,
                           std::vector<uint64_t>& set) {
  set.clear();
  for (uint32_t m : c.members)
    if (!seen[colour[m]]) {
      seen[colour[m]] = 1;
      set.push_back(colour[m]);
    }
  for (uint64_t k : set) seen[k] = 0;
  std::sort(set.begin(), set.end());
}

class UnionFind {
 public:
  explicit UnionFind(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0u); }
  uint32_t Find(uint32_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void Union(uint32_t a, uint32_t b) {
    a = Find(a), b = Find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }

 private:
  std::vector<uint32_t> parent_;
};

struct Reduction {
  std::vector<uint32_t> colour;
  std::vector<uint32_t> rep;          // class -> representative rank
  std::vector<uint64_t> weight;
  std::vector<uint32_t> slot_offset;  // class -> first (class, slot) node
  UnionFind uf{0};
  std::vector<uint32_t> reduced_comm; // union-find root -> reduced comm id
};

uint32_t Node(const Reduction& r, uint32_t cls, uint32_t slot) { return r.slot_offset[cls] + slot; }

// Unions (A, s) with (B, s') whenever a member of class B names A's slot-s
// communicator through its slot s'. Each communicator's members are walked
// once, however many classes name it (every class names the world).
// Returns "" or why reduction is unsafe.
std::string JoinSlots(const EngineWorld& full, Reduction& r) {
  const uint32_t classes = static_cast<uint32_t>(r.rep.size());
  r.slot_offset.assign(classes + 1, 0);
  for (uint32_t a = 0; a < classes; ++a)
    r.slot_offset[a + 1] = r.slot_offset[a] + static_cast<uint32_t>(full.actors[r.rep[a]].slot_comm.size());
  r.uf = UnionFind(r.slot_offset[classes]);
  absl::flat_hash_map<uint32_t, std::vector<uint32_t>> roles;  // comm -> the (class, slot) nodes naming it
  uint64_t work = 0;
  for (uint32_t a = 0; a < classes; ++a) {
    const Actor& rep = full.actors[r.rep[a]];
    for (uint32_t s = 0; s < rep.slot_comm.size(); ++s) {
      const uint32_t c = rep.slot_comm[s];
      auto [it, fresh] = roles.try_emplace(c);
      if (fresh) {
        for (uint32_t m : full.comms[c].members) {
          const Actor& member = full.actors[m];
          work += 1 + member.slot_comm.size();
          if (work > kAnalysisBudget) return "the symmetry analysis would take too long for this graph";
          for (uint32_t t = 0; t < member.slot_comm.size(); ++t)
            if (member.slot_comm[t] == c) it->second.push_back(Node(r, r.colour[m], t));
        }
        std::sort(it->second.begin(), it->second.end());
        it->second.erase(std::unique(it->second.begin(), it->second.end()), it->second.end());
      }
      for (uint32_t node : it->second) r.uf.Union(Node(r, a, s), node);
    }
  }
  for (uint32_t a = 0; a < classes; ++a) {
    const Actor& rep = full.actors[r.rep[a]];
    for (uint32_t s = 0; s < rep.slot_comm.size(); ++s)
      for (uint32_t t = 0; t < s; ++t)
        if (rep.slot_comm[s] != rep.slot_comm[t] && r.uf.Find(Node(r, a, s)) == r.uf.Find(Node(r, a, t)))
          return absl::StrCat("rank ", r.rep[a], " has two communicators that play the same role");
  }
  return "";
}

// Every send/recv pair must map one-to-one between the classes (see docs).
std::string CheckP2P(const EngineWorld& full, Reduction& r) {
  uint64_t work = 0;
  for (uint32_t rank = 0; rank < full.actors.size(); ++rank) {
    const Actor& a = full.actors[rank];
    const auto& descs = full.programs[a.program].p2p;
    work += descs.size() * (descs.size() + 1) * 2;
    if (work > kAnalysisBudget) return "the send/recv symmetry check would take too long for this graph";
    const uint32_t ca = r.colour[rank];
    for (size_t d = 0; d < descs.size(); ++d) {
      const uint32_t peer = a.peer_actor[d];
      const uint32_t root = r.uf.Find(Node(r, ca, descs[d].slot));
      for (size_t e = 0; e < descs.size(); ++e)  // one peer per (role, peer class, direction)
        if (descs[e].is_send == descs[d].is_send && r.uf.Find(Node(r, ca, descs[e].slot)) == root &&
            r.colour[a.peer_actor[e]] == r.colour[peer] && a.peer_actor[e] != peer)
          return absl::StrCat("rank ", rank, " exchanges with two ranks of one class on one communicator");
      const Actor& p = full.actors[peer];
      const auto& pdescs = full.programs[p.program].p2p;
      for (size_t e = 0; e < pdescs.size(); ++e)  // the peer's matching op addresses this rank
        if (pdescs[e].is_send != descs[d].is_send &&
            r.uf.Find(Node(r, r.colour[peer], pdescs[e].slot)) == root && r.colour[p.peer_actor[e]] == ca &&
            p.peer_actor[e] != rank)
          return absl::StrCat("rank ", rank, "'s send/recv partner ", peer, " addresses another rank");
    }
  }
  return "";
}

// Builds the class-level communicators; checks they are consistent.
std::string BuildComms(const EngineWorld& full, Reduction& r, EngineWorld& out) {
  const uint32_t classes = static_cast<uint32_t>(r.rep.size());
  r.reduced_comm.assign(r.slot_offset[classes], UINT32_MAX);
  std::vector<std::vector<uint64_t>> colour_sets;
  std::vector<uint8_t> seen(classes, 0);
  for (uint32_t a = 0; a < classes; ++a) {
    const Actor& rep = full.actors[r.rep[a]];
    for (uint32_t s = 0; s < rep.slot_comm.size(); ++s) {
      const uint32_t root = r.uf.Find(Node(r, a, s));
      const EngineComm& src = full.comms[rep.slot_comm[s]];
      std::vector<uint64_t> set;
      DistinctMemberColours(src, r.colour, seen, set);
      if (r.reduced_comm[root] == UINT32_MAX) {
        r.reduced_comm[root] = static_cast<uint32_t>(out.comms.size());
        EngineComm c;
        c.members.assign(set.begin(), set.end());
        c.shape = src.shape;
        c.kind = src.kind;
        c.name = src.name;
        out.comms.push_back(std::move(c));
        colour_sets.push_back(std::move(set));
        continue;
      }
      const uint32_t id = r.reduced_comm[root];
      if (colour_sets[id] != set || out.comms[id].shape != src.shape)
        return absl::StrCat("communicators ", out.comms[id].name, " and ", src.name,
                            " play one role but differ in shape or members");
    }
  }
  return "";
}

}  // namespace

std::vector<uint32_t> RefineColours(const graph::Graph& graph, const EngineWorld& full) {
  const size_t n = full.actors.size();
  std::vector<uint32_t> colour(n);
  Interner initial;
  for (size_t r = 0; r < n; ++r)
    colour[r] = initial.Id({full.actors[r].program, full.actors[r].real ? r + 1 : 0});
  Interner shapes;
  std::vector<uint32_t> shape_id(full.comms.size());
  for (size_t c = 0; c < full.comms.size(); ++c) {
    const CommShape& s = full.comms[c].shape;
    shape_id[c] = shapes.Id({s.ranks, s.nodes, s.min_per_node, s.max_per_node});
  }
  size_t count = initial.size();
  uint64_t work = 0;
  for (;;) {
    work += full.comms.size();
    for (const Actor& a : full.actors) work += 1 + 3 * a.slot_comm.size() + 2 * a.peer_actor.size();
    for (const EngineComm& c : full.comms) work += c.members.size();
    if (work > kAnalysisBudget) {  // give up: every rank its own colour
      for (size_t r = 0; r < n; ++r) colour[r] = static_cast<uint32_t>(r);
      return colour;
    }
    // A communicator's member-colour set, as an id: its colour when every
    // member has one colour (most communicators: no set built), else count
    // + the set's interned id. Only equality of ids matters (signatures
    // compare them), so any one-to-one labelling gives the same colouring.
    Interner sets;
    std::vector<uint32_t> set_id(full.comms.size());
    std::vector<uint8_t> seen(count, 0);
    std::vector<uint64_t> set;
    for (size_t c = 0; c < full.comms.size(); ++c) {
      const std::vector<uint32_t>& members = full.comms[c].members;
      const uint32_t first = colour[members.front()];
      const bool one_colour =
          std::all_of(members.begin() + 1, members.end(), [&](uint32_t m) { return colour[m] == first; });
      if (one_colour) {
        set_id[c] = first;
        continue;
      }
      DistinctMemberColours(full.comms[c], colour, seen, set);
      set_id[c] = static_cast<uint32_t>(count + sets.Id(set));
    }
    Interner sigs;
    std::vector<uint32_t> next(n);
    std::vector<uint64_t> sig;
    for (size_t r = 0; r < n; ++r) {
      const Actor& a = full.actors[r];
      sig.assign({colour[r]});
      for (size_t s = 0; s < a.slot_comm.size(); ++s)
        sig.insert(sig.end(), {set_id[a.slot_comm[s]], shape_id[a.slot_comm[s]], a.slot_canonical[s]});
      for (size_t d = 0; d < a.peer_actor.size(); ++d)
        sig.insert(sig.end(), {colour[a.peer_actor[d]], a.peer_same_node[d]});
      next[r] = sigs.Id(sig);
    }
    colour.swap(next);
    if (sigs.size() == count) break;  // refinement only splits: same count means stable
    count = sigs.size();
  }
  (void)graph;
  return colour;
}

EngineWorld ReduceWorld(const graph::Graph& graph, EngineWorld full) {
  Reduction r;
  r.colour = RefineColours(graph, full);
  const uint32_t classes = 1 + *std::max_element(r.colour.begin(), r.colour.end());
  full.classes = classes;
  if (classes == full.actors.size()) {
    full.reduction_note = "no two ranks are provably symmetric";
    return full;
  }
  r.rep.assign(classes, UINT32_MAX);
  r.weight.assign(classes, 0);
  for (uint32_t rank = 0; rank < r.colour.size(); ++rank) {
    if (r.rep[r.colour[rank]] == UINT32_MAX) r.rep[r.colour[rank]] = rank;
    ++r.weight[r.colour[rank]];
  }
  EngineWorld out;
  std::string why = JoinSlots(full, r);
  if (why.empty()) why = BuildComms(full, r, out);
  if (why.empty()) why = CheckP2P(full, r);
  if (!why.empty()) {
    full.reduction_note = absl::StrCat("replaying every rank: ", why);
    return full;
  }
  out.programs = std::move(full.programs);
  out.classes = classes;
  out.reduced = true;
  out.actor_of_rank = r.colour;
  out.actors.resize(classes);
  for (uint32_t a = 0; a < classes; ++a) {
    const Actor& rep = full.actors[r.rep[a]];
    Actor& x = out.actors[a];
    x.program = rep.program;
    x.rep_rank = rep.rep_rank;
    x.weight = r.weight[a];
    x.real = rep.real;
    x.slot_canonical = rep.slot_canonical;
    for (uint32_t s = 0; s < rep.slot_comm.size(); ++s)
      x.slot_comm.push_back(r.reduced_comm[r.uf.Find(Node(r, a, s))]);
    for (size_t d = 0; d < rep.peer_actor.size(); ++d) x.peer_actor.push_back(r.colour[rep.peer_actor[d]]);
    x.peer_same_node = rep.peer_same_node;
  }
  return out;
}

}  // namespace prism::engine
