// FailureLog: what to log of a failure that repeats, such as a database away that is read
// again every second: the first failure at once, then one line a minute while they go on
// (saying how many there were), and one line when it works again. Without it an outage of an
// hour wrote thousands of the same line.
//
// Pure: the caller gives the time and writes the lines it returns.
// Thread safety: none; one owner.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fairlane::service {

class FailureLog {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // `failing`: what went wrong ("the lanes could not be read"); `recovered`: what is said
  // once it works again ("the lanes are read again").
  FailureLog(std::string failing, std::string recovered,
             std::chrono::steady_clock::duration every = std::chrono::minutes(1));

  // A failure at `now`: the line to log, or nothing while the last was written less than
  // `every` ago.
  [[nodiscard]] std::optional<std::string> failed(std::string_view reason, TimePoint now);
  // It worked at `now`: the line saying so after failures, else nothing.
  [[nodiscard]] std::optional<std::string> succeeded(TimePoint now);

 private:
  const std::string failing_;
  const std::string recovered_;
  const std::chrono::steady_clock::duration every_;
  std::optional<TimePoint> since_;  // the run of failures' first, while one goes on
  TimePoint logged_at_{};           // the run's last line
  std::int64_t failures_ = 0;       // in the run
  std::int64_t unlogged_ = 0;       // since its last line
};

}  // namespace fairlane::service
