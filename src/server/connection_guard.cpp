// The connections' guard (see connection_guard.h).
#include "server/connection_guard.h"

#include <fcntl.h>
#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <string_view>
#include <unordered_set>

#include "core/log.h"
#include "server/sockets.h"

namespace dl::server {

using Clock = std::chrono::steady_clock;

struct ConnectionGuard::Connection {
    enum class State { queued, waiting, answering };
    // Queued with a whole request's headers already in its socket (seen by the watcher while the
    // workers are all taken): a worker takes it before the connections ahead of it.
    std::atomic<bool> ready{false};
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

// The HTTP library's pool of workers, with each connection's life told to the guard. A worker
// takes the first queued connection that the watcher saw holding a whole request, else the
// oldest: clients that trickle their headers cannot keep one that sent its request at once
// waiting behind them.
class ConnectionGuard::Queue : public httplib::TaskQueue {
  public:
    Queue(ConnectionGuard& guard, size_t workers) : guard_(guard) {
        for (size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
    }

    void enqueue(std::function<void()> serve) override {
        // Called by the library's listening thread right after each accept().
        std::shared_ptr<Connection> c = guard_.accepted();
        {
            std::lock_guard lock(mutex_);
            jobs_.push_back({std::move(c), std::move(serve)});
        }
        more_.notify_one();
    }

    void shutdown() override {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        more_.notify_all();
        for (std::thread& t : threads_) t.join();
    }

  private:
    struct Job {
        std::shared_ptr<Connection> c;
        std::function<void()> serve;
    };

    void work() {
        for (;;) {
            Job job;
            {
                std::unique_lock lock(mutex_);
                more_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
                if (jobs_.empty()) return;  // stopping, and nothing left to serve
                auto it = std::find_if(jobs_.begin(), jobs_.end(),
                                       [](const Job& j) { return j.c && j.c->ready; });
                if (it == jobs_.end()) it = jobs_.begin();
                job = std::move(*it);
                jobs_.erase(it);
            }
            if (job.c) {
                std::lock_guard lock(guard_.mutex_);
                job.c->state = Connection::State::waiting;
                job.c->since = Clock::now();
            }
            current() = job.c;
            job.serve();
            current().reset();
            if (job.c) guard_.closed(job.c);
        }
    }

    ConnectionGuard& guard_;
    std::mutex mutex_;
    std::condition_variable more_;
    std::deque<Job> jobs_;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
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

namespace {

// Whether the socket's unread bytes hold a request's whole headers (its first 8 KB looked at,
// nothing taken from it).
bool whole_request_waiting(int fd) {
    char buf[8192];
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 && std::string_view(buf, (size_t)n).find("\r\n\r\n") != std::string_view::npos;
}

}  // namespace

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
    // Every worker taken and more connections behind them: the queued ones that hold a whole
    // request go first (Queue::work), and one worker past the count is freed, from the
    // connections that have waited longest for their request.
    if (live >= opt_.workers) {
        for (const auto& c : open_)
            if (!c->shut && c->state == Connection::State::queued && !c->ready)
                c->ready = whole_request_waiting(c->fd);
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
