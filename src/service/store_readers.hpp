// StoreReaders: threads with a store connection of their own each, on which the transport
// runs the reads of job views, lists, results and live events, and uploads' commits, when
// the store is a server's (PostgreSQL). A read there is a round trip of a fraction of a millisecond
// to milliseconds; made on the io thread, every other request, upload and provider answer would
// wait for it. Here the io thread hands the read over and goes on; the answer is made back on it
// (ApiResponse::read, HttpServer, stream_events). On SQLite a read takes microseconds and
// there are no readers: the routes read in place.
//
// A read takes whichever connection is free; there are as many threads as connections, so one
// always is.
//
// Thread safety: executor() and the reads it runs from any thread; each Store is used by one
// read at a time, and by nothing else while the StoreReaders lives.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "fairlane/store/store.hpp"

namespace fairlane::service {

class StoreReaders {
 public:
  // One thread for each store (at least one store).
  explicit StoreReaders(std::vector<std::unique_ptr<Store>> stores);
  // Waits for the reads under way.
  ~StoreReaders();
  StoreReaders(const StoreReaders&) = delete;
  StoreReaders& operator=(const StoreReaders&) = delete;

  // Where reads run: co_spawn onto it, then call read() there.
  [[nodiscard]] boost::asio::thread_pool::executor_type executor() {
    return threads_.get_executor();
  }

  // On one of executor()'s threads: runs `task` with a free connection.
  void read(const std::function<void(Store&)>& task);

  [[nodiscard]] std::size_t size() const { return stores_.size(); }

 private:
  const std::vector<std::unique_ptr<Store>> stores_;
  std::mutex mutex_;
  std::vector<Store*> free_;  // under mutex_
  boost::asio::thread_pool threads_;
};

// From a coroutine on the io thread: runs `task` on one of `readers`' threads with a free
// connection, and resumes the caller on its own executor once it has run.
boost::asio::awaitable<void> read_on(StoreReaders& readers,
                                     const std::function<void(Store&)>& task);

}  // namespace fairlane::service
