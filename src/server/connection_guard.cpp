// The connections' guard (see connection_guard.h).
#include "server/connection_guard.h"

#include <fcntl.h>
#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <unordered_set>

#include "core/log.h"
#include "server/sockets.h"

namespace dl::server {

using Clock = std::chrono::steady_clock;

struct ConnectionGuard::Connection {
    enum class State { queued, waiting, answering };
    ConnectionGuard* guard = nullptr;
    int fd = -1;  // the guard's own descriptor of the socket: shutting it down never hits a reused
                  // number, since the socket lives until this one closes too
    uint64_t inode = 0;
    State state = State::queued;
    Clock::time_point since;  // of the state
    bool shut = false;
};

std::shared_ptr<ConnectionGuard::Connection>& ConnectionGuard::current() {
    thread_local std::shared_ptr<Connection> c;
    return c;
}

// The HTTP library's pool of workers with each connection's life told to the guard.
class ConnectionGuard::Queue : public httplib::TaskQueue {
  public:
    Queue(ConnectionGuard& guard, size_t workers) : guard_(guard), pool_(workers) {}

    void enqueue(std::function<void()> serve) override {
        // Called by the library's listening thread right after each accept().
        std::shared_ptr<Connection> c = guard_.accepted();
        pool_.enqueue([this, c, serve = std::move(serve)] {
            if (c) {
                std::lock_guard lock(guard_.mutex_);
                c->state = Connection::State::waiting;
                c->since = Clock::now();
            }
            current() = c;
            serve();
            current().reset();
            if (c) guard_.closed(c);
        });
    }
    void shutdown() override { pool_.shutdown(); }

  private:
    ConnectionGuard& guard_;
    httplib::ThreadPool pool_;
};

ConnectionGuard::ConnectionGuard(Options options) : opt_(options) {
    watcher_ = std::thread([this] {
        std::unique_lock lock(mutex_);
        const auto every = std::chrono::duration<double>(opt_.check_seconds);
        while (!stopping_) {
            wake_.wait_for(lock, every);
            if (!stopping_) check();
        }
    });
}

ConnectionGuard::~ConnectionGuard() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    watcher_.join();
    for (const auto& c : open_) close(c->fd);
}

void ConnectionGuard::watch_port(int port) {
    std::lock_guard lock(mutex_);
    port_ = port;
}

httplib::TaskQueue* ConnectionGuard::make_task_queue() {
    return new Queue(*this, opt_.workers);
}

std::shared_ptr<ConnectionGuard::Connection> ConnectionGuard::accepted() {
    std::unordered_set<uint64_t> known;
    int port;
    {
        std::lock_guard lock(mutex_);
        port = port_;
        for (const auto& c : open_) known.insert(c->inode);
    }
    if (port < 0) return nullptr;
    // The one connected socket on the port that no guarded connection has: only this thread
    // accepts, so it is the one just accepted.
    int fd = -1;
    uint64_t inode = 0;
    for_each_fd([&](int f) {
        inode = socket_inode(f);
        if (inode == 0 || known.count(inode) || connected_port(f) != port) return true;
        fd = f;
        return false;
    });
    if (fd < 0) return nullptr;
    auto c = std::make_shared<Connection>();
    c->guard = this;
    c->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (c->fd < 0) return nullptr;
    c->inode = inode;
    c->since = Clock::now();
    std::lock_guard lock(mutex_);
    open_.push_back(c);
    return c;
}

void ConnectionGuard::closed(const std::shared_ptr<Connection>& c) {
    std::lock_guard lock(mutex_);
    std::erase(open_, c);
    close(c->fd);
}

void ConnectionGuard::mark(bool answering) {
    const std::shared_ptr<Connection>& c = current();
    if (!c) return;
    std::lock_guard lock(c->guard->mutex_);
    c->state = answering ? Connection::State::answering : Connection::State::waiting;
    c->since = Clock::now();
}

void ConnectionGuard::request_read() {
    mark(true);
}

void ConnectionGuard::answer_written() {
    mark(false);
}

int ConnectionGuard::current_socket() {
    const std::shared_ptr<Connection>& c = current();
    return c ? c->fd : -1;
}

void ConnectionGuard::close_idle() {
    std::lock_guard lock(mutex_);
    closing_ = true;
    check();
}

size_t ConnectionGuard::connections() const {
    std::lock_guard lock(mutex_);
    return open_.size();
}

uint64_t ConnectionGuard::cut_off() const {
    std::lock_guard lock(mutex_);
    return cut_off_;
}

void ConnectionGuard::check() {
    const Clock::time_point now = Clock::now();
    const auto seconds = [&](const Connection& c) {
        return std::chrono::duration<double>(now - c.since).count();
    };
    const auto shut = [](Connection& c) {
        ::shutdown(c.fd, SHUT_RDWR);  // the worker's read ends; the library closes its end
        c.shut = true;
    };
    size_t late = 0, crowded = 0, live = 0;
    std::vector<Connection*> waiting;  // for their request, past crowded_seconds
    for (const auto& c : open_) {
        if (c->shut) continue;
        const bool is_waiting = c->state == Connection::State::waiting;
        if ((is_waiting && seconds(*c) >= opt_.request_seconds) ||
            (closing_ && c->state != Connection::State::answering)) {
            shut(*c);
            ++late;
            continue;
        }
        ++live;
        if (is_waiting && seconds(*c) >= opt_.crowded_seconds) waiting.push_back(c.get());
    }
    // Every worker taken and more connections behind them: free one worker past the count, from
    // the connections that have waited longest for their request.
    if (live >= opt_.workers) {
        std::sort(waiting.begin(), waiting.end(),
                  [](const Connection* a, const Connection* b) { return a->since < b->since; });
        crowded = std::min(waiting.size(), live - opt_.workers + 1);
        for (size_t i = 0; i < crowded; ++i) shut(*waiting[i]);
    }
    if (!closing_) cut_off_ += late + crowded;
    if (closing_ || (!late && !crowded) || now - last_warning_ < std::chrono::seconds(10)) return;
    last_warning_ = now;
    if (late)
        log::warn("closed {} connection(s) that sent no whole request in {:g} s", late,
                  opt_.request_seconds);
    if (crowded)
        log::warn(
            "every one of {} workers taken: closed {} connection(s) still waiting for "
            "their request",
            opt_.workers, crowded);
}

}  // namespace dl::server
