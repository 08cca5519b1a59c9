// Bounds how long a client may take to send its request. The HTTP library (cpp-httplib) gives
// each connection a worker thread from a fixed pool while it reads the request; a client that
// sends a byte now and then (a "slowloris") keeps its worker as long as it likes, and enough of
// them leave no worker for anyone else. The guard sees every connection from its accept to its
// close (it is the library's task queue) and, from a thread of its own, shuts down
//  - a connection that has been sent no whole request for `request_seconds` since it was
//    accepted or last answered, and
//  - while connections outnumber the workers, those that have waited longest for their request
//    (at least `crowded_seconds`), so that a client that sends its request at once is served.
// A connection whose request was read whole (being answered, or streaming) is never touched.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace httplib {
class TaskQueue;
}

namespace dl::server {

class ConnectionGuard {
  public:
    struct Options {
        size_t workers = 64;
        double request_seconds = 30;
        double crowded_seconds = 1;
        double check_seconds = 0.1;  // how often the connections are looked at
    };

    explicit ConnectionGuard(Options options);
    ~ConnectionGuard();
    ConnectionGuard(const ConnectionGuard&) = delete;
    ConnectionGuard& operator=(const ConnectionGuard&) = delete;

    // The connections accepted on `port` from now on are guarded (call once the port is bound).
    void watch_port(int port);
    // A task queue of `workers` threads for the HTTP library (httplib::Server::new_task_queue);
    // the library owns it.
    httplib::TaskQueue* make_task_queue();

    // On a worker thread, of the connection it serves: its request was read whole; its answer
    // was written (the next request may come).
    static void request_read();
    static void answer_written();
    // The worker's connection (a descriptor of its own, valid while the request runs), or -1.
    static int current_socket();

    // From now on every connection not being answered is shut down at once (the server stops:
    // the library's workers must end).
    void close_idle();

    // Connections accepted and not yet closed; those the guard has cut off so far (not counting
    // those closed at close_idle()).
    size_t connections() const;
    uint64_t cut_off() const;

  private:
    struct Connection;
    class Queue;
    static std::shared_ptr<Connection>& current();  // the worker thread's connection
    static void mark(bool answering);
    std::shared_ptr<Connection> accepted();
    void closed(const std::shared_ptr<Connection>& c);
    void check();

    const Options opt_;
    int port_ = -1;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false, closing_ = false;
    std::vector<std::shared_ptr<Connection>> open_;
    uint64_t cut_off_ = 0;
    std::chrono::steady_clock::time_point last_warning_{};
    std::thread watcher_;
};

}  // namespace dl::server
