// Finding this process's listening socket and widening its backlog (see listen_socket.h).
#include "server/listen_socket.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>

namespace dl::server {

namespace {

// Whether fd is a socket listening on `port` (IPv4 or IPv6).
bool listens_on(int fd, int port) {
    int accepting = 0;
    socklen_t len = sizeof accepting;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 || !accepting)
        return false;
    sockaddr_storage ss{};
    len = sizeof ss;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
    if (ss.ss_family == AF_INET)
        return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port) == port;
    if (ss.ss_family == AF_INET6)
        return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port) == port;
    return false;
}

}  // namespace

bool widen_backlog(int port, int backlog) {
    DIR* d = opendir("/proc/self/fd");
    if (!d) return false;
    bool done = false;
    while (dirent* e = readdir(d)) {
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == dirfd(d)) continue;
        // On Linux, listen() on a listening socket sets its backlog anew.
        if (listens_on((int)fd, port) && ::listen((int)fd, backlog) == 0) {
            done = true;
            break;
        }
    }
    closedir(d);
    return done;
}

}  // namespace dl::server
