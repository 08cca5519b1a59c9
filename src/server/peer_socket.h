// Whether the client of a request that is answered in one piece (not streamed) has gone. The
// HTTP library in Debian 12 (cpp-httplib 0.11) tells a handler nothing about its connection
// until it writes, and a response sent whole writes only at the end; so the handler finds its
// own connection's socket by the client's address and asks the socket directly.
#pragma once

#include <string>

namespace dl::server {

class PeerSocket {
  public:
    // The socket of this process connected to (addr, port); none found leaves it unwatched.
    PeerSocket(const std::string& addr, int port);
    // True once the client has closed its end (or reset it). A socket that is no longer the
    // client's (closed and its number reused) is never taken for a closed one.
    bool closed() const;
    bool watched() const { return fd_ >= 0; }

  private:
    bool still_the_peer() const;
    int fd_ = -1;
    std::string addr_;
    int port_ = 0;
};

}  // namespace dl::server
