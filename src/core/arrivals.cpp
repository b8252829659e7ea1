#include "fairlane/core/arrivals.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace fairlane {
namespace {

using Seconds = std::chrono::duration<double>;

// Bucket i holds rounds [low(i), high(i)): [0, 1), [1, 2), [2, 4), ... and the last one
// everything above.
double low(std::size_t i) {
  return i == 0 ? 0.0 : std::ldexp(1.0, static_cast<int>(i) - 1);
}
double high(std::size_t i) {
  return i + 1 == Arrivals::kBuckets ? std::numeric_limits<double>::infinity()
                                     : std::ldexp(1.0, static_cast<int>(i));
}
std::size_t bucket_of(double rounds) {
  if (rounds < 1.0) return 0;
  const auto i = static_cast<std::size_t>(std::floor(std::log2(rounds))) + 1;
  return std::min(i, Arrivals::kBuckets - 1);
}

// The weight of a bucket's pages when K falls inside it: the pages are taken as spread
// evenly over the interval from the bucket's nearer edge that has their mean in its middle.
double straddling(double pages, double page_rounds, double low, double high, double rounds) {
  const double mean = page_rounds / pages;
  double a = low;
  double b = 2.0 * mean - low;
  if (mean > (low + high) / 2.0) {
    a = 2.0 * mean - high;
    b = high;
  }
  if (b - a <= 0.0) return mean < rounds ? pages * (1.0 - mean / rounds) : 0.0;
  if (rounds <= a) return 0.0;
  if (rounds >= b) return pages - page_rounds / rounds;
  const double below = rounds - a;
  return pages / (b - a) * below * below / (2.0 * rounds);
}

}  // namespace

Arrivals::Arrivals(const Clock& clock, Clock::duration window, std::size_t min_busy_slots,
                   Busiest busiest)
    : clock_(clock),
      slot_length_(window / kSlots),
      min_busy_slots_(min_busy_slots),
      busiest_(busiest),
      started_(clock.now()) {
  if (slot_length_ <= Clock::duration::zero()) {
    throw std::invalid_argument("the arrivals' window must be positive");
  }
}

void Arrivals::continue_from(const Arrivals& before) {
  if (before.slot_length_ != slot_length_) {
    throw std::invalid_argument("arrivals go on only from arrivals of the same window");
  }
  started_ = before.started_;
  slots_ = before.slots_;
}

std::int64_t Arrivals::slot_index(Clock::time_point t) const {
  return (t - started_) / slot_length_;
}

void Arrivals::counted_for(Clock::duration counted) {
  started_ = clock_.now() - std::max(counted, Clock::duration::zero());
}

void Arrivals::record(double first_round, double last_round, double pages) {
  record_ago(Clock::duration::zero(), first_round, last_round, pages);
}

void Arrivals::record_ago(Clock::duration ago, double first_round, double last_round,
                          double pages) {
  const Clock::time_point now = clock_.now();
  const Clock::time_point at = now - std::max(ago, Clock::duration::zero());
  if (!(pages > 0.0) || at < started_) return;
  const std::int64_t index = slot_index(at);
  if (index <= slot_index(now) - static_cast<std::int64_t>(kSlots)) return;  // out of the window
  Slot& slot = slots_[static_cast<std::size_t>(index) % kSlots];
  if (slot.index != index) slot = Slot{.index = index};
  const double from = std::max(first_round, 0.0);
  const double to = std::max(last_round, from);
  if (to - from <= 0.0) {
    const std::size_t i = bucket_of(from);
    slot.pages[i] += pages;
    slot.page_rounds[i] += pages * from;
    return;
  }
  for (std::size_t i = bucket_of(from); i < kBuckets && low(i) <= to; ++i) {
    const double a = std::max(from, low(i));
    const double b = std::min(to, high(i));
    if (b <= a) continue;
    const double share = pages * (b - a) / (to - from);
    slot.pages[i] += share;
    slot.page_rounds[i] += share * (a + b) / 2.0;
  }
}

double Arrivals::weighed(const Slot& slot, double rounds) {
  double total = 0.0;
  for (std::size_t i = 0; i < kBuckets && low(i) < rounds; ++i) {
    if (slot.pages[i] <= 0.0) continue;
    if (high(i) <= rounds) {
      // Every page of the bucket is ahead: sum of (1 - p / K) = pages - sum(p) / K.
      total += slot.pages[i] - slot.page_rounds[i] / rounds;
    } else {
      total += straddling(slot.pages[i], slot.page_rounds[i], low(i), high(i), rounds);
    }
  }
  return std::max(total, 0.0);
}

bool Arrivals::measuring() const {
  return slot_index(clock_.now()) >= 3;
}

double Arrivals::competing_rate(double rounds) const {
  if (!(rounds > 0.0)) return 0.0;
  const std::int64_t current = slot_index(clock_.now());
  // The slots that have ended within the window, the empty ones included.
  const auto ended = static_cast<std::size_t>(std::min<std::int64_t>(current, kSlots - 1));
  if (ended < 3) return 0.0;
  double sum = 0.0;
  double largest = 0.0;
  double next = 0.0;  // the second largest
  std::size_t busy = 0;
  for (std::size_t back = 1; back <= ended; ++back) {
    const Slot& slot =
        slots_[static_cast<std::size_t>(current - static_cast<std::int64_t>(back)) % kSlots];
    if (slot.index != current - static_cast<std::int64_t>(back)) continue;  // nothing arrived
    const double w = weighed(slot, rounds);
    if (w > 0.0) ++busy;
    sum += w;
    next = std::max(next, std::min(largest, w));
    largest = std::max(largest, w);
  }
  if (busy < min_busy_slots_) return 0.0;
  const bool as_next = busiest_ == Busiest::as_next;
  sum -= as_next ? largest - next : largest;
  const std::size_t counted = as_next ? ended : ended - 1;
  return sum / (static_cast<double>(counted) * Seconds(slot_length_).count());
}

}  // namespace fairlane
