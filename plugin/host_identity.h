// Which real peers share this host, so that they can skip the TCP stack.
//
// Two plugin instances may talk over an abstract Unix-domain socket exactly
// when they run under the same kernel boot and in the same network
// namespace (abstract socket names are scoped by the network namespace).
// Each instance puts its key in its listen handles (RealListenHandle
// host_key); a dialer whose own key matches connects over the Unix socket,
// any other over TCP. Pure functions, no state; thread-safe.
#ifndef PRISM_PLUGIN_HOST_IDENTITY_H_
#define PRISM_PLUGIN_HOST_IDENTITY_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace prism::plugin {

// The key of (boot id, network namespace): FNV-1a 64 of both texts, never 0.
// 0 when either text is empty (unknown: always TCP).
uint64_t SameHostKeyOf(std::string_view boot_id, std::string_view netns);

// This process's key: /proc/sys/kernel/random/boot_id and the link
// /proc/self/ns/net (e.g. "net:[4026531840]"); 0 where either is unreadable.
uint64_t SameHostKey();

// The abstract socket name (without its leading NUL) a listener with
// `listen_id` accepts same-host peers on, e.g. "prism-net/6b8b4567ce1c0001".
std::string SameHostSocketName(uint64_t listen_id);

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_HOST_IDENTITY_H_
