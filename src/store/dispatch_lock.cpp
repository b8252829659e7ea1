#include "fairlane/store/dispatch_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "fairlane/store/store.hpp"

namespace fairlane {
namespace {

// The process id the holder wrote in the file ("" if none could be read).
std::string holder_of(int fd) {
  std::array<char, 32> text{};
  const ssize_t n = pread(fd, text.data(), text.size() - 1, 0);
  if (n <= 0) return "";
  std::string pid(text.data(), static_cast<std::size_t>(n));
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid;
}

// The file a SQLite --db names, which the lock is beside: a path, or a SQLite URI
// (file:PATH?QUERY, file:///PATH), followed through symbolic links so that two spellings of
// one file share a lock. Nothing for PostgreSQL or a database in memory.
std::optional<std::string> file_of(const std::string& db) {
  if (Store::is_postgresql_uri(db) || db.empty() || db == ":memory:") return std::nullopt;
  std::string path = db;
  if (db.rfind("file:", 0) == 0) {
    if (db.find("mode=memory") != std::string::npos) return std::nullopt;
    path = db.substr(5, db.find_first_of("?#") - 5);
    if (path.rfind("//", 0) == 0) path.erase(0, path.find('/', 2));  // file://HOST/PATH
    if (path.empty() || path == ":memory:") return std::nullopt;
  }
  std::error_code ignored;
  const auto real = std::filesystem::weakly_canonical(path, ignored);
  return real.empty() ? path : real.string();
}

}  // namespace

Result<DispatchLock> DispatchLock::take(const std::string& db) {
  const auto file = file_of(db);
  if (!file) return DispatchLock();
  const std::string path = *file + ".lock";
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2) takes the mode as varargs
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status{StatusCode::io_error,
                  fmt::format("cannot open or make the lock file {} ({}): check that its "
                              "directory exists and that this user may write there",
                              path, std::generic_category().message(errno))};
  }
  DispatchLock lock(fd);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error != EWOULDBLOCK) {
      return Status{StatusCode::io_error, fmt::format("cannot lock {} ({})", path,
                                                      std::generic_category().message(error))};
    }
    const std::string holder = holder_of(fd);
    return Status{
        StatusCode::busy,
        fmt::format("another fairlane serve ({}) dispatches from {}: it holds {}. One process "
                    "serves a SQLite file; stop that one first, or run several instances on "
                    "PostgreSQL (docs/operations.md)",
                    holder.empty() ? "its process id unknown" : "process " + holder, db, path)};
  }
  const std::string pid = fmt::format("{}\n", getpid());
  // The id is for people reading the file; the lock is what counts, so a failed write is
  // not an error.
  if (ftruncate(fd, 0) == 0) (void)!pwrite(fd, pid.data(), pid.size(), 0);
  return lock;
}

DispatchLock::~DispatchLock() {
  if (fd_ >= 0) close(fd_);  // lets go of the lock
}

DispatchLock::DispatchLock(DispatchLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

DispatchLock& DispatchLock::operator=(DispatchLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

}  // namespace fairlane
