// ServeProcess: `fairlane serve` (or any server that prints "listening on http://...") as a
// child process of a tool such as the lab or the crash test: started with posix_spawn, its
// URL read from its first line, stopped with SIGTERM or killed with SIGKILL.
//
// Thread safety: one thread at a time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace fairlane::tools {

struct ServeProcessOptions {
  std::vector<std::string> args;         // args[0] is the program's path
  std::string log;                       // its stderr goes here
  bool append_log = false;               // append (across restarts) rather than truncate
  std::vector<std::string> environment;  // NAME=VALUE added to (or replacing in) ours
  std::chrono::seconds start_timeout{30};
};

class ServeProcess {
 public:
  ServeProcess() = default;
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;
  // Stops it (SIGTERM, then SIGKILL after 5 s) if it still runs.
  ~ServeProcess();

  // Starts it and waits for its "listening on" line; returns the base URL, or nothing when
  // it could not start or printed no URL in time (it is then killed).
  std::optional<std::string> start(const ServeProcessOptions& options);

  // SIGKILL, no waiting; reap() then waits for it to end.
  void kill_now() const;
  void reap();

  // SIGTERM, then up to `grace` for it to end (SIGKILL after); its exit status, or -1 when a
  // signal ended it or it was not running.
  int stop(std::chrono::milliseconds grace = std::chrono::seconds(60));

  [[nodiscard]] bool running() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

}  // namespace fairlane::tools
