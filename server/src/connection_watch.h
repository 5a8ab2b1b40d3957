// Whether the client of an HTTP exchange has closed its connection, so that the server stops
// generating for nobody (docs/serving.md). cpp-httplib 0.11 does not hand its handlers the socket:
// the watch finds it among the process's descriptors by the connection's two addresses, which
// name one open TCP connection (it stays open while its handler runs), then asks the kernel
// whether the peer has shut it down. Linux only (/proc/self/fd, POLLRDHUP); elsewhere it never
// reports a close, and a stream still notices one when a write fails.
#pragma once

#include <string>

namespace ree::server {

class ConnectionWatch {
 public:
  ConnectionWatch(std::string remote_addr, int remote_port, int local_port);

  // True once the peer has closed or reset the connection.
  bool peerClosed();

 private:
  int findSocket() const;

  std::string remote_addr_;
  int remote_port_ = -1;
  int local_port_ = -1;
  bool searched_ = false;
  int fd_ = -1;  // not owned; -1 when not found
};

}  // namespace ree::server
