// This process's own sockets, found through /proc/self/fd. cpp-httplib (Debian 12's, a shared
// library) hands a handler nothing of its connection and listens with a backlog of 5; the server
// finds the sockets themselves to do what the library does not.
#pragma once

#include <cstdint>
#include <functional>

namespace dl::server {

// Calls visit(fd) for each descriptor this process has open, until it returns false.
void for_each_fd(const std::function<bool(int fd)>& visit);

// The socket's inode number (what /proc/self/fd names it by), or 0 where fd is not a socket.
uint64_t socket_inode(int fd);

// The local port of a TCP socket that is connected to a client (not listening), or -1.
int connected_port(int fd);

// Listens again with this backlog on this process's socket that listens on `port`; false where
// there is none. A burst of clients connecting at once would overflow a backlog of 5, and some
// of them were then reset.
bool widen_backlog(int port, int backlog);

// True once the client of a connected socket has closed its end (or reset it). Bytes it sent
// and nobody read yet are left unread.
bool client_closed(int fd);

}  // namespace dl::server
