// Arrivals: the recent rate at which other work joins the lanes, by where in fair order it
// lands, so that an ETA can count the work that will arrive AHEAD of a job while it waits
// (DESIGN.md section 5; the why is in docs/architecture.md, "Promises under arrivals").
//
// Fair order is measured in rounds: deficit round robin moves every backlogged lane forward
// at the same pace, one page per unit of weight a round, so page j of a lane of weight w is
// j / w rounds from the front. A job whose last page is K rounds from the front is done
// when K rounds have passed; a page that arrives s of those T seconds in, at round p of its
// lane, goes before that last page iff p < K (1 - s / T). Averaged over the wait, an
// arriving page at round p delays the job with weight (1 - p / K)+, so the rate of
// competing arrivals is
//
//   competing_rate(K) = sum over recent arriving pages of (1 - p / K)+, per second
//
// A heavy user's burst counts only its first K rounds (the rest lands behind the job);
// a newcomer's whole small book counts.
//
// The rate is measured over the last `window`, in ten slots, and only over slots that have
// ended: what arrived in the current slot is mostly still queued, and counted there already.
// The slot with the most competing work is left out, so one burst (a user's shelf of books
// at once) is not taken for a rate, and the rest are averaged: there is no rate until three
// slots have ended (of two, one may be the burst). Or, where the slots are few and hold a
// book or two each (the estimator's warm-up), the busiest counts as much as the next
// busiest (Busiest::as_next): the burst still goes, and the rate keeps the share of the
// books that leaving the slot out would take with it.
// Rounds are kept in 42 buckets, [0, 1), then [2^i, 2^(i+1)) up to 2^40 rounds: each holds
// its pages and their sum of rounds, so a page's weight is exact for a bucket below K and
// interpolated in the bucket that holds K (its pages spread evenly over the stretch, from the
// bucket's nearer edge, that has their mean in its middle). record() costs O(buckets),
// competing_rate() O(slots x buckets).
//
// Thread safety: none, by design; it lives on the io_context thread with the estimator.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "fairlane/core/clock.hpp"

namespace fairlane {

// What the rate does with the ended slot that holds the most competing work.
enum class Busiest : std::uint8_t {
  // Left out, the other ended slots averaged. Over 3 to 9 slots of 30 s of a Poisson stream
  // of books of 3 to 36 pages the rate comes out 0.85 to 0.93 of the true one.
  left_out,
  // Counted as the next busiest, every ended slot averaged (a winsorized mean). Over 3 to 9
  // slots of 3 s of the same stream, 0.64 to 0.90 of the true rate, where left out gives
  // 0.54 to 0.76: most slots hold no book, and the busiest holds a large share of the few
  // (docs/architecture.md, "Promises under arrivals").
  as_next,
};

class Arrivals {
 public:
  static constexpr std::size_t kBuckets = 42;
  static constexpr std::size_t kSlots = 10;

  // `clock` must outlive the arrivals. `window` of at least kSlots nanoseconds. With
  // `min_busy_slots`, competing_rate is 0 until that many ended slots hold competing work (a
  // short window would otherwise take one burst, the busiest slot left out, for a rate).
  explicit Arrivals(const Clock& clock, Clock::duration window = std::chrono::minutes(5),
                    std::size_t min_busy_slots = 0, Busiest busiest = Busiest::left_out);

  // `pages` pages joined a lane, spread evenly over rounds [first_round, last_round] of it.
  void record(double first_round, double last_round, double pages);

  // For arrivals rebuilt from a history (a restart's, from the jobs the store kept), before
  // anything else is recorded: as if they had been counting for `counted` until now, and
  // `pages` had joined a lane `ago` before now, given oldest first. What is older than the
  // counting or the window is left out; a negative `ago` counts as now.
  void counted_for(Clock::duration counted);
  void record_ago(Clock::duration ago, double first_round, double last_round, double pages);

  // Pages a second, of those arriving lately, that would go before a job's last page
  // `rounds` rounds from the front, averaged over its wait (the formula above).
  [[nodiscard]] double competing_rate(double rounds) const;

  // Whether enough of the window has passed for competing_rate to measure anything (three
  // slots ended); until then it says 0.
  [[nodiscard]] bool measuring() const;

  // Goes on from `before`'s history, as if it had recorded what `before` did: for arrivals
  // rebuilt with their estimator (a cluster's view read again, a takeover). The two must have
  // the same window and clocks that read the same time (std::invalid_argument otherwise).
  void continue_from(const Arrivals& before);

 private:
  struct Slot {
    std::int64_t index = -1;  // which slot of time since start it holds; -1: none yet
    std::array<double, kBuckets> pages{};
    std::array<double, kBuckets> page_rounds{};  // sum of pages x their round
  };

  [[nodiscard]] std::int64_t slot_index(Clock::time_point t) const;
  // The weight of a slot's pages for a job `rounds` rounds out.
  [[nodiscard]] static double weighed(const Slot& slot, double rounds);

  // Constant after construction.
  const Clock& clock_;
  const Clock::duration slot_length_;
  const std::size_t min_busy_slots_;
  const Busiest busiest_;

  // Only touched on the owning thread: slot i % kSlots holds slot i, counted from started_.
  Clock::time_point started_;
  std::array<Slot, kSlots> slots_{};
};

}  // namespace fairlane
