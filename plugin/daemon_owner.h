// Whom the plugin trusts as prismd. Before it opens a session over a Unix
// socket, the process listening there must run as this process's user or as
// a uid named in PRISM_DAEMON_UIDS (SO_PEERCRED): another user's daemon, or
// a squatter on the socket path, never receives a rank's traffic or answers
// for its virtual peers. TCP addresses carry no credentials and are not
// checked (prismd listens on a per-user Unix socket by default).
//
// Pure functions apart from the socket they open and close; thread-safe.
#ifndef PRISM_PLUGIN_DAEMON_OWNER_H_
#define PRISM_PLUGIN_DAEMON_OWNER_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace prism::plugin {

// "unix:///abs/path" -> "/abs/path", "unix:rel" -> "rel"; nullopt for any
// other scheme (dns:, ipv4:, host:port).
std::optional<std::string> UnixSocketPath(const std::string& address);

// Parses "1000,1001" (empty: none). False on anything else.
bool ParseUidList(const std::string& text, std::vector<uint32_t>* out);

// Empty when the daemon at `address` may be trusted: a non-Unix address, or
// a Unix socket whose listener runs as `self` or as one of `trusted`. Else a
// one-line reason naming both uids and the fix. A socket nobody listens on
// is not this check's business (empty: the caller's connect fails anyway).
std::string CheckDaemonOwner(const std::string& address, uid_t self, const std::vector<uint32_t>& trusted);

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_DAEMON_OWNER_H_
