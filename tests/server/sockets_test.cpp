// This process's own sockets: the listening socket's backlog widened in place (a burst of clients
// that the backlog the HTTP library sets, 5, would leave waiting all connect at once), a
// connection found by its port, a client's close seen without reading its bytes.
#include "server/sockets.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <vector>

namespace dl::server {
namespace {

// A socket listening on a free loopback port with a backlog of one, never accepting.
int listener(int& port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 1) != 0)
        return -1;
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    return fd;
}

// How many of n clients connecting at once to the port finish their handshake within 300 ms.
int connected(int port, int n) {
    std::vector<int> fds;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    for (int i = 0; i < n; ++i) {
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        fcntl(fd, F_SETFL, O_NONBLOCK);
        connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
        fds.push_back(fd);
    }
    // Every socket's handshake gets the same 300 ms, all at once.
    std::vector<pollfd> p;
    for (int fd : fds) p.push_back({fd, POLLOUT, 0});
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    for (auto now = std::chrono::steady_clock::now(); now < until;
         now = std::chrono::steady_clock::now()) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - now);
        if (poll(p.data(), p.size(), (int)left.count() + 1) <= 0) break;
        for (pollfd& q : p)
            if (q.revents) q.events = 0;  // settled: connected or refused
    }
    int done = 0;
    for (int fd : fds) {
        int err = 0;
        socklen_t len = sizeof err;
        pollfd q{fd, POLLOUT, 0};
        if (poll(&q, 1, 0) == 1 && (q.revents & POLLOUT) &&
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
            ++done;
        close(fd);
    }
    return done;
}

TEST(Sockets, AWiderBacklogTakesABurstOfClients) {
    int port = 0;
    const int narrow = listener(port);
    ASSERT_GE(narrow, 0);
    EXPECT_LT(connected(port, 40), 10) << "a backlog of one took the burst: the test shows nothing";
    close(narrow);

    const int fd = listener(port);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(widen_backlog(port, 128));
    EXPECT_EQ(connected(port, 40), 40);
    close(fd);
    EXPECT_FALSE(widen_backlog(port, 128)) << "no socket listens there any more";
}

// A client connected to a listener on a free loopback port; the server's end accepted.
struct Pair {
    int listening = -1, client = -1, server = -1, port = 0;
    Pair() {
        listening = listener(port);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons((uint16_t)port);
        client = socket(AF_INET, SOCK_STREAM, 0);
        if (listening < 0 || connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
            return;
        server = accept(listening, nullptr, nullptr);
    }
    ~Pair() {
        for (int fd : {listening, client, server})
            if (fd >= 0) close(fd);
    }
};

TEST(Sockets, TheServersEndOfAConnectionIsFoundByItsPort) {
    Pair p;
    ASSERT_GE(p.server, 0);
    EXPECT_EQ(connected_port(p.server), p.port);
    EXPECT_EQ(connected_port(p.listening), -1) << "a listening socket is not a connection";
    EXPECT_NE(connected_port(p.client), p.port) << "the client's end has a port of its own";
    EXPECT_NE(socket_inode(p.server), 0u);
    EXPECT_EQ(socket_inode(1000000), 0u) << "no such descriptor";
    int seen = 0;
    for_each_fd([&](int fd) {
        seen += socket_inode(fd) == socket_inode(p.server);
        return true;
    });
    EXPECT_EQ(seen, 1);
}

TEST(Sockets, AClosedClientIsSeenAndUnreadBytesAreLeft) {
    Pair p;
    ASSERT_GE(p.server, 0);
    EXPECT_FALSE(client_closed(p.server));
    ASSERT_EQ(send(p.client, "ab", 2, 0), 2);
    EXPECT_FALSE(client_closed(p.server)) << "bytes sent are not an end";
    close(p.client);
    p.client = -1;
    for (int i = 0; i < 100 && !client_closed(p.server); ++i) usleep(1000);
    EXPECT_TRUE(client_closed(p.server));
    char buf[4];
    EXPECT_EQ(recv(p.server, buf, sizeof buf, MSG_DONTWAIT), 2) << "the bytes were read away";
    EXPECT_FALSE(client_closed(-1));
}

}  // namespace
}  // namespace dl::server
