#include "connection_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>

namespace ree::server {
namespace {

// The address and port of a socket address (IPv4 or IPv6), as httplib writes them.
bool addressOf(const sockaddr_storage& address, std::string* ip, int* port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) == nullptr) return false;
    *port = ntohs(in->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    if (inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text)) == nullptr) return false;
    *port = ntohs(in6->sin6_port);
  } else {
    return false;
  }
  *ip = text;
  return true;
}

}  // namespace

ConnectionWatch::ConnectionWatch(std::string remote_addr, int remote_port, int local_port)
    : remote_addr_(std::move(remote_addr)), remote_port_(remote_port), local_port_(local_port) {}

int ConnectionWatch::findSocket() const {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    sockaddr_storage peer{}, local{};
    socklen_t peer_size = sizeof(peer), local_size = sizeof(local);
    std::string peer_ip, local_ip;
    int peer_port = -1, local_port = -1;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0 ||
        getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_size) != 0 ||
        !addressOf(peer, &peer_ip, &peer_port) || !addressOf(local, &local_ip, &local_port)) {
      continue;
    }
    if (peer_port == remote_port_ && local_port == local_port_ && peer_ip == remote_addr_) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

bool ConnectionWatch::peerClosed() {
  if (!searched_) {
    fd_ = findSocket();
    searched_ = true;
  }
  if (fd_ < 0) return false;
  pollfd watch{fd_, POLLRDHUP, 0};
  if (poll(&watch, 1, 0) != 1) return false;
  return (watch.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace ree::server
