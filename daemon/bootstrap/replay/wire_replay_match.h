// Internal to wire_replay.cc: what prismd's bytes of one connection must be
// (recorded bytes + renamed fields), the consistent renamings learned while
// comparing, and the rewriting of the real side's recorded bytes. Pure data
// structures; not thread-safe (the replay loop owns them).
#ifndef PRISM_DAEMON_BOOTSTRAP_REPLAY_WIRE_REPLAY_MATCH_H_
#define PRISM_DAEMON_BOOTSTRAP_REPLAY_WIRE_REPLAY_MATCH_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "daemon/bootstrap/wire_profile.h"

namespace prism::bootstrap::replay {

enum class FieldKind { kAddress, kHash, kHandleId, kModelLink };

struct Field {
  size_t offset = 0;
  size_t size = 0;
  FieldKind kind = FieldKind::kAddress;
};

// A consistent renaming old -> new of byte strings of one kind.
class Renaming {
 public:
  // Empty when consistent (and learns the pair); else what is wrong.
  std::string Learn(const std::string& old_value, const std::string& new_value);
  void Seed(const std::string& old_value, const std::string& new_value);
  // New value for `old_value`, or nullptr when unknown or unchanged.
  const std::string* Changed(const std::string& old_value) const;
  const std::string* Find(const std::string& old_value) const;
  bool IsNewValue(const std::string& new_value) const;
  size_t size() const { return forward_.size(); }

 private:
  std::map<std::string, std::string> forward_, backward_;
};

struct Renamings {
  Renaming addresses;   // 28-byte sockaddrs of prismd's endpoints
  Renaming hashes;      // 8-byte commHash-derived values
  Renaming handles;     // 8-byte broker conn ids (never rewritten)
  Renaming real;        // real-side listeners: old -> replayer's (seeded)
};

// prismd's expected bytes on one connection: recorded bytes with the real
// listener addresses replaced, and the renamed fields in offset order.
struct ExpectedStream {
  std::string bytes;
  std::vector<Field> fields;
  std::vector<size_t> frame_starts;   // offsets of the int32 length of frames
};

bool LooksLikeSockAddr(const char* p);

// `opened_by_daemon`: the stream starts with the 12-byte connect header.
ExpectedStream BuildExpected(const std::string& recorded, bool opened_by_daemon,
                             const WireProfile& profile, const Renaming& real);

// Compares what prismd sent on one connection, as it arrives.
class StreamChecker {
 public:
  explicit StreamChecker(ExpectedStream expected) : exp_(std::move(expected)) {}
  // Appends bytes and checks as far as possible. Returns the first problem
  // (empty = none so far), formatted "byte O of S (frame...): ...".
  std::string Add(const char* data, size_t size, Renamings& names);
  size_t checked() const { return checked_; }
  size_t received() const { return got_.size(); }
  size_t expected_size() const { return exp_.bytes.size(); }
  uint64_t bytes_exact() const { return exact_; }
  uint64_t bytes_renamed() const { return renamed_; }

 private:
  std::string Where(size_t offset) const;
  std::string CheckField(const Field& f, Renamings& names);
  ExpectedStream exp_;
  std::string got_;
  size_t checked_ = 0;
  size_t next_field_ = 0;
  uint64_t exact_ = 0, renamed_ = 0;
};

// Rewrites the real side's recorded stream in place for the chunk
// [begin, end): every known changed address, real listener and hash that
// overlaps the chunk (it may extend past `end`; those bytes are not sent yet).
void RewriteRealChunk(std::string& stream, size_t begin, size_t end, const Renamings& names);

std::string Hex(const std::string& bytes, size_t offset, size_t size);

}  // namespace prism::bootstrap::replay

#endif  // PRISM_DAEMON_BOOTSTRAP_REPLAY_WIRE_REPLAY_MATCH_H_
