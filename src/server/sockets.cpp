// This process's own sockets (see sockets.h).
#include "server/sockets.h"

#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>

namespace dl::server {

namespace {

// The port of a socket address (IPv4 or IPv6), or -1.
int port_of(const sockaddr_storage& ss) {
    if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
    if (ss.ss_family == AF_INET6)
        return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
    return -1;
}

int local_port(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -1;
    return port_of(ss);
}

bool listening(int fd) {
    int accepting = 0;
    socklen_t len = sizeof accepting;
    return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) == 0 && accepting;
}

}  // namespace

void for_each_fd(const std::function<bool(int fd)>& visit) {
    DIR* d = opendir("/proc/self/fd");
    if (!d) return;
    while (dirent* e = readdir(d)) {
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == dirfd(d)) continue;
        if (!visit((int)fd)) break;
    }
    closedir(d);
}

uint64_t socket_inode(int fd) {
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
    return (uint64_t)st.st_ino;
}

int connected_port(int fd) {
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0 || port_of(peer) < 0)
        return -1;
    return local_port(fd);
}

bool widen_backlog(int port, int backlog) {
    bool done = false;
    for_each_fd([&](int fd) {
        // On Linux, listen() on a listening socket sets its backlog anew.
        if (socket_inode(fd) && listening(fd) && local_port(fd) == port &&
            ::listen(fd, backlog) == 0)
            done = true;
        return !done;
    });
    return done;
}

bool client_closed(int fd) {
    if (fd < 0) return false;
    pollfd pfd{fd, POLLIN | POLLRDHUP, 0};
    if (poll(&pfd, 1, 0) <= 0) return false;
    if (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
    // Readable: the client's end closed (recv sees the end) or it sent more bytes (left unread).
    char c;
    const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE));
}

}  // namespace dl::server
