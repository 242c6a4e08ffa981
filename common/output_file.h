// An output file (a graph, a trace) written so that another local user
// cannot redirect it: the bytes go to "<path>.tmp.<pid>" in the target's own
// directory, created exclusively (O_CREAT | O_EXCL | O_NOFOLLOW: a symlink or
// file planted at that name is never followed or truncated), then renamed
// over `path`. A leftover temporary of this user is removed first; one owned
// by another user is refused, naming it.
//
// Usage: Create(), write to stream(), Commit(). Destroyed uncommitted, the
// temporary is removed. Header-only; one object per thread.
#ifndef PRISM_COMMON_OUTPUT_FILE_H_
#define PRISM_COMMON_OUTPUT_FILE_H_

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ext/stdio_filebuf.h>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace prism {

class OutputFile {
 public:
  // "<path>.tmp.<pid>".
  static std::string TemporaryPathFor(const std::string& path) { return absl::StrCat(path, ".tmp.", getpid()); }

  // `what` names the file in messages ("trace file", "graph file").
  static absl::StatusOr<std::unique_ptr<OutputFile>> Create(const std::string& path, const std::string& what) {
    const std::string tmp = TemporaryPathFor(path);
    int fd = OpenExclusive(tmp);
    if (fd < 0 && errno == EEXIST) {
      struct stat st {};
      if (lstat(tmp.c_str(), &st) == 0 && st.st_uid != geteuid()) {
        return absl::PermissionDeniedError(absl::StrCat(
            "cannot create ", what, " ", tmp, ": a file of uid ", st.st_uid, " is already there (planted by another "
            "user?); remove it or write into a directory only you can write to"));
      }
      unlink(tmp.c_str());  // this user's leftover (an interrupted run)
      fd = OpenExclusive(tmp);
    }
    if (fd < 0) {
      return absl::UnavailableError(absl::StrCat("cannot create ", what, " ", tmp, ": ", std::strerror(errno)));
    }
    return std::unique_ptr<OutputFile>(new OutputFile(path, tmp, what, fd));
  }

  ~OutputFile() {
    if (!committed_) unlink(tmp_.c_str());
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::ostream& stream() { return stream_; }
  const std::string& temporary_path() const { return tmp_; }

  // Flushes, closes and renames the temporary over the target.
  absl::Status Commit() {
    stream_.flush();
    const bool written = static_cast<bool>(stream_);
    const bool closed = buf_.close() != nullptr;
    if (!written || !closed) {
      return absl::UnavailableError(absl::StrCat("cannot write ", what_, " ", tmp_, " (disk full?)"));
    }
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
      return absl::UnavailableError(absl::StrCat("cannot rename ", tmp_, " to ", path_, ": ", std::strerror(errno)));
    }
    committed_ = true;
    return absl::OkStatus();
  }

 private:
  OutputFile(std::string path, std::string tmp, std::string what, int fd)
      : path_(std::move(path)), tmp_(std::move(tmp)), what_(std::move(what)), buf_(fd, std::ios::out, 1 << 16),
        stream_(&buf_) {}

  static int OpenExclusive(const std::string& tmp) {
    return open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  }

  std::string path_, tmp_, what_;
  __gnu_cxx::stdio_filebuf<char> buf_;  // owns the descriptor
  std::ostream stream_;
  bool committed_ = false;
};

}  // namespace prism

#endif  // PRISM_COMMON_OUTPUT_FILE_H_
