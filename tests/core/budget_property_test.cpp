// Property: whatever the sequence of admissions, settlements, cancellations and clock
// steps, a Budget never lets more than C + r*T through in any window of length T, for
// requests and for tokens alike, and never has more calls in flight than its cap.
//
// For tokens, "let through" is net of what came back: the tokens reserved by admissions in
// the window minus the refunds the window's settlements and cancellations are owed (the
// unused part of a reservation, all of it on cancel; an overrun owes nothing back). That
// is the bucket's conservation law, L(t2) = L(t1) + refill - reserved + refunded, with
// L(t1) <= C and refill <= r*T; the test keeps its own ledger of what is owed, so a bucket
// that refunds twice, refills too fast or forgets its cap breaks it.
//
// With announced limits (Budget::follow_announced) the same law holds at the effective
// capacity C'(t): a window lets through at most C'(t1) + the integral of r'(t), plus the
// excess over C' of a page admitted above it (from a full bucket, into debt); and never
// more than the configured C + r*T. A bucket that keeps the configured refill after a
// lower announcement, forgives debt, or rises above its configured limit breaks it.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <utility>
#include <variant>
#include <vector>

#include "core/fake_clock.hpp"
#include "fairlane/core/budget.hpp"

using namespace std::chrono_literals;
using fairlane::Budget;
using fairlane::BudgetLimits;
using fairlane::Clock;
using fairlane::FakeClock;
using fairlane::Lease;

namespace {

constexpr std::int64_t kNanosPerMinute = 60'000'000'000;

// One event in the ledger, in the order it happened.
struct Event {
  std::int64_t at_ns;
  std::int64_t requests;  // 1 for an admission, else 0
  std::int64_t tokens;    // + reserved on admission, - refund owed on settle or cancel
};

// Checks every run of consecutive events i..j: what they let through is at most
// C * (1 minute + (t_j - t_i)) / 1 minute. Integer arithmetic: exact.
void check_windows(const std::vector<Event>& events, const BudgetLimits& limits,
                   std::uint64_t seed) {
  const std::int64_t rpm = limits.requests_per_minute;
  const std::int64_t tpm = limits.tokens_per_minute;
  for (std::size_t i = 0; i < events.size(); ++i) {
    std::int64_t requests = 0;
    std::int64_t tokens = 0;
    for (std::size_t j = i; j < events.size(); ++j) {
      requests += events[j].requests;
      tokens += events[j].tokens;
      const std::int64_t window_ns = events[j].at_ns - events[i].at_ns;
      if (rpm > 0 && requests * kNanosPerMinute > rpm * (kNanosPerMinute + window_ns)) {
        FAIL("seed " << seed << ": " << requests << " requests let through in " << window_ns
                     << " ns at RPM " << rpm);
      }
      if (tpm > 0 && tokens * kNanosPerMinute > tpm * (kNanosPerMinute + window_ns)) {
        FAIL("seed " << seed << ": " << tokens << " tokens let through in " << window_ns
                     << " ns at TPM " << tpm);
      }
    }
  }
}

Clock::duration random_step(std::mt19937_64& rng) {
  switch (std::uniform_int_distribution<int>(0, 4)(rng)) {
    case 0:
      return 0ns;
    case 1:
      return std::chrono::nanoseconds(std::uniform_int_distribution<std::int64_t>(1, 5'000)(rng));
    case 2:
      return std::chrono::microseconds(
          std::uniform_int_distribution<std::int64_t>(1, 900'000)(rng));
    case 3:
      return std::chrono::milliseconds(std::uniform_int_distribution<std::int64_t>(1, 5'000)(rng));
    default:
      return std::chrono::seconds(std::uniform_int_distribution<std::int64_t>(1, 90)(rng));
  }
}

}  // namespace

TEST_CASE(
    "Property: no window of length T lets through more than C + r*T, nor more in flight than the "
    "cap") {
  constexpr std::uint64_t kSequences = 10'000;
  constexpr std::uint64_t kFirstSeed = 0x5eed'0000;
  constexpr int kStepsPerSequence = 60;
  std::int64_t admitted = 0;
  std::array<std::int64_t, 3> waits_by_limit{};
  for (std::uint64_t seed = kFirstSeed; seed < kFirstSeed + kSequences; ++seed) {
    std::mt19937_64 rng(seed);
    // One limit in ten is 0 (unlimited): its bound is not checked, the others still are.
    const auto maybe_unlimited = [&rng](std::int64_t limit) {
      return std::uniform_int_distribution<int>(0, 9)(rng) == 0 ? 0 : limit;
    };
    const BudgetLimits limits{
        .requests_per_minute =
            maybe_unlimited(std::uniform_int_distribution<std::int64_t>(1, 120)(rng)),
        .tokens_per_minute =
            maybe_unlimited(std::uniform_int_distribution<std::int64_t>(100, 20'000)(rng)),
        .max_in_flight = maybe_unlimited(std::uniform_int_distribution<std::int64_t>(1, 8)(rng))};
    const std::int64_t largest_cost =
        limits.tokens_per_minute > 0 ? limits.tokens_per_minute : 20'000;
    FakeClock clock;
    Budget budget(clock, limits);
    std::vector<Event> events;
    std::vector<Lease> open;
    int sequence_admitted = 0;
    const auto now_ns = [&clock] { return (clock.now() - Clock::time_point{}).count(); };

    for (int step = 0; step < kStepsPerSequence; ++step) {
      const int action = std::uniform_int_distribution<int>(0, 9)(rng);
      if (action <= 3) {
        const std::int64_t cost =
            std::uniform_int_distribution<std::int64_t>(0, largest_cost * 11 / 10)(rng);
        auto admission = budget.admit(cost);
        if (auto* lease = std::get_if<Lease>(&admission)) {
          if (lease->reserved_tokens() != cost) {
            FAIL("seed " << seed << ": a lease for " << cost << " tokens reserved "
                         << lease->reserved_tokens());
          }
          events.push_back({now_ns(), 1, cost});
          open.push_back(std::move(*lease));
          ++sequence_admitted;
        } else if (auto* wait = std::get_if<fairlane::Wait>(&admission)) {
          ++waits_by_limit[static_cast<std::size_t>(wait->limit)];
        }
        if (limits.max_in_flight > 0 && budget.in_flight().in_use() > limits.max_in_flight) {
          FAIL("seed " << seed << ": " << budget.in_flight().in_use() << " in flight over a cap of "
                       << limits.max_in_flight);
        }
      } else if (action <= 7 && !open.empty()) {
        const auto pick = std::uniform_int_distribution<std::size_t>(0, open.size() - 1)(rng);
        Lease lease = std::move(open[pick]);
        open.erase(open.begin() + static_cast<std::ptrdiff_t>(pick));
        const std::int64_t reserved = lease.reserved_tokens();
        const int ending = std::uniform_int_distribution<int>(0, 3)(rng);
        if (ending == 0) continue;  // dropped open: nothing is owed back
        if (ending == 1) {
          lease.cancel();
          events.push_back({now_ns(), 0, -reserved});
        } else {
          const std::int64_t actual =
              std::uniform_int_distribution<std::int64_t>(0, reserved * 3 / 2)(rng);
          lease.settle(actual);
          events.push_back({now_ns(), 0, -std::max<std::int64_t>(0, reserved - actual)});
        }
        // The lease is over: settling or cancelling it again must not show in the ledger.
        lease.settle(0);
        lease.cancel();
      } else {
        clock.advance(random_step(rng));
      }
    }
    check_windows(events, limits, seed);
    admitted += sequence_admitted;
  }
  // The sequences did reach every corner: admissions, and waits on each of the limits.
  CHECK(admitted > 50'000);
  CHECK(waits_by_limit[static_cast<std::size_t>(fairlane::Limit::requests)] > 1'000);
  CHECK(waits_by_limit[static_cast<std::size_t>(fairlane::Limit::concurrency)] > 1'000);
  CHECK(waits_by_limit[static_cast<std::size_t>(fairlane::Limit::tokens)] > 1'000);
}

namespace {

// One event of a run with announced limits: what it let through (as Event), a take's
// excess over the effective capacity (a cost above it goes from a full bucket into debt),
// and the effective limits after it.
struct AnnouncedEvent {
  std::int64_t at_ns;
  std::int64_t requests;
  std::int64_t tokens;
  std::int64_t excess;
  std::int64_t rpm_after;
  std::int64_t tpm_after;
};

// Checks every run of consecutive events i..j against the limits in force: what they let
// through is at most the effective capacity before event i, plus the refill at the
// effective rates between the events, plus the largest excess of a take among them, plus
// one microsecond of the configured refill per change of rate (a bucket credits whole
// microseconds: the fraction of one pending at a change refills at the new rate). Units:
// tokens times nanoseconds per minute, so the arithmetic is exact.
void check_announced_windows(const std::vector<AnnouncedEvent>& events, const BudgetLimits& limits,
                             std::uint64_t seed) {
  constexpr std::int64_t kNanosPerMicro = 1'000;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const std::int64_t rpm_start = i == 0 ? limits.requests_per_minute : events[i - 1].rpm_after;
    const std::int64_t tpm_start = i == 0 ? limits.tokens_per_minute : events[i - 1].tpm_after;
    std::int64_t requests = 0;
    std::int64_t tokens = 0;
    std::int64_t requests_refill = 0;
    std::int64_t tokens_refill = 0;
    std::int64_t excess = 0;
    std::int64_t changes = 0;
    for (std::size_t j = i; j < events.size(); ++j) {
      if (j > i) {
        const std::int64_t dt_ns = events[j].at_ns - events[j - 1].at_ns;
        requests_refill += events[j - 1].rpm_after * dt_ns;
        tokens_refill += events[j - 1].tpm_after * dt_ns;
        const std::int64_t rpm_before = j - 1 == 0 ? rpm_start : events[j - 2].rpm_after;
        const std::int64_t tpm_before = j - 1 == 0 ? tpm_start : events[j - 2].tpm_after;
        if (events[j - 1].rpm_after != rpm_before || events[j - 1].tpm_after != tpm_before) {
          ++changes;
        }
      }
      requests += events[j].requests;
      tokens += events[j].tokens;
      excess = std::max(excess, events[j].excess);
      const std::int64_t rpm = limits.requests_per_minute;
      const std::int64_t tpm = limits.tokens_per_minute;
      if (rpm > 0 && requests * kNanosPerMinute > rpm_start * kNanosPerMinute + requests_refill +
                                                      changes * rpm * kNanosPerMicro) {
        FAIL("seed " << seed << ": " << requests << " requests let through from event " << i
                     << " to " << j << " at announced RPM " << rpm_start << " and after");
      }
      if (tpm > 0 && tokens * kNanosPerMinute > (tpm_start + excess) * kNanosPerMinute +
                                                    tokens_refill +
                                                    changes * tpm * kNanosPerMicro) {
        FAIL("seed " << seed << ": " << tokens << " tokens let through from event " << i << " to "
                     << j << " at announced TPM " << tpm_start << " and after");
      }
    }
  }
}

}  // namespace

TEST_CASE(
    "Property: with announced limits, no window lets through more than the effective limits "
    "allow, nor more than the configured ones") {
  constexpr std::uint64_t kSequences = 3'000;
  constexpr std::uint64_t kFirstSeed = 0xa11e'0000;
  constexpr int kStepsPerSequence = 60;
  std::int64_t admitted = 0;
  std::int64_t lowered = 0;
  std::int64_t raised = 0;
  std::int64_t oversize = 0;
  for (std::uint64_t seed = kFirstSeed; seed < kFirstSeed + kSequences; ++seed) {
    std::mt19937_64 rng(seed);
    const BudgetLimits limits{
        .requests_per_minute = std::uniform_int_distribution<std::int64_t>(1, 120)(rng),
        .tokens_per_minute = std::uniform_int_distribution<std::int64_t>(100, 20'000)(rng),
        .max_in_flight = std::uniform_int_distribution<std::int64_t>(1, 8)(rng)};
    FakeClock clock;
    Budget budget(clock, limits);
    std::vector<AnnouncedEvent> events;
    std::vector<Event> plain;  // the same ledger, for the configured bound
    std::vector<Lease> open;
    std::int64_t rpm_now = limits.requests_per_minute;
    std::int64_t tpm_now = limits.tokens_per_minute;
    const auto now_ns = [&clock] { return (clock.now() - Clock::time_point{}).count(); };
    // An announcement: absent, nonsense (<= 0), or anything from a tenth to twice the limit.
    const auto announce = [&rng](std::int64_t configured) -> std::optional<std::int64_t> {
      switch (std::uniform_int_distribution<int>(0, 5)(rng)) {
        case 0:
          return std::nullopt;
        case 1:
          return std::uniform_int_distribution<std::int64_t>(-5, 0)(rng);
        default:
          return std::uniform_int_distribution<std::int64_t>(
              std::max<std::int64_t>(1, configured / 10), configured * 2)(rng);
      }
    };
    const auto record = [&](std::int64_t requests, std::int64_t tokens, std::int64_t excess) {
      events.push_back({now_ns(), requests, tokens, excess, rpm_now, tpm_now});
      plain.push_back({now_ns(), requests, tokens});
    };

    for (int step = 0; step < kStepsPerSequence; ++step) {
      const int action = std::uniform_int_distribution<int>(0, 11)(rng);
      if (action <= 3) {
        const std::int64_t cost =
            std::uniform_int_distribution<std::int64_t>(0, limits.tokens_per_minute * 11 / 10)(rng);
        auto admission = budget.admit(cost);
        if (auto* lease = std::get_if<Lease>(&admission)) {
          const std::int64_t excess = std::max<std::int64_t>(0, cost - tpm_now);
          if (excess > 0) ++oversize;
          record(1, cost, excess);
          open.push_back(std::move(*lease));
          ++admitted;
        }
        if (budget.in_flight().in_use() > limits.max_in_flight) {
          FAIL("seed " << seed << ": " << budget.in_flight().in_use() << " in flight over a cap of "
                       << limits.max_in_flight);
        }
      } else if (action <= 7 && !open.empty()) {
        const auto pick = std::uniform_int_distribution<std::size_t>(0, open.size() - 1)(rng);
        Lease lease = std::move(open[pick]);
        open.erase(open.begin() + static_cast<std::ptrdiff_t>(pick));
        const std::int64_t reserved = lease.reserved_tokens();
        const int ending = std::uniform_int_distribution<int>(0, 3)(rng);
        if (ending == 0) continue;  // dropped open: nothing is owed back
        if (ending == 1) {
          lease.cancel();
          record(0, -reserved, 0);
        } else {
          const std::int64_t actual =
              std::uniform_int_distribution<std::int64_t>(0, reserved * 3 / 2)(rng);
          lease.settle(actual);
          record(0, -std::max<std::int64_t>(0, reserved - actual), 0);
        }
      } else if (action <= 9) {
        const auto requests_limit = announce(limits.requests_per_minute);
        const auto tokens_limit = announce(limits.tokens_per_minute);
        budget.follow_announced(requests_limit, tokens_limit);
        const std::int64_t tpm_before = tpm_now;
        if (requests_limit && *requests_limit > 0) {
          rpm_now = std::min(limits.requests_per_minute, *requests_limit);
        }
        if (tokens_limit && *tokens_limit > 0) {
          tpm_now = std::min(limits.tokens_per_minute, *tokens_limit);
        }
        if (tpm_now < tpm_before) ++lowered;
        if (tpm_now > tpm_before) ++raised;
        const BudgetLimits effective = budget.effective_limits();
        if (effective.requests_per_minute != rpm_now || effective.tokens_per_minute != tpm_now ||
            effective.max_in_flight != limits.max_in_flight) {
          FAIL("seed " << seed << ": effective limits " << effective.requests_per_minute << "/"
                       << effective.tokens_per_minute << ", expected " << rpm_now << "/"
                       << tpm_now);
        }
        record(0, 0, 0);
      } else {
        clock.advance(random_step(rng));
      }
      if (budget.tokens().level() > static_cast<double>(tpm_now) ||
          budget.requests().level() > static_cast<double>(rpm_now)) {
        FAIL("seed " << seed << ": a level above its effective capacity");
      }
    }
    check_announced_windows(events, limits, seed);
    check_windows(plain, limits, seed);
  }
  // The sequences did reach every corner: limits lowered and raised, pages above the
  // announced limit admitted from a full bucket.
  CHECK(admitted > 10'000);
  CHECK(lowered > 1'000);
  CHECK(raised > 1'000);
  CHECK(oversize > 100);
}
