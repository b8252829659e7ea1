// DispatchLock: one process dispatches from a SQLite file.
//
// SQLite lets any number of processes open a file. `fairlane serve` started twice on one
// (an overlapping restart, a second unit) would have both dispatch the same lanes, each with
// the whole budget: the second's start requeues the first's calls in flight, so the provider
// sees pages twice and at twice the rate. serve holds an exclusive lock (flock) on DB.lock
// for as long as it runs, and refuses to start while another process holds it. The kernel
// lets go of it when the process ends, however it ends (SIGKILL included), so a lock file
// left behind stops nobody. The CLI's other commands (user, prune) take none: they may run
// beside serve. A PostgreSQL database needs none: its lease decides who dispatches
// (DESIGN.md section 10).
//
// Thread safety: none needed; it is taken once, at start.
#pragma once

#include <string>

#include "fairlane/core/result.hpp"

namespace fairlane {

class DispatchLock {
 public:
  // The lock for --db `db`: DB.lock beside the file (a SQLite URI's, file:PATH?..., and
  // through symbolic links), created if need be, holding this process's id. For a
  // PostgreSQL URI or a database in memory, a lock that holds nothing. Fails `busy` when another
  // process holds it (naming that process), or `io_error` when the file cannot be made.
  static Result<DispatchLock> take(const std::string& db);

  DispatchLock() = default;  // holds nothing
  ~DispatchLock();
  DispatchLock(DispatchLock&& other) noexcept;
  DispatchLock& operator=(DispatchLock&& other) noexcept;
  DispatchLock(const DispatchLock&) = delete;
  DispatchLock& operator=(const DispatchLock&) = delete;

  [[nodiscard]] bool held() const { return fd_ >= 0; }

 private:
  explicit DispatchLock(int fd) : fd_(fd) {}
  int fd_ = -1;  // the lock file, open (O_CLOEXEC: a child does not keep it) and locked
};

}  // namespace fairlane
