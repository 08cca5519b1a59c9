// Finding and watching a request's connection (see peer_socket.h).
#include "server/peer_socket.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace dl::server {

namespace {

// The numeric address and port of fd's peer, where fd is a connected TCP socket.
bool peer_of(int fd, std::string& addr, int& port) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
    char buf[INET6_ADDRSTRLEN] = {};
    if (ss.ss_family == AF_INET) {
        const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
        if (!inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf)) return false;
        port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
        if (!inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf)) return false;
        port = ntohs(a->sin6_port);
    } else {
        return false;
    }
    addr = buf;
    return true;
}

}  // namespace

PeerSocket::PeerSocket(const std::string& addr, int port) : addr_(addr), port_(port) {
    DIR* d = opendir("/proc/self/fd");
    if (!d) return;
    while (dirent* e = readdir(d)) {
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == dirfd(d)) continue;
        std::string a;
        int p = 0;
        if (peer_of((int)fd, a, p) && p == port && a == addr) {
            fd_ = (int)fd;
            break;
        }
    }
    closedir(d);
}

bool PeerSocket::still_the_peer() const {
    std::string a;
    int p = 0;
    return peer_of(fd_, a, p) && p == port_ && a == addr_;
}

bool PeerSocket::closed() const {
    if (fd_ < 0) return false;
    pollfd pfd{fd_, POLLIN | POLLRDHUP, 0};
    if (poll(&pfd, 1, 0) <= 0) return false;
    if (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) return still_the_peer() || errno == ENOTCONN;
    // Readable: the client's end closed (recv sees the end) or it sent more bytes (left unread).
    char c;
    const ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return still_the_peer();
    return n < 0 && (errno == ECONNRESET || errno == EPIPE);
}

}  // namespace dl::server
