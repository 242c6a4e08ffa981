#include "plugin/shared_ring.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace prism::plugin {

// The first page of the memfd. Each end's counter and the flag it arms sit
// on a cache line of their own.
struct SharedRing::Control {
  static constexpr uint64_t kMagic = 0x676e6952'6d736950ull;  // "PismRing"
  static constexpr uint32_t kVersion = 3;  // 3: the header count
  uint64_t magic;
  uint32_t version;
  uint32_t reserved;
  uint64_t capacity;
  alignas(64) std::atomic<uint64_t> written;
  std::atomic<uint32_t> writer_waiting;  // armed by the writer: ring the space bell
  alignas(64) std::atomic<uint64_t> consumed;
  std::atomic<uint32_t> reader_waiting;  // armed by the reader: ring the data bell
  alignas(64) std::atomic<uint64_t> headers;  // headers the writer has announced
};
static_assert(sizeof(std::atomic<uint64_t>) == 8, "the ring's layout is shared between processes");

namespace {

constexpr size_t kControlBytes = 4096;
constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "the ring's counters and flags are shared between processes: they must be lock-free");

void CloseAll(const std::vector<int>& fds) {
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
}

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

SharedRing::SharedRing(std::array<int, kFdCount> fds, void* base, size_t mapped, uint64_t capacity)
    : fds_(fds), base_(base), mapped_(mapped), capacity_(capacity),
      control_(static_cast<Control*>(base)), data_(static_cast<char*>(base) + kControlBytes) {}

SharedRing::~SharedRing() {
  munmap(base_, mapped_);
  CloseAll({fds_.begin(), fds_.end()});
}

std::unique_ptr<SharedRing> SharedRing::Create(uint64_t capacity, const std::string& label, std::string* why) {
  static_assert(sizeof(Control) <= kControlBytes);
  if (capacity < kMinCapacity || capacity > kMaxCapacity) {
    *why = "ring capacity " + std::to_string(capacity) + " is outside [" + std::to_string(kMinCapacity) + ", " +
           std::to_string(kMaxCapacity) + "]";
    return nullptr;
  }
  std::array<int, kFdCount> fds{memfd_create(label.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING),
                                eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
  const size_t bytes = kControlBytes + capacity;
  void* base = MAP_FAILED;
  if (fds[0] < 0) {
    *why = Errno("memfd_create");
  } else if (fds[1] < 0 || fds[2] < 0) {
    *why = Errno("eventfd for the ring's bells");
  } else if (ftruncate(fds[0], static_cast<off_t>(bytes)) != 0) {
    *why = Errno("ftruncate of the ring's memfd");
  } else if (fcntl(fds[0], F_ADD_SEALS, kSeals) != 0) {  // its size fixed for good: no SIGBUS at either end
    *why = Errno("sealing the ring's memfd");
  } else {
    base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fds[0], 0);
    if (base == MAP_FAILED) *why = Errno("mmap of the ring's memfd");
  }
  if (base == MAP_FAILED) {
    CloseAll({fds.begin(), fds.end()});
    return nullptr;
  }
  Control* c = new (base) Control{};  // a fresh memfd reads as zeros
  c->magic = Control::kMagic;
  c->version = Control::kVersion;
  c->capacity = capacity;
  return std::unique_ptr<SharedRing>(new SharedRing(fds, base, bytes, capacity));
}

std::unique_ptr<SharedRing> SharedRing::Attach(std::vector<int> fds, std::string* why) {
  if (fds.size() != kFdCount) {
    *why = "a peer passed " + std::to_string(fds.size()) + " fds for its ring, not " + std::to_string(kFdCount) +
           " (are both ends the same Prism build?)";
    CloseAll(fds);
    return nullptr;
  }
  struct stat st {};
  if (fstat(fds[0], &st) != 0) {
    *why = Errno("fstat of a peer's ring");
    CloseAll(fds);
    return nullptr;
  }
  if ((fcntl(fds[0], F_GET_SEALS) & kSeals) != kSeals) {
    *why = "a peer's ring is not sealed against resizing (a shrink would crash this process); not a ring of this plugin";
    CloseAll(fds);
    return nullptr;
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kControlBytes + kMinCapacity || size > kControlBytes + kMaxCapacity) {
    *why = "a peer's ring has " + std::to_string(size) + " bytes, not a ring of this plugin";
    CloseAll(fds);
    return nullptr;
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fds[0], 0);
  if (base == MAP_FAILED) {
    *why = Errno("mmap of a peer's ring");
    CloseAll(fds);
    return nullptr;
  }
  const Control* c = static_cast<const Control*>(base);
  if (c->magic != Control::kMagic || c->version != Control::kVersion || c->capacity != size - kControlBytes) {
    *why = "a peer's ring is not of this plugin's layout (magic, version " + std::to_string(c->version) +
           " or capacity differ; are both ends the same Prism build?)";
    munmap(base, size);
    CloseAll(fds);
    return nullptr;
  }
  return std::unique_ptr<SharedRing>(new SharedRing({fds[0], fds[1], fds[2]}, base, size, size - kControlBytes));
}

size_t SharedRing::Write(const char* src, size_t len) {
  const uint64_t written = control_->written.load(std::memory_order_relaxed);  // only this end stores it
  const uint64_t consumed = control_->consumed.load(std::memory_order_acquire);
  const uint64_t held = std::min<uint64_t>(written - consumed, capacity_);  // clamped: the peer's counter is not trusted
  const size_t n = static_cast<size_t>(std::min<uint64_t>(len, capacity_ - held));
  for (size_t done = 0; done < n;) {  // published piece by piece: the reader copies out behind this copy
    const size_t piece = std::min(n - done, kPublishBytes);
    CopyIn(written + done, src + done, piece);
    done += piece;
    control_->written.store(written + done, std::memory_order_seq_cst);
    RingIfArmed(control_->reader_waiting, data_bell());
  }
  return n;
}

size_t SharedRing::Read(char* dst, size_t len) {
  const uint64_t consumed = control_->consumed.load(std::memory_order_relaxed);  // only this end stores it
  const uint64_t written = control_->written.load(std::memory_order_acquire);
  const uint64_t held = std::min<uint64_t>(written - consumed, capacity_);  // clamped: the peer's counter is not trusted
  const size_t n = static_cast<size_t>(std::min<uint64_t>(len, held));
  for (size_t done = 0; done < n;) {  // freed piece by piece: the writer refills behind this copy
    const size_t piece = std::min(n - done, kPublishBytes);
    CopyOut(consumed + done, dst + done, piece);
    done += piece;
    control_->consumed.store(consumed + done, std::memory_order_seq_cst);
    RingIfArmed(control_->writer_waiting, space_bell());
  }
  return n;
}

void SharedRing::CopyIn(uint64_t at_byte, const char* src, size_t n) {
  const size_t at = static_cast<size_t>(at_byte % capacity_);
  const size_t first = std::min(n, static_cast<size_t>(capacity_) - at);
  std::memcpy(data_ + at, src, first);
  std::memcpy(data_, src + first, n - first);
}

void SharedRing::CopyOut(uint64_t at_byte, char* dst, size_t n) const {
  const size_t at = static_cast<size_t>(at_byte % capacity_);
  const size_t first = std::min(n, static_cast<size_t>(capacity_) - at);
  std::memcpy(dst, data_ + at, first);
  std::memcpy(dst + first, data_, n - first);
}

uint64_t SharedRing::Readable() const {
  const uint64_t held =
      control_->written.load(std::memory_order_seq_cst) - control_->consumed.load(std::memory_order_relaxed);
  return std::min<uint64_t>(held, capacity_);
}

void SharedRing::AnnounceHeader() { control_->headers.fetch_add(1, std::memory_order_seq_cst); }

uint64_t SharedRing::HeadersAnnounced() const { return control_->headers.load(std::memory_order_seq_cst); }

void SharedRing::ArmReader() {
  control_->reader_waiting.store(1, std::memory_order_seq_cst);
  if (Readable() > 0) RingIfArmed(control_->reader_waiting, data_bell());  // the writer may have missed the flag
}

void SharedRing::ArmWriter() {
  control_->writer_waiting.store(1, std::memory_order_seq_cst);
  const uint64_t held = control_->written.load(std::memory_order_relaxed) -
                        control_->consumed.load(std::memory_order_seq_cst);
  if (held < capacity_) RingIfArmed(control_->writer_waiting, space_bell());
}

void SharedRing::RingIfArmed(std::atomic<uint32_t>& flag, int bell) {
  if (flag.load(std::memory_order_seq_cst) != 0 && flag.exchange(0, std::memory_order_seq_cst) != 0) Ring(bell);
}

void SharedRing::Ring(int bell) {
  const uint64_t one = 1;
  ssize_t r = write(bell, &one, sizeof(one));  // EAGAIN only when the count is full: it is rung already
  (void)r;
}

void SharedRing::DrainReaderBell() { Drain(data_bell()); }

void SharedRing::DrainWriterBell() { Drain(space_bell()); }

void SharedRing::Drain(int bell) {
  uint64_t count = 0;
  ssize_t r = read(bell, &count, sizeof(count));  // EAGAIN: not rung
  (void)r;
}

}  // namespace prism::plugin
