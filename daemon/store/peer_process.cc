#include "daemon/store/peer_process.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace prism::store {
namespace {

// /proc/net/tcp prints an IPv4 address as the hex of its in-memory u32
// (network order bytes read as a host-order integer) and the port in hex.
std::string ProcNetAddress(uint32_t ip, uint16_t port) {
  const uint32_t net = ((ip & 0xff) << 24) | ((ip & 0xff00) << 8) | ((ip >> 8) & 0xff00) | (ip >> 24);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%08X:%04X", net, port);
  return buf;
}

struct SocketLine {
  std::string uid, inode;
};

// The /proc/net/tcp line of the socket whose local end is `local` and remote
// end `remote`.
std::optional<SocketLine> FindSocketLine(const std::string& local, const std::string& remote) {
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // header
  const std::string pair = local + " " + remote;  // as the kernel prints them, one space apart
  while (std::getline(in, line)) {
    if (line.find(pair) == std::string::npos) continue;  // the many other sockets: no parsing
    std::istringstream fields(line);
    std::string slot, loc, rem, state, queues, timer, retr, uid, timeout, inode;
    fields >> slot >> loc >> rem >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
    if (loc == local && rem == remote) return SocketLine{uid, inode};
  }
  return std::nullopt;
}

// The same facts from the kernel's socket diagnostics, by exact 4-tuple (one
// lookup, however many sockets the host has); nullopt when netlink refuses.
std::optional<SocketLine> SockDiagLookup(uint32_t client_ip, uint16_t client_port, uint32_t server_ip,
                                         uint16_t server_port) {
  const int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return std::nullopt;
  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } query{};
  query.header.nlmsg_len = sizeof(query);
  query.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  query.header.nlmsg_flags = NLM_F_REQUEST;
  query.request.sdiag_family = AF_INET;
  query.request.sdiag_protocol = IPPROTO_TCP;
  query.request.idiag_states = ~0u;
  query.request.id.idiag_sport = htons(client_port);
  query.request.id.idiag_dport = htons(server_port);
  query.request.id.idiag_src[0] = htonl(client_ip);
  query.request.id.idiag_dst[0] = htonl(server_ip);
  query.request.id.idiag_cookie[0] = query.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  std::optional<SocketLine> found;
  alignas(nlmsghdr) char reply[8192];
  if (sendto(fd, &query, sizeof(query), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) ==
      static_cast<ssize_t>(sizeof(query))) {
    const ssize_t n = recv(fd, reply, sizeof(reply), 0);
    const auto* h = reinterpret_cast<const nlmsghdr*>(reply);
    if (n > 0 && NLMSG_OK(h, static_cast<size_t>(n)) && h->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
      const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
      found = SocketLine{std::to_string(m->idiag_uid), std::to_string(m->idiag_inode)};
    }
  }
  close(fd);
  return found;
}

bool HoldsSocket(const std::string& pid, const std::string& target) {
  const std::string dir = "/proc/" + pid + "/fd";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return false;
  bool found = false;
  char link[64];
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const ssize_t n = readlink((dir + "/" + e->d_name).c_str(), link, sizeof(link) - 1);
    if (n > 0 && std::string(link, n) == target) {
      found = true;
      break;
    }
  }
  closedir(d);
  return found;
}

PeerProcess Describe(int pid) {
  PeerProcess p;
  p.pid = pid;
  std::ifstream env("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::string var;
  while (std::getline(env, var, '\0')) {
    if (var.rfind("RANK=", 0) == 0) {
      char* end = nullptr;
      const long r = std::strtol(var.c_str() + 5, &end, 10);
      if (end != var.c_str() + 5 && *end == '\0' && r >= 0) p.rank = static_cast<int>(r);
    }
  }
  std::ifstream cmd("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::getline(cmd, p.command, '\0');
  return p;
}


// The process holding the socket of inode `inode`.
std::optional<PeerProcess> FindHolder(const std::string& inode) {
  const std::string target = "socket:[" + inode + "]";
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return std::nullopt;
  std::optional<PeerProcess> found;
  while (dirent* e = readdir(proc)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    if (HoldsSocket(e->d_name, target)) {
      found = Describe(std::atoi(e->d_name));
      break;
    }
  }
  closedir(proc);
  return found;
}

}  // namespace

PeerInfo DescribePeer(uint32_t client_ip, uint16_t client_port, uint32_t server_ip, uint16_t server_port,
                      bool find_process) {
  PeerInfo info;
  auto line = SockDiagLookup(client_ip, client_port, server_ip, server_port);
  if (!line) line = FindSocketLine(ProcNetAddress(client_ip, client_port), ProcNetAddress(server_ip, server_port));
  if (!line) return info;
  char* end = nullptr;
  const unsigned long uid = std::strtoul(line->uid.c_str(), &end, 10);
  if (end != line->uid.c_str() && *end == '\0') info.uid = static_cast<uint32_t>(uid);
  if (find_process && line->inode != "0") info.process = FindHolder(line->inode);
  return info;
}

std::optional<PeerProcess> FindPeerProcess(uint32_t client_ip, uint16_t client_port, uint32_t server_ip,
                                           uint16_t server_port) {
  return DescribePeer(client_ip, client_port, server_ip, server_port, true).process;
}

}  // namespace prism::store
