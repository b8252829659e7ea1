// CallOutcome: how one provider call ended, in the core's terms, for DispatchPolicy. The
// service maps its provider client's outcomes to these (src/service/dispatcher.cpp), the
// simulator its provider model's; the core knows no HTTP status, header or wire format.
//
//   Answered        the provider ran the call and reported its usage
//   RateLimited     429: the account's rate limit; Retry-After when the provider gave one
//   Overloaded      503 (Anthropic: 529): the provider is over its capacity; the same
//   Unreachable     no connection could be made (refused, no such host): nothing was sent
//   Rejected        401, 402, 407: the provider refuses fairlane itself (its key, its
//                   account, a proxy's login); every page would meet the same until an
//                   operator mends it
//   TransientError  5xx, timeout, reset: the call may succeed if made again
//   ClientError     any other 4xx but 408 and 429: the request itself is wrong; again would
//                   not help. Also a 2xx in which the model declines the page (a refusal),
//                   with the tokens it counted
//   Unreadable      a 2xx whose answer could not be read: it ran and its tokens counted
//
// Every reason is a sentence for the page's error ("the provider answered 500 (...)").
// Whatever the end, the answer may say what the provider's budgets are (Announced: from its
// rate-limit headers), which the policy's Budget follows.
//
// Thread safety: value types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "fairlane/core/clock.hpp"

namespace fairlane {

namespace call {
struct Answered {
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
};
struct RateLimited {
  std::optional<Clock::duration> retry_after;
};
struct Overloaded {
  std::optional<Clock::duration> retry_after;
};
struct Unreachable {
  std::string reason;
};
struct Rejected {
  std::string reason;
};
struct TransientError {
  std::string reason;
};
struct ClientError {
  std::string reason;
  std::optional<std::int64_t> used_tokens = std::nullopt;  // when the provider counted some
};
struct Unreadable {
  std::string reason;
};
}  // namespace call

using CallEnd =
    std::variant<call::Answered, call::RateLimited, call::Overloaded, call::Unreachable,
                 call::Rejected, call::TransientError, call::ClientError, call::Unreadable>;

// What the provider said of its limits with an answer; each field absent when it did not.
struct Announced {
  std::optional<std::int64_t> requests_limit;      // per minute
  std::optional<std::int64_t> tokens_limit;        // per minute, the tightest it announced
  std::optional<std::int64_t> requests_remaining;  // left now
  std::optional<std::int64_t> tokens_remaining;
};

struct CallOutcome {
  CallEnd end;
  // From the call's start to its end; the service counts from the page leaving its lane (its
  // dispatch's commit and its text's read go before the call).
  Clock::duration latency{};
  Announced announced{};
};

}  // namespace fairlane
