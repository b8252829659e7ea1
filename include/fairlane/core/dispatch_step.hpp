// DispatchStep: what DispatchPolicy::next_step answers, the dispatch loop's next move:
//   Send         take this page (already taken from its lane) and call the provider; the
//                Lease holds its request, in-flight place and token reservation
//   SleepUntil   nothing may go before `until`: a bucket's exact refill time, the end of a
//                pause, or a held page's release, whichever is first
//   WaitForCall  the in-flight cap is full, or one call is out probing an outage: wait for
//                a call to end (or `until`, a held page's release)
//   FailPage     this page (taken from its lane) can never fit: its reason names its size
//   Idle         nothing is queued: wait for new work (or `until`, a held page's release)
// After a Send or a FailPage the loop asks again at once. Any change that can let a page go
// (new work, a call's end, a cancellation) is a reason to ask again before `until`.
//
// Thread safety: value types; a Lease belongs to its Budget's thread.
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "fairlane/core/clock.hpp"
#include "fairlane/core/fair_scheduler.hpp"
#include "fairlane/core/lease.hpp"

namespace fairlane {

namespace step {
struct Send {
  QueuedPage page;
  Lease lease;
};
struct SleepUntil {
  Clock::time_point until;
};
struct WaitForCall {
  Clock::time_point until = Clock::time_point::max();
};
struct FailPage {
  QueuedPage page;
  std::string reason;
};
struct Idle {
  Clock::time_point until = Clock::time_point::max();
};
}  // namespace step

using DispatchStep =
    std::variant<step::Send, step::SleepUntil, step::WaitForCall, step::FailPage, step::Idle>;

// When to ask again without being told of a change: the `until` of a wait
// (Clock::time_point::max() for none), std::nullopt after a Send or a FailPage (at once).
[[nodiscard]] inline std::optional<Clock::time_point> wake_time(const DispatchStep& step) {
  if (const auto* sleep = std::get_if<step::SleepUntil>(&step)) return sleep->until;
  if (const auto* wait = std::get_if<step::WaitForCall>(&step)) return wait->until;
  if (const auto* idle = std::get_if<step::Idle>(&step)) return idle->until;
  return std::nullopt;
}

}  // namespace fairlane
