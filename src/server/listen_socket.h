// The listening socket's backlog. cpp-httplib (Debian 12's, a shared library) listens with a
// backlog of 5 connections waiting to be accepted: a burst of clients connecting at once
// overflows it, and under load some of them were then reset. The server finds its own listening
// socket and listens again with a longer backlog.
#pragma once

namespace dl::server {

// Listens again with this backlog on this process's socket that listens on `port`; false where
// there is none.
bool widen_backlog(int port, int backlog);

}  // namespace dl::server
