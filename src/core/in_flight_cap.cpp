#include "fairlane/core/in_flight_cap.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <utility>

namespace fairlane {

InFlightCap::InFlightCap(std::int64_t max_in_flight) : limit_(max_in_flight) {
  if (max_in_flight < 0) {
    throw std::invalid_argument(fmt::format(
        "max in flight {} is negative: use 0 (unlimited) or a positive cap", max_in_flight));
  }
}

std::optional<InFlightCap::Permit> InFlightCap::try_acquire(Clock::time_point sent_at) {
  if (full()) return std::nullopt;
  ++in_use_;
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(sent_at.time_since_epoch()).count();
  sent_sum_us_ += us;
  return Permit(this, us);
}

std::optional<Clock::time_point> InFlightCap::mean_sent() const {
  if (in_use_ <= 0) return std::nullopt;
  return Clock::time_point{} + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::microseconds(sent_sum_us_ / in_use_));
}

InFlightCap::Permit::Permit(Permit&& other) noexcept
    : cap_(std::exchange(other.cap_, nullptr)), sent_us_(other.sent_us_) {}

InFlightCap::Permit& InFlightCap::Permit::operator=(Permit&& other) noexcept {
  if (this != &other) {
    release();
    cap_ = std::exchange(other.cap_, nullptr);
    sent_us_ = other.sent_us_;
  }
  return *this;
}

void InFlightCap::Permit::release() {
  if (cap_ == nullptr) return;
  InFlightCap* cap = std::exchange(cap_, nullptr);
  --cap->in_use_;
  cap->sent_sum_us_ -= sent_us_;
}

}  // namespace fairlane
