// CallVerdict: what DispatchPolicy decides when a call has ended, for its caller to record
// (the service commits one transition per verdict; the simulator counts them):
//   Complete  the page is done: store its answer
//   Requeue   the page is back at the head of its lane, or held back a while (its text
//             could not be read), no attempt spent (or, its job cancelled meanwhile,
//             forgotten: the store cancels it as it comes back)
//   Retry     one attempt spent: the policy holds the page back for `delay` (until
//             `not_before` on the wall clock, which the store keeps for a restart)
//   Fail      the page failed for good, with `reason`
// `outage_pause` is set when this outcome paused all dispatch because the provider could
// not be reached, with the pause's length.
//
// Thread safety: value types.
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "fairlane/core/clock.hpp"
#include "fairlane/core/ids.hpp"

namespace fairlane {

namespace verdict {
struct Complete {};
struct Requeue {};
struct Retry {
  std::string reason;
  Clock::duration delay{};
  WallTime not_before;
};
struct Fail {
  std::string reason;
};
}  // namespace verdict

struct CallVerdict {
  std::variant<verdict::Complete, verdict::Requeue, verdict::Retry, verdict::Fail> action;
  std::optional<Clock::duration> outage_pause;
};

}  // namespace fairlane
