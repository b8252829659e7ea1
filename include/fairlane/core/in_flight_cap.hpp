// InFlightCap: how many provider calls may be unfinished at once. A permit is taken when a
// call is admitted and returned when it ends (Permit is RAII; release() returns it early).
// A limit of 0 means unlimited, though permits are still counted. The cap also keeps when
// the calls out were sent, on average, for the estimator: calls sent together end together
// (Estimator, the calls bound).
//
// Thread safety: none, by design; one thread (the io_context's) owns the cap.
#pragma once

#include <cstdint>
#include <optional>

#include "fairlane/core/clock.hpp"

namespace fairlane {

class InFlightCap {
 public:
  class Permit;

  // Throws std::invalid_argument for a negative limit (a configuration bug).
  explicit InFlightCap(std::int64_t max_in_flight);

  // Permits point at their cap, so a cap stays where it was built.
  InFlightCap(const InFlightCap&) = delete;
  InFlightCap& operator=(const InFlightCap&) = delete;

  [[nodiscard]] bool unlimited() const { return limit_ == 0; }
  [[nodiscard]] std::int64_t limit() const { return limit_; }
  [[nodiscard]] std::int64_t in_use() const { return in_use_; }
  [[nodiscard]] bool full() const { return !unlimited() && in_use_ >= limit_; }

  // A permit for a call sent at `sent_at`, or std::nullopt (and no change) when the cap is
  // full.
  [[nodiscard]] std::optional<Permit> try_acquire(Clock::time_point sent_at);
  // When the calls out were sent, on average (to the microsecond); std::nullopt when none is.
  [[nodiscard]] std::optional<Clock::time_point> mean_sent() const;

 private:
  friend class Permit;

  // Constant after construction.
  const std::int64_t limit_;
  // Only touched on the owning thread.
  std::int64_t in_use_ = 0;
  // The permits' send times summed, in microseconds of their clock (a steady clock counts
  // from boot: 4,096 calls out after ten years of uptime sum to 1.3e18, under int64's 9.2e18).
  std::int64_t sent_sum_us_ = 0;
};

// One call's place under an InFlightCap. Returned by release() or the destructor, exactly
// once. The cap must outlive it. Move-only; a moved-from permit holds nothing.
class InFlightCap::Permit {
 public:
  Permit(Permit&& other) noexcept;
  Permit& operator=(Permit&& other) noexcept;
  Permit(const Permit&) = delete;
  Permit& operator=(const Permit&) = delete;
  ~Permit() { release(); }

  [[nodiscard]] bool held() const { return cap_ != nullptr; }

  // Returns the permit to the cap; a second call does nothing.
  void release();

 private:
  friend class InFlightCap;
  Permit(InFlightCap* cap, std::int64_t sent_us) : cap_(cap), sent_us_(sent_us) {}

  InFlightCap* cap_;          // null once released or moved from
  std::int64_t sent_us_ = 0;  // when its call was sent, as the cap sums it
};

}  // namespace fairlane
