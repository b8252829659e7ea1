#include "service/failure_log.hpp"

#include <fmt/format.h>

#include <utility>

namespace fairlane::service {
namespace {

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

FailureLog::FailureLog(std::string failing, std::string recovered,
                       std::chrono::steady_clock::duration every)
    : failing_(std::move(failing)), recovered_(std::move(recovered)), every_(every) {}

std::optional<std::string> FailureLog::failed(std::string_view reason, TimePoint now) {
  ++failures_;
  if (!since_) {
    since_ = now;
    logged_at_ = now;
    unlogged_ = 0;
    return fmt::format("fairlane: {}: {}", failing_, reason);
  }
  ++unlogged_;
  if (now - logged_at_ < every_) return std::nullopt;
  std::string line = fmt::format("fairlane: {}: {} ({} more times in the last {:.0f} s)", failing_,
                                 reason, unlogged_, seconds(now - logged_at_));
  logged_at_ = now;
  unlogged_ = 0;
  return line;
}

std::optional<std::string> FailureLog::succeeded(TimePoint now) {
  if (!since_) return std::nullopt;
  std::string line = fmt::format("fairlane: {}, after {} failures over {:.0f} s", recovered_,
                                 failures_, seconds(now - *since_));
  since_.reset();
  failures_ = 0;
  unlogged_ = 0;
  return line;
}

}  // namespace fairlane::service
