// SHA-1 (FIPS 180-4) of a byte string, as 40 lowercase hex digits. Used only
// to recognise PyTorch's hashed group names; not for security. Pure, thread-safe.
#ifndef PRISM_DAEMON_RENDEZVOUS_SHA1_H_
#define PRISM_DAEMON_RENDEZVOUS_SHA1_H_

#include <string>
#include <string_view>

namespace prism::rendezvous {

std::string Sha1Hex(std::string_view data);

}  // namespace prism::rendezvous

#endif  // PRISM_DAEMON_RENDEZVOUS_SHA1_H_
