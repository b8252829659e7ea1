// TokenBucket: a per-minute budget of requests or tokens that refills continuously.
//
// Capacity C per minute, refill r = C/60 per second, level L starting full and capped at C:
// L(t2) = min(C, L(t1) + r (t2 - t1)). Taking n needs L >= n; otherwise the caller waits
// exactly (n - L) / r. A reservation is later settled with the actual amount (the
// difference is refunded, capped at C, or charged, possibly leaving L below zero: a debt
// later takers wait off) or cancelled (everything returned), exactly once. Capacity 0
// means unlimited: every take succeeds at once.
//
// The capacity the bucket was built with is the configured one; the provider may announce
// a lower limit (limit_to), which becomes the effective capacity C' = min(C, announced):
// refill r' = C'/60, level capped at C'. A later, higher announcement raises C' again,
// never above C. A cost n with C' < n <= C still fits: it waits for a full bucket (L = C')
// and leaves it in debt, L = C' - n. Only n > C never fits. Underneath, the configured
// bucket keeps its own level (same takes and corrections, refill r, cap C) and a take
// needs it to hold n too: no sequence of announcements lets more through than the
// configured limit would (a bucket just lowered to what is left is full, but a large cost
// still waits for the configured budget to have it).
//
// The arithmetic is exact. The level is an integer count of units of 1/60,000,000 of a
// token, so one microsecond refills exactly C' units and every wait is a whole number of
// microseconds (the smallest at which the take fits). Nothing drifts however long it runs.
// A wait longer than kLongestWait (possible only when C' is a tiny fraction of C) is
// reported as kLongestWait: asked again then, the bucket says how much longer.
//
// Thread safety: none, by design. A bucket is owned by one thread (fairlane's io_context
// thread); time comes only from the injected Clock.
#pragma once

#include <cstdint>
#include <optional>

#include "fairlane/core/clock.hpp"

namespace fairlane {

class TokenBucket {
 public:
  class Reservation;

  // The largest capacity (and single cost) a bucket accepts, per minute. Ten billion
  // tokens a minute is far above any provider's limit and keeps the exact arithmetic
  // inside 64 bits.
  static constexpr std::int64_t kMaxCapacity = 10'000'000'000;
  // The longest wait a bucket reports: a year. Only a debt of four minutes of C refilled
  // at a C' over 130,000 times smaller takes longer; a year keeps `now + wait` far from
  // overflowing a time point.
  static constexpr Clock::duration kLongestWait = std::chrono::hours(24 * 365);

  // A bucket of `capacity_per_minute` (0 = unlimited), full at construction.
  // Throws std::invalid_argument outside [0, kMaxCapacity]: that is a configuration bug.
  // `clock` must outlive the bucket.
  TokenBucket(const Clock& clock, std::int64_t capacity_per_minute);

  // Reservations point at their bucket, so a bucket stays where it was built.
  TokenBucket(const TokenBucket&) = delete;
  TokenBucket& operator=(const TokenBucket&) = delete;

  [[nodiscard]] bool unlimited() const { return configured_capacity_ == 0; }
  // The effective capacity C' per minute: the configured one, or the lower limit the
  // provider announced (0 when unlimited).
  [[nodiscard]] std::int64_t capacity() const { return capacity_; }
  // The capacity C the bucket was built with; the effective one is never above it.
  [[nodiscard]] std::int64_t configured_capacity() const { return configured_capacity_; }

  // The level now, in tokens; negative while in debt. +infinity when unlimited.
  [[nodiscard]] double level() const;

  // floor(level), at least 0: what a rate-limit "remaining" header shows. For an unlimited
  // bucket, kMaxCapacity.
  [[nodiscard]] std::int64_t remaining() const;

  // How long until the bucket is full again (zero if it is, or if unlimited).
  [[nodiscard]] Clock::duration time_until_full() const;

  // How long until `n` fits: zero if it fits now, std::nullopt if it never can (n > C).
  // A cost above the effective capacity fits once the bucket is full (and the configured
  // level holds it). Negative n counts as 0.
  [[nodiscard]] std::optional<Clock::duration> wait_for(std::int64_t n) const;

  // Takes `n` if it fits now and returns true; otherwise changes nothing and returns false.
  bool try_take(std::int64_t n);

  // Like try_take, but the amount taken is an estimate to settle or cancel later.
  // std::nullopt (and no change) when `n` does not fit now.
  [[nodiscard]] std::optional<Reservation> reserve(std::int64_t n);

  // Lowers the level to `remaining` tokens when the provider reports less budget left than
  // the bucket thinks. Never raises it.
  void sync_down(std::int64_t remaining);

  // Follows the limit the provider announces: the effective capacity (and so the refill)
  // becomes min(configured, announced). The refill up to now is credited at the old rate
  // first; a lower capacity caps the level, a higher one leaves it where it is (it refills
  // faster from now on). `announced` <= 0 is no limit anyone can keep to and is ignored,
  // as is any announcement to an unlimited bucket (configured 0: the operator set none).
  void limit_to(std::int64_t announced);

 private:
  friend class Reservation;
  // Budget reads the clock once per admission and uses the *_at forms below.
  friend class Budget;

  // The same operations at a time point the caller has already read from the clock.
  [[nodiscard]] std::optional<Clock::duration> wait_at(std::int64_t n, Clock::time_point now) const;
  bool take_at(std::int64_t n, Clock::time_point now);
  [[nodiscard]] std::optional<Reservation> reserve_at(std::int64_t n, Clock::time_point now);

  // The level at `now`, in units, without storing it; and the configured bucket's.
  [[nodiscard]] std::int64_t level_units_at(Clock::time_point now) const;
  [[nodiscard]] std::int64_t configured_level_units_at(Clock::time_point now) const;
  // Stores both levels at `now`.
  void refill_to(Clock::time_point now);
  // Adds `tokens` (may be negative) to both levels now, capped at C' (C for the configured
  // one) and bounded below.
  void credit(std::int64_t tokens);

  // Constant after construction.
  const Clock& clock_;
  const std::int64_t configured_capacity_;
  const std::int64_t configured_units_;
  // The deepest debt, in units: four minutes of the configured refill (see the .cpp).
  const std::int64_t floor_units_;

  // Only touched on the owning thread. capacity_ (C', tokens per minute, refilling
  // capacity_ units a microsecond) and capacity_units_ change only through limit_to.
  // level_units_ is the level at refilled_at_, between floor_units_ and capacity_units_;
  // configured_level_units_ the configured bucket's, between floor_units_ and
  // configured_units_, never below level_units_.
  std::int64_t capacity_;
  std::int64_t capacity_units_;
  std::int64_t level_units_;
  std::int64_t configured_level_units_;
  Clock::time_point refilled_at_;
};

// A reservation of tokens taken from a TokenBucket: settle(actual) or cancel() it exactly
// once; later calls do nothing. Dropping an open reservation keeps the reserved tokens
// spent (as settle(reserved()) would), the safe side when nobody knows what was used.
// The bucket must outlive it. Move-only; a moved-from reservation is closed and reserves 0.
class TokenBucket::Reservation {
 public:
  Reservation(Reservation&& other) noexcept;
  Reservation& operator=(Reservation&& other) noexcept;
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  ~Reservation() = default;

  [[nodiscard]] std::int64_t reserved() const { return reserved_; }
  [[nodiscard]] bool open() const { return bucket_ != nullptr; }

  // Corrects the bucket by reserved - actual: a refund (capped at C') or an overrun charge
  // (the level may go below zero, down to four minutes of the configured refill).
  // Negative `actual` counts as 0.
  void settle(std::int64_t actual);

  // Returns every reserved token.
  void cancel();

 private:
  friend class TokenBucket;
  Reservation(TokenBucket* bucket, std::int64_t reserved) : bucket_(bucket), reserved_(reserved) {}

  TokenBucket* bucket_;  // null once settled, cancelled or moved from
  std::int64_t reserved_;
};

}  // namespace fairlane
