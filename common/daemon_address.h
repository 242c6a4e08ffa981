// prismd's default gRPC address, one definition for prismd and the plugin:
// a per-user Unix socket, so that two users on one machine never share (or
// squat) one name.
//
//   unix://$XDG_RUNTIME_DIR/prismd.sock   when XDG_RUNTIME_DIR is an absolute path
//   unix:///tmp/prismd-$UID.sock          otherwise
//
// scripts/prism computes the same address. Header-only; thread-safe as long
// as nobody changes the environment concurrently.
#ifndef PRISM_COMMON_DAEMON_ADDRESS_H_
#define PRISM_COMMON_DAEMON_ADDRESS_H_

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace prism {

// The socket path of the default address (no "unix://").
inline std::string DefaultDaemonSocketPath() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime != nullptr && runtime[0] == '/') return std::string(runtime) + "/prismd.sock";
  return "/tmp/prismd-" + std::to_string(static_cast<unsigned long>(getuid())) + ".sock";
}

inline std::string DefaultDaemonAddress() { return "unix://" + DefaultDaemonSocketPath(); }

}  // namespace prism

#endif  // PRISM_COMMON_DAEMON_ADDRESS_H_
