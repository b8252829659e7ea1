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

std::optional<InFlightCap::Permit> InFlightCap::try_acquire() {
  if (full()) return std::nullopt;
  ++in_use_;
  return Permit(this);
}

InFlightCap::Permit::Permit(Permit&& other) noexcept : cap_(std::exchange(other.cap_, nullptr)) {}

InFlightCap::Permit& InFlightCap::Permit::operator=(Permit&& other) noexcept {
  if (this != &other) {
    release();
    cap_ = std::exchange(other.cap_, nullptr);
  }
  return *this;
}

void InFlightCap::Permit::release() {
  if (cap_ == nullptr) return;
  --std::exchange(cap_, nullptr)->in_use_;
}

}  // namespace fairlane
