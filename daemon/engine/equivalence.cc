#include "daemon/engine/equivalence.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace prism::engine {
namespace {

// Work the symmetry analysis may spend (elementary steps) before it gives up
// and replays every rank: hostile graphs must not make it hang.
constexpr uint64_t kAnalysisBudget = uint64_t{1} << 30;

// Dense ids for vectors of integers, in first-seen order (deterministic).
template <typename T>
class BasicInterner {
 public:
  uint32_t Id(const std::vector<T>& key) {
    auto [it, fresh] = ids_.try_emplace(key, static_cast<uint32_t>(ids_.size()));
    return it->second;
  }
  size_t size() const { return ids_.size(); }

 private:
  absl::flat_hash_map<std::vector<T>, uint32_t> ids_;
};
using Interner = BasicInterner<uint64_t>;

// The sorted distinct colours of c's members, into `set`: each colour once
// (`seen`, one flag per colour, is all zero on entry and on return), then
// only the few distinct colours sorted, not every member.
void DistinctMemberColours(absl::Span<const uint32_t> members, const std::vector<uint32_t>& colour,
                           std::vector<uint8_t>& seen, std::vector<uint64_t>& set) {
  set.clear();
  for (uint32_t m : members)
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
std::string JoinSlots(const RankWorld& full, Reduction& r) {
  const uint32_t classes = static_cast<uint32_t>(r.rep.size());
  r.slot_offset.assign(classes + 1, 0);
  for (uint32_t a = 0; a < classes; ++a)
    r.slot_offset[a + 1] = r.slot_offset[a] + static_cast<uint32_t>(full.slots(r.rep[a]).size());
  r.uf = UnionFind(r.slot_offset[classes]);
  absl::flat_hash_map<uint32_t, std::vector<uint32_t>> roles;  // comm -> the (class, slot) nodes naming it
  uint64_t work = 0;
  for (uint32_t a = 0; a < classes; ++a) {
    const auto rep = full.slots(r.rep[a]);
    for (uint32_t s = 0; s < rep.size(); ++s) {
      const uint32_t c = rep[s];
      auto [it, fresh] = roles.try_emplace(c);
      if (fresh) {
        for (uint32_t m : full.members(c)) {
          const auto member = full.slots(m);
          work += 1 + member.size();
          if (work > kAnalysisBudget) return "the symmetry analysis would take too long for this graph";
          for (uint32_t t = 0; t < member.size(); ++t)
            if (member[t] == c) it->second.push_back(Node(r, r.colour[m], t));
        }
        std::sort(it->second.begin(), it->second.end());
        it->second.erase(std::unique(it->second.begin(), it->second.end()), it->second.end());
      }
      for (uint32_t node : it->second) r.uf.Union(Node(r, a, s), node);
    }
  }
  for (uint32_t a = 0; a < classes; ++a) {
    const auto rep = full.slots(r.rep[a]);
    for (uint32_t s = 0; s < rep.size(); ++s)
      for (uint32_t t = 0; t < s; ++t)
        if (rep[s] != rep[t] && r.uf.Find(Node(r, a, s)) == r.uf.Find(Node(r, a, t)))
          return absl::StrCat("rank ", r.rep[a], " has two communicators that play the same role");
  }
  return "";
}

// Every send/recv pair must map one-to-one between the classes (see docs).
std::string CheckP2P(const RankWorld& full, Reduction& r) {
  uint64_t work = 0;
  for (uint32_t rank = 0; rank < full.ranks(); ++rank) {
    const auto peers = full.peers(rank);
    const auto& descs = full.programs[full.program(rank)].p2p;
    work += descs.size() * (descs.size() + 1) * 2;
    if (work > kAnalysisBudget) return "the send/recv symmetry check would take too long for this graph";
    const uint32_t ca = r.colour[rank];
    for (size_t d = 0; d < descs.size(); ++d) {
      const uint32_t peer = peers[d];
      const uint32_t root = r.uf.Find(Node(r, ca, descs[d].slot));
      for (size_t e = 0; e < descs.size(); ++e)  // one peer per (role, peer class, direction)
        if (descs[e].is_send == descs[d].is_send && r.uf.Find(Node(r, ca, descs[e].slot)) == root &&
            r.colour[peers[e]] == r.colour[peer] && peers[e] != peer)
          return absl::StrCat("rank ", rank, " exchanges with two ranks of one class on one communicator");
      const auto peer_peers = full.peers(peer);
      const auto& pdescs = full.programs[full.program(peer)].p2p;
      for (size_t e = 0; e < pdescs.size(); ++e)  // the peer's matching op addresses this rank
        if (pdescs[e].is_send != descs[d].is_send &&
            r.uf.Find(Node(r, r.colour[peer], pdescs[e].slot)) == root && r.colour[peer_peers[e]] == ca &&
            peer_peers[e] != rank)
          return absl::StrCat("rank ", rank, "'s send/recv partner ", peer, " addresses another rank");
    }
  }
  return "";
}

// Builds the class-level communicators; checks they are consistent.
std::string BuildComms(const RankWorld& full, Reduction& r, EngineWorld& out) {
  const uint32_t classes = static_cast<uint32_t>(r.rep.size());
  r.reduced_comm.assign(r.slot_offset[classes], UINT32_MAX);
  std::vector<std::vector<uint64_t>> colour_sets;
  std::vector<uint8_t> seen(classes, 0);
  for (uint32_t a = 0; a < classes; ++a) {
    const auto rep = full.slots(r.rep[a]);
    for (uint32_t s = 0; s < rep.size(); ++s) {
      const uint32_t root = r.uf.Find(Node(r, a, s));
      const uint32_t src = rep[s];
      std::vector<uint64_t> set;
      DistinctMemberColours(full.members(src), r.colour, seen, set);
      if (r.reduced_comm[root] == UINT32_MAX) {
        r.reduced_comm[root] = static_cast<uint32_t>(out.comms.size());
        EngineComm c;
        c.members.assign(set.begin(), set.end());
        c.shape = full.shapes[src];
        c.kind = full.topology.kind(src);
        c.name = full.CommName(src);
        out.comms.push_back(std::move(c));
        colour_sets.push_back(std::move(set));
        continue;
      }
      const uint32_t id = r.reduced_comm[root];
      if (colour_sets[id] != set || out.comms[id].shape != full.shapes[src])
        return absl::StrCat("communicators ", out.comms[id].name, " and ", full.CommName(src),
                            " play one role but differ in shape or members");
    }
  }
  return "";
}

}  // namespace

std::vector<uint32_t> RefineColours(const RankWorld& full) {
  const uint32_t n = full.ranks();
  std::vector<uint32_t> colour(n);
  Interner initial;
  // A real rank, or one kept alone (a late rank), starts in a colour of its own.
  for (uint32_t r = 0; r < n; ++r) {
    const bool own = full.real[r] || (!full.alone.empty() && full.alone[r]);
    colour[r] = initial.Id({full.program(r), own ? r + uint64_t{1} : 0});
  }
  absl::flat_hash_map<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>, uint32_t> shapes;
  std::vector<uint32_t> shape_id(full.communicators());
  for (uint32_t c = 0; c < full.communicators(); ++c) {
    const CommShape& s = full.shapes[c];
    shape_id[c] = shapes.try_emplace({s.ranks, s.nodes, s.min_per_node, s.max_per_node},
                                     static_cast<uint32_t>(shapes.size())).first->second;
  }
  // The work of one round (every rank's signature, every communicator's members).
  uint64_t round_work = full.communicators();
  for (uint32_t r = 0; r < n; ++r) round_work += 1 + 3 * full.slots(r).size() + 2 * full.peers(r).size();
  for (uint32_t c = 0; c < full.communicators(); ++c) round_work += full.members(c).size();
  size_t count = initial.size();
  uint64_t work = 0;
  for (;;) {
    work += round_work;
    if (work > kAnalysisBudget) {  // give up: every rank its own colour
      for (uint32_t r = 0; r < n; ++r) colour[r] = r;
      return colour;
    }
    // A communicator's member-colour set, as an id: its colour when every
    // member has one colour (most communicators: no set built), else count
    // + the set's interned id. Only equality of ids matters (signatures
    // compare them), so any one-to-one labelling gives the same colouring.
    Interner sets;
    std::vector<uint32_t> set_id(full.communicators());
    std::vector<uint8_t> seen(count, 0);
    std::vector<uint64_t> set;
    for (uint32_t c = 0; c < full.communicators(); ++c) {
      const auto members = full.members(c);
      const uint32_t first = colour[members.front()];
      const bool one_colour =
          std::all_of(members.begin() + 1, members.end(), [&](uint32_t m) { return colour[m] == first; });
      if (one_colour) {
        set_id[c] = first;
        continue;
      }
      DistinctMemberColours(members, colour, seen, set);
      set_id[c] = static_cast<uint32_t>(count + sets.Id(set));
    }
    BasicInterner<uint32_t> sigs;  // every entry below fits 32 bits: half the bytes to hash and compare
    std::vector<uint32_t> next(n);
    std::vector<uint32_t> sig;
    for (uint32_t r = 0; r < n; ++r) {
      const auto slots = full.slots(r);
      const auto canonical = full.canonical(r);
      const auto peers = full.peers(r);
      const auto same_node = full.peers_same_node(r);
      sig.assign({colour[r]});
      for (size_t s = 0; s < slots.size(); ++s)
        sig.insert(sig.end(), {set_id[slots[s]], shape_id[slots[s]], canonical[s]});
      for (size_t d = 0; d < peers.size(); ++d) sig.insert(sig.end(), {colour[peers[d]], uint32_t{same_node[d]}});
      next[r] = sigs.Id(sig);
    }
    colour.swap(next);
    if (sigs.size() == count) break;  // refinement only splits: same count means stable
    count = sigs.size();
  }
  return colour;
}

EngineWorld ReduceWorld(RankWorld& full) {
  Reduction r;
  r.colour = RefineColours(full);
  const uint32_t classes = 1 + *std::max_element(r.colour.begin(), r.colour.end());
  if (classes == full.ranks()) {
    EngineWorld every = EveryRankWorld(full);
    every.reduction_note = "no two ranks are provably symmetric";
    return every;
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
    EngineWorld every = EveryRankWorld(full);
    every.classes = classes;
    every.reduction_note = absl::StrCat("replaying every rank: ", why);
    return every;
  }
  out.programs = std::move(full.programs);
  out.classes = classes;
  out.reduced = true;
  out.actor_of_rank = r.colour;
  out.actors.resize(classes);
  for (uint32_t a = 0; a < classes; ++a) {
    const uint32_t rep = r.rep[a];
    Actor& x = out.actors[a];
    x.program = full.program(rep);
    x.rep_rank = rep;
    x.weight = r.weight[a];
    x.real = full.real[rep] != 0;
    const auto canonical = full.canonical(rep);
    x.slot_canonical.assign(canonical.begin(), canonical.end());
    const auto slots = full.slots(rep);
    for (uint32_t s = 0; s < slots.size(); ++s) x.slot_comm.push_back(r.reduced_comm[r.uf.Find(Node(r, a, s))]);
    for (uint32_t peer : full.peers(rep)) x.peer_actor.push_back(r.colour[peer]);
    const auto same = full.peers_same_node(rep);
    x.peer_same_node.assign(same.begin(), same.end());
  }
  return out;
}

}  // namespace prism::engine
