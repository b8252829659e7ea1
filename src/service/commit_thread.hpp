// CommitThread: a thread of its own, with a Store of its own (a second connection to the
// same database), on which the dispatcher commits its group-commit batches. On PostgreSQL a
// batch of 512 transitions takes tens of milliseconds in the server; committed on the io
// thread, every request and every call's answer would wait for it. Here the io thread hands
// the batch over and goes on; the answer comes back to it as a handler (Dispatcher).
//
// Tasks run one at a time, in the order they were given, so batches commit in order.
//
// Thread safety: post() and run() from any thread; the Store is touched only by the tasks,
// on the thread, and by nobody else while the CommitThread lives.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "fairlane/store/store.hpp"

namespace fairlane::service {

class CommitThread {
 public:
  using Task = std::function<void(Store&)>;

  // Starts the thread; `store` is its own from now on.
  explicit CommitThread(std::unique_ptr<Store> store);
  // Runs what was given, then joins the thread.
  ~CommitThread();
  CommitThread(const CommitThread&) = delete;
  CommitThread& operator=(const CommitThread&) = delete;

  // Runs `task` on the thread after everything given before it.
  void post(Task task);
  // As post(), and waits until `task` has run.
  void run(const Task& task);

 private:
  void work();

  const std::unique_ptr<Store> store_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Task> tasks_;  // under mutex_
  bool stopping_ = false;   // under mutex_
  std::thread thread_;      // last: started once everything above is ready
};

}  // namespace fairlane::service
