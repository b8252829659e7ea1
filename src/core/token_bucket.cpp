#include "fairlane/core/token_bucket.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <utility>

namespace fairlane {
namespace {

// Units per token: microseconds per minute. A bucket of C tokens a minute refills C units
// each microsecond, so refill and waits are exact integer arithmetic.
constexpr std::int64_t kUnitsPerToken = 60'000'000;
// The deepest debt a bucket records, in minutes of its configured refill, and the largest
// usage a settlement believes, in minutes of the largest capacity. Together they keep every
// sum of a level and a correction inside 64 bits; kLongestWait keeps every wait there.
// The floor is the configured capacity's, not the effective one's: raising it when the
// capacity drops would forgive debt, and a bucket that forgave would let through more than
// the announced limit allows.
constexpr std::int64_t kMaxDebtMinutes = 4;
constexpr std::int64_t kMaxActual = 4 * TokenBucket::kMaxCapacity;

std::int64_t clamp_tokens(std::int64_t n) {
  return std::clamp<std::int64_t>(n, 0, TokenBucket::kMaxCapacity);
}

std::int64_t checked_capacity(std::int64_t capacity_per_minute) {
  if (capacity_per_minute < 0 || capacity_per_minute > TokenBucket::kMaxCapacity) {
    throw std::invalid_argument(
        fmt::format("a per-minute limit of {} is out of range: use 0 (unlimited) up to {}",
                    capacity_per_minute, TokenBucket::kMaxCapacity));
  }
  return capacity_per_minute;
}

std::int64_t whole_microseconds(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

// ceil(a / b) for a >= 0, b > 0.
std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// The time `units` take to refill at `capacity` units a microsecond, at most kLongestWait.
Clock::duration refill_time(std::int64_t units, std::int64_t capacity) {
  constexpr std::int64_t kLongest_us =
      std::chrono::duration_cast<std::chrono::microseconds>(TokenBucket::kLongestWait).count();
  return std::chrono::microseconds(std::min(ceil_div(units, capacity), kLongest_us));
}

// The time until a level refilling `capacity` units a microsecond holds `needed` units
// (zero if it does).
Clock::duration time_to_hold(std::int64_t needed, std::int64_t level, std::int64_t capacity) {
  return needed > level ? refill_time(needed - level, capacity) : Clock::duration::zero();
}

// A level `elapsed_us` after it was `level`, refilling `capacity` units a microsecond up to
// `full` units.
std::int64_t refilled(std::int64_t level, std::int64_t capacity, std::int64_t full,
                      std::int64_t elapsed_us) {
  if (elapsed_us <= 0) return level;
  // Full once the refill covers what is missing; testing this first keeps C * elapsed
  // from overflowing after a long idle spell.
  if (elapsed_us >= ceil_div(full - level, capacity)) return full;
  return level + capacity * elapsed_us;
}

}  // namespace

TokenBucket::TokenBucket(const Clock& clock, std::int64_t capacity_per_minute)
    : clock_(clock),
      configured_capacity_(checked_capacity(capacity_per_minute)),
      configured_units_(configured_capacity_ * kUnitsPerToken),
      floor_units_(-kMaxDebtMinutes * configured_units_),
      capacity_(configured_capacity_),
      capacity_units_(configured_units_),
      level_units_(capacity_units_),
      configured_level_units_(configured_units_),
      refilled_at_(clock.now()) {}

std::int64_t TokenBucket::level_units_at(Clock::time_point now) const {
  if (unlimited()) return level_units_;
  return refilled(level_units_, capacity_, capacity_units_, whole_microseconds(now - refilled_at_));
}

std::int64_t TokenBucket::configured_level_units_at(Clock::time_point now) const {
  if (unlimited()) return configured_level_units_;
  return refilled(configured_level_units_, configured_capacity_, configured_units_,
                  whole_microseconds(now - refilled_at_));
}

void TokenBucket::refill_to(Clock::time_point now) {
  if (unlimited()) return;
  const std::int64_t elapsed_us = whole_microseconds(now - refilled_at_);
  if (elapsed_us <= 0) return;
  level_units_ = level_units_at(now);
  configured_level_units_ = configured_level_units_at(now);
  // Advance by whole microseconds only, so the fraction not yet credited is not lost.
  refilled_at_ += std::chrono::microseconds(elapsed_us);
}

void TokenBucket::credit(std::int64_t tokens) {
  if (unlimited()) return;
  refill_to(clock_.now());
  level_units_ = std::clamp(level_units_ + tokens * kUnitsPerToken, floor_units_, capacity_units_);
  configured_level_units_ = std::clamp(configured_level_units_ + tokens * kUnitsPerToken,
                                       floor_units_, configured_units_);
}

double TokenBucket::level() const {
  if (unlimited()) return std::numeric_limits<double>::infinity();
  return static_cast<double>(level_units_at(clock_.now())) / static_cast<double>(kUnitsPerToken);
}

std::int64_t TokenBucket::remaining() const {
  if (unlimited()) return kMaxCapacity;
  return std::max<std::int64_t>(0, level_units_at(clock_.now()) / kUnitsPerToken);
}

Clock::duration TokenBucket::time_until_full() const {
  if (unlimited()) return Clock::duration::zero();
  return refill_time(capacity_units_ - level_units_at(clock_.now()), capacity_);
}

std::optional<Clock::duration> TokenBucket::wait_for(std::int64_t n) const {
  return wait_at(n, clock_.now());
}

std::optional<Clock::duration> TokenBucket::wait_at(std::int64_t n, Clock::time_point now) const {
  if (unlimited()) return Clock::duration::zero();
  n = std::max<std::int64_t>(n, 0);
  if (n > configured_capacity_) return std::nullopt;
  // Both levels must hold it; above the effective capacity, the effective bucket must be
  // full.
  return std::max(
      time_to_hold(std::min(n, capacity_) * kUnitsPerToken, level_units_at(now), capacity_),
      time_to_hold(n * kUnitsPerToken, configured_level_units_at(now), configured_capacity_));
}

bool TokenBucket::try_take(std::int64_t n) {
  return take_at(n, clock_.now());
}

bool TokenBucket::take_at(std::int64_t n, Clock::time_point now) {
  if (unlimited()) return true;
  n = std::max<std::int64_t>(n, 0);
  if (n > configured_capacity_) return false;
  refill_to(now);
  // Above the effective capacity, a full bucket lets it through into debt (C' - n is at
  // least C' - C, above the floor) once the configured level holds it.
  if (level_units_ < std::min(n, capacity_) * kUnitsPerToken ||
      configured_level_units_ < n * kUnitsPerToken) {
    return false;
  }
  level_units_ -= n * kUnitsPerToken;
  configured_level_units_ -= n * kUnitsPerToken;
  return true;
}

std::optional<TokenBucket::Reservation> TokenBucket::reserve(std::int64_t n) {
  return reserve_at(n, clock_.now());
}

std::optional<TokenBucket::Reservation> TokenBucket::reserve_at(std::int64_t n,
                                                                Clock::time_point now) {
  n = clamp_tokens(n);
  if (!take_at(n, now)) return std::nullopt;
  return Reservation(this, n);
}

void TokenBucket::sync_down(std::int64_t remaining) {
  if (unlimited()) return;
  refill_to(clock_.now());
  const std::int64_t remaining_units = clamp_tokens(remaining) * kUnitsPerToken;
  level_units_ = std::min(level_units_, remaining_units);
  configured_level_units_ = std::min(configured_level_units_, remaining_units);
}

void TokenBucket::limit_to(std::int64_t announced) {
  if (unlimited() || announced <= 0) return;
  const std::int64_t capacity = std::min(configured_capacity_, announced);
  if (capacity == capacity_) return;
  // What refilled until now, at the rate it refilled at. (refill_to credits whole
  // microseconds: a fraction of one not credited yet refills at the new rate.)
  refill_to(clock_.now());
  capacity_ = capacity;
  capacity_units_ = capacity_ * kUnitsPerToken;
  level_units_ = std::min(level_units_, capacity_units_);
}

TokenBucket::Reservation::Reservation(Reservation&& other) noexcept
    : bucket_(std::exchange(other.bucket_, nullptr)),
      reserved_(std::exchange(other.reserved_, 0)) {}

TokenBucket::Reservation& TokenBucket::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    bucket_ = std::exchange(other.bucket_, nullptr);
    reserved_ = std::exchange(other.reserved_, 0);
  }
  return *this;
}

void TokenBucket::Reservation::settle(std::int64_t actual) {
  if (bucket_ == nullptr) return;
  std::exchange(bucket_, nullptr)
      ->credit(reserved_ - std::clamp<std::int64_t>(actual, 0, kMaxActual));
}

void TokenBucket::Reservation::cancel() {
  if (bucket_ == nullptr) return;
  std::exchange(bucket_, nullptr)->credit(reserved_);
}

}  // namespace fairlane
