// Helpers for store tests: a wall clock moved by hand, temporary directories, and a store
// with users and jobs made in one line.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fairlane/store/store.hpp"

namespace fairlane::testing {

// A wall clock that starts at a fixed instant and moves only when told.
class ManualWallClock {
 public:
  WallTime now = WallTime(std::chrono::milliseconds(1'800'000'000'000));  // 2027-01-15
  void advance(std::chrono::milliseconds step) { now += step; }
  std::function<WallTime()> function() {
    return [this] { return now; };
  }
};

// A fresh directory under the system's temporary directory, removed with everything in it
// when the object goes.
class TempDir {
 public:
  TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Opens a store or fails the test.
std::unique_ptr<Store> open_store(const std::string& path, StoreOptions options = {});

// `count` pages "page 1", "page 2", ... of `tokens` estimated tokens each.
std::vector<PageInput> numbered_pages(int count, std::int64_t tokens = 100);

// Enqueues a job of `pages` pages for `user` or fails the test.
EnqueuedJob enqueue(Store& store, UserId user, int pages, const std::string& name = "book.pdf",
                    std::optional<std::string> idempotency_key = std::nullopt);

// Applies transitions or fails the test; returns the pages each one changed.
std::vector<std::int64_t> apply(Store& store, std::vector<PageTransition> transitions);

// Sends each page of `job` and completes it with "text" and 15 tokens, or fails the test:
// the job is done.
void finish(Store& store, const EnqueuedJob& job);

// Reads a job or fails the test.
JobView job_view(Store& store, JobId job);

// Checks that `user` has exactly `count` jobs, each with all its pages queued: a failed
// upload must leave no trace.
void check_jobs_whole(Store& store, UserId user, std::size_t count);

// Runs `work` in a child process that then ends with _exit, as a crash would: no
// destructor runs and no database is closed. Returns the child's exit status (work's
// answer; 98 if it threw). No test assertions inside `work`: return a code instead.
int in_crashing_child(const std::function<int()>& work);

}  // namespace fairlane::testing
