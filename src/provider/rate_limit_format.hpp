// The inverses of the rate-limit header parsers (fairlane/provider/rate_limit_headers.hpp),
// as providers write the values: for the provider stand-in and the parsers' round-trip tests
// and fuzz target, not for an embedder.
//
// Thread safety: pure functions.
#pragma once

#include <string>

#include "fairlane/core/clock.hpp"

namespace fairlane {

// "6m0s", "1.5s", "120ms": Go's notation, as OpenAI's reset headers use it.
[[nodiscard]] std::string format_go_duration(Clock::duration d);
// "2024-05-01T12:00:30Z": whole seconds, rounded up so that a reset is never announced early.
[[nodiscard]] std::string format_rfc3339(WallTime t);

}  // namespace fairlane
