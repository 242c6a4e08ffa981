#include "graphgen/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/limits.h"

namespace prism::graphgen {
namespace {

// Refuses anything but a regular file small enough to read.
absl::Status CheckKind(int fd, const std::string& path, const std::string& what, const InputKind& kind) {
  struct stat st {};
  if (fstat(fd, &st) != 0)
    return absl::InvalidArgumentError(absl::StrCat("cannot stat ", what, " '", path, "': ", std::strerror(errno)));
  if (S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' is a directory; give the path of ", kind.expected));
  if (!S_ISREG(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' is not a regular file (a device, FIFO or ",
                                                   "socket); give the path of ", kind.expected));
  if (static_cast<uint64_t>(st.st_size) > kind.max_bytes)
    return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' is ", st.st_size, " bytes; ", what,
                                                   "s are at most ", kind.max_bytes >> 20,
                                                   " MiB (is it the right file?)"));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadAll(int fd, const std::string& path, const std::string& what,
                                    const InputKind& kind) {
  std::string text;
  char buf[65536];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return absl::InvalidArgumentError(absl::StrCat("cannot read ", what, " '", path, "': ", std::strerror(errno)));
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > kind.max_bytes)  // grew while we read
      return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' is larger than ", kind.max_bytes >> 20,
                                                     " MiB"));
    text.append(buf, static_cast<size_t>(n));
  }
  if (kind.text && text.find('\0') != std::string::npos)
    return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' is not a text file (it holds NUL bytes); ",
                                                   "give the path of ", kind.expected));
  return text;
}

}  // namespace

absl::StatusOr<std::string> ReadInputFile(const std::string& path, const std::string& what) {
  return ReadInputFile(path, what, InputKind{});
}

absl::StatusOr<std::string> ReadInputFile(const std::string& path, const std::string& what, const InputKind& kind) {
  // O_NONBLOCK: a FIFO must not block the open (it is refused by CheckKind).
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open ", what, " '", path, "': ", std::strerror(errno)));
  absl::Status checked = CheckKind(fd, path, what, kind);
  absl::StatusOr<std::string> text =
      checked.ok() ? ReadAll(fd, path, what, kind) : absl::StatusOr<std::string>(checked);
  close(fd);
  return text;
}

}  // namespace prism::graphgen
