// A byte stream between two processes on one host through shared memory:
// the payload path of a real-peer comm whose ends share a host
// (PRISM_SAME_HOST_RING; docs/plugin.md, "Real peers").
//
// One writer and one reader, each in its own process (or thread), each with
// its own mapping of one memfd: a control page, then `capacity` data bytes
// used as a ring. Write copies what fits, Read copies what is there; neither
// blocks. The bytes come out in the order they went in, like a stream
// socket's. Counters only grow (64-bit, never wrap):
//   written  - consumed = bytes readable,  capacity - that = bytes writable.
// The writer stores `written` after copying; the reader loads it before
// copying out, then stores `consumed` (sequentially consistent: see bells).
//
// Bells, for a thread that sleeps in poll() rather than spin: two eventfds
// travel with the memfd. ArmReader() asks the writer to ring the data bell
// (readable) once there is something to read, ArmWriter() the reader to
// ring the space bell once there is room; either rings at once if that is
// already so. The armed end sets a flag in the control page and then looks
// at the counter; the other end stores the counter and then looks at the
// flag (both sequentially consistent), so a wake-up is never lost. Only an
// armed end costs the other a system call (one write per wake-up).
//
// Headers: the socket beside the ring carries each message's header. The
// writer counts a header here (AnnounceHeader) before it writes it to the
// socket, so that a reader whose count of headers read equals
// HeadersAnnounced() knows the socket holds no new one and skips the read
// (one system call per idle poll of a posted receive). A header counted and
// not written yet costs the reader a read that finds nothing, as before.
//
// Ownership: a SharedRing owns its mapping and its three fds; the memory
// lives while either end's mapping does, so a peer that exits or crashes
// never takes the bytes away from the other (no SIGBUS: the memfd is sealed
// against resizing, and Attach refuses one that is not). Thread-safety: one thread writes and one thread reads at a time
// (the comm's step lock serialises each end).
#ifndef PRISM_PLUGIN_SHARED_RING_H_
#define PRISM_PLUGIN_SHARED_RING_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace prism::plugin {

class SharedRing {
 public:
  // Smallest and largest capacity Create and Attach accept.
  static constexpr uint64_t kMinCapacity = 4096;
  static constexpr uint64_t kMaxCapacity = uint64_t{1} << 32;
  // Write and Read publish their progress every this many bytes, so that
  // the other end (another process, another core) copies a message out
  // while it is still being copied in: a message costs about one copy's
  // time, not two.
  static constexpr size_t kPublishBytes = 64 * 1024;
  // The fds that travel to the other end, in this order: the memfd, the
  // data bell, the space bell.
  static constexpr size_t kFdCount = 3;

  // A new ring of `capacity` bytes in a fresh memfd (named for `label` in
  // /proc/PID/fd) with its two bells; null with `*why` when the capacity
  // is out of range or memfd_create / ftruncate / mmap / eventfd fail.
  static std::unique_ptr<SharedRing> Create(uint64_t capacity, const std::string& label, std::string* why);
  // Maps the ring behind `fds` (as fds() gave them, e.g. received over a
  // Unix socket) and takes ownership of them, also on failure. Null with
  // `*why` when they are not kFdCount fds of a ring of this layout (magic,
  // version, size).
  static std::unique_ptr<SharedRing> Attach(std::vector<int> fds, std::string* why);

  ~SharedRing();
  SharedRing(const SharedRing&) = delete;
  SharedRing& operator=(const SharedRing&) = delete;

  // Writer: copies up to `len` bytes of `src` in; returns how many (0: full).
  size_t Write(const char* src, size_t len);
  // Reader: copies up to `len` bytes out into `dst`; returns how many (0: empty).
  size_t Read(char* dst, size_t len);
  // Reader: bytes readable now.
  uint64_t Readable() const;

  // Writer: one more message header is on its way through the socket (call
  // before writing it). Reader: how many the writer has announced.
  void AnnounceHeader();
  uint64_t HeadersAnnounced() const;

  // Reader, before sleeping: data_bell() becomes readable once something is
  // readable (at once if something already is).
  void ArmReader();
  // Writer, before sleeping: space_bell() becomes readable once there is
  // room (at once if there already is).
  void ArmWriter();
  // After a sleep: empties the bell this end armed (one non-blocking read;
  // never the other end's bell, whose ring would be lost).
  void DrainReaderBell();
  void DrainWriterBell();
  int data_bell() const { return fds_[1]; }
  int space_bell() const { return fds_[2]; }

  const std::array<int, kFdCount>& fds() const { return fds_; }
  uint64_t capacity() const { return capacity_; }

 private:
  struct Control;
  SharedRing(std::array<int, kFdCount> fds, void* base, size_t mapped, uint64_t capacity);
  // `n` bytes at stream position `at_byte` (wrapping at the capacity).
  void CopyIn(uint64_t at_byte, const char* src, size_t n);
  void CopyOut(uint64_t at_byte, char* dst, size_t n) const;
  // Rings `bell` when the other end armed `flag`.
  void RingIfArmed(std::atomic<uint32_t>& flag, int bell);
  static void Ring(int bell);
  static void Drain(int bell);

  std::array<int, kFdCount> fds_;
  void* base_;
  size_t mapped_;
  uint64_t capacity_;
  Control* control_;
  char* data_;
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_SHARED_RING_H_
