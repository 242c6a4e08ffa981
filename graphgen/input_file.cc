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
absl::Status CheckKind(int fd, const std::string& path, const std::string& what) {
  struct stat st {};
  if (fstat(fd, &st) != 0)
    return absl::InvalidArgumentError(absl::StrCat("cannot stat ", what, " '", path, "': ", std::strerror(errno)));
  if (S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' is a directory; give the path of a YAML file"));
  if (!S_ISREG(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' is not a regular file (a device, FIFO or ",
                                                   "socket); give the path of a YAML file"));
  if (static_cast<uint64_t>(st.st_size) > limits::kMaxInputFileBytes)
    return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' is ", st.st_size, " bytes; ", what,
                                                   "s are at most 16 MiB (is it the right file?)"));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadAll(int fd, const std::string& path, const std::string& what) {
  std::string text;
  char buf[65536];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return absl::InvalidArgumentError(absl::StrCat("cannot read ", what, " '", path, "': ", std::strerror(errno)));
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > limits::kMaxInputFileBytes)  // grew while we read
      return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' is larger than 16 MiB"));
    text.append(buf, static_cast<size_t>(n));
  }
  if (text.find('\0') != std::string::npos)
    return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' is not a text file (it holds NUL bytes); ",
                                                   "give the path of a YAML file"));
  return text;
}

}  // namespace

absl::StatusOr<std::string> ReadInputFile(const std::string& path, const std::string& what) {
  // O_NONBLOCK: a FIFO must not block the open (it is refused by CheckKind).
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open ", what, " '", path, "': ", std::strerror(errno)));
  absl::Status kind = CheckKind(fd, path, what);
  absl::StatusOr<std::string> text = kind.ok() ? ReadAll(fd, path, what) : absl::StatusOr<std::string>(kind);
  close(fd);
  return text;
}

}  // namespace prism::graphgen
