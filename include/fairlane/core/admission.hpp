// Admission: what Budget::admit answers for one provider call: a Lease (go), a Wait (not
// now, and for how long), or TooLarge (never).
//
// Thread safety: value types; a Lease belongs to its Budget's thread.
#pragma once

#include <cstdint>
#include <variant>

#include "fairlane/core/clock.hpp"
#include "fairlane/core/lease.hpp"
#include "fairlane/core/limit.hpp"

namespace fairlane {

// Not now. `wait` is how long until both buckets can take the call, and `limit` is the one
// holding it back longest: the bucket with the longer wait, or concurrency when both
// buckets could take it now but no in-flight permit is free (then `wait` is zero and the
// caller waits for a call to end).
struct Wait {
  Clock::duration wait;
  Limit limit;
};

// Never: the call's estimated tokens exceed a whole minute's TPM, so no wait can fit it.
struct TooLarge {
  std::int64_t tokens;
  std::int64_t capacity;
};

using Admission = std::variant<Lease, Wait, TooLarge>;

}  // namespace fairlane
