#include "service/commit_thread.hpp"

#include <utility>

namespace fairlane::service {

CommitThread::CommitThread(std::unique_ptr<Store> store)
    : store_(std::move(store)), thread_([this] { work(); }) {}

CommitThread::~CommitThread() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void CommitThread::post(Task task) {
  {
    const std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
}

void CommitThread::run(const Task& task) {
  std::mutex done_mutex;
  std::condition_variable done_wake;
  bool done = false;
  post([&](Store& store) {
    task(store);
    const std::lock_guard lock(done_mutex);
    done = true;
    done_wake.notify_one();
  });
  std::unique_lock lock(done_mutex);
  done_wake.wait(lock, [&] { return done; });
}

void CommitThread::work() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and everything given has run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task(*store_);
  }
}

}  // namespace fairlane::service
