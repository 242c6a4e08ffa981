#include "plugin/daemon_owner.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace prism::plugin {

std::optional<std::string> UnixSocketPath(const std::string& address) {
  constexpr const char* kAbsolute = "unix://";
  constexpr const char* kRelative = "unix:";
  if (address.rfind(kAbsolute, 0) == 0) return address.substr(std::strlen(kAbsolute));
  if (address.rfind(kRelative, 0) == 0) return address.substr(std::strlen(kRelative));
  return std::nullopt;
}

bool ParseUidList(const std::string& text, std::vector<uint32_t>* out) {
  out->clear();
  if (!text.empty() && text.back() == ',') return false;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    char* stop = nullptr;
    errno = 0;
    const unsigned long long uid = std::strtoull(item.c_str(), &stop, 10);
    if (item.empty() || errno != 0 || *stop != '\0' || uid > 0xFFFFFFFEull || item[0] == '-') return false;
    out->push_back(static_cast<uint32_t>(uid));
    begin = end + 1;
  }
  return true;
}

std::string CheckDaemonOwner(const std::string& address, uid_t self, const std::vector<uint32_t>& trusted) {
  const std::optional<std::string> path = UnixSocketPath(address);
  if (!path) return "";
  sockaddr_un sa{};
  if (path->empty() || path->size() >= sizeof(sa.sun_path)) return "";  // gRPC refuses it with its own error
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path->data(), path->size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  std::string why;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) == 0) {
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      why = "cannot read the credentials of prismd at " + address + " (SO_PEERCRED: " + std::strerror(errno) +
            "); refusing to use it";
    } else if (cred.uid != self && std::find(trusted.begin(), trusted.end(), cred.uid) == trusted.end()) {
      why = "prismd at " + address + " runs as uid " + std::to_string(cred.uid) + " (pid " +
            std::to_string(cred.pid) + "), not as this user (uid " + std::to_string(self) +
            "): refusing to talk to another user's daemon (or a squatter on that path); start your own prismd, "
            "or set PRISM_DAEMON_UIDS=" + std::to_string(cred.uid) + " to trust it";
    }
  }
  close(fd);
  return why;
}

}  // namespace prism::plugin
