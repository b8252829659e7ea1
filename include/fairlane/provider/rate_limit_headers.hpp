// What a provider's response headers say about its limits, and the parsers that read
// them: Retry-After (seconds or an HTTP-date) and retry-after-ms; OpenAI's
// x-ratelimit-{limit,remaining,reset}-{requests,tokens} with reset durations such as "1s",
// "6m0s" or "120ms"; Anthropic's anthropic-ratelimit-{requests,tokens,input-tokens,
// output-tokens}-{limit,remaining,reset} with RFC 3339 reset times.
//
// Pure functions; every field is optional because providers send what they send. A value
// that does not parse is left out rather than guessed.
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fairlane/core/clock.hpp"
#include "fairlane/core/ids.hpp"

namespace fairlane {

// One of the provider's budgets: its size, what is left, and when it is whole again.
struct RateLimitBucket {
  std::optional<std::int64_t> limit;
  std::optional<std::int64_t> remaining;
  std::optional<Clock::duration> reset;  // from the response's time
};

struct RateLimitHeaders {
  RateLimitBucket requests;
  RateLimitBucket tokens;         // OpenAI's tokens; Anthropic's combined tokens
  RateLimitBucket input_tokens;   // Anthropic only
  RateLimitBucket output_tokens;  // Anthropic only
  // How long to wait before calling again (Retry-After, or retry-after-ms when both came).
  std::optional<Clock::duration> retry_after;

  // What is left of the budgets tokens_limit() follows, the tightest: Anthropic's output
  // tokens left are not (until 2026-12-07 they were, and held the bucket of input + output
  // down to the output share, a fifth to a sixth of the account's throughput).
  // std::nullopt when none was reported.
  [[nodiscard]] std::optional<std::int64_t> tokens_remaining() const;

  // The tightest per-minute token limit the provider announced that fairlane's tokens
  // bucket (input + output tokens per call) can follow: OpenAI's tokens limit; Anthropic's
  // combined tokens limit and its input-tokens limit (input alone is at most input +
  // output, so keeping the sum under it keeps the input under it too). Anthropic's
  // output-tokens limit is left out: it counts only the output share, and holding input +
  // output to it would cut throughput by the ratio of input to output. A limit of 0 is
  // left out too: no bucket can follow it. std::nullopt when none was announced.
  [[nodiscard]] std::optional<std::int64_t> tokens_limit() const;
};

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// Reads every header fairlane understands; names are matched case-insensitively. `now` is
// when the response arrived, for turning dates into durations.
[[nodiscard]] RateLimitHeaders parse_rate_limit_headers(const HeaderList& headers, WallTime now);

// Retry-After: whole seconds ("120"), or an HTTP-date ("Wed, 21 Oct 2015 07:28:00 GMT")
// turned into the time from `now` (zero if already past).
[[nodiscard]] std::optional<Clock::duration> parse_retry_after(std::string_view value,
                                                               WallTime now);

// A duration in Go's notation, as OpenAI's reset headers use: "1s", "6m0s", "120ms",
// "1h2m3.5s", "0.5s", "250us". No sign, at least one number-unit pair.
[[nodiscard]] std::optional<Clock::duration> parse_go_duration(std::string_view text);

// An RFC 3339 timestamp: "2024-05-01T12:00:30Z", "2024-05-01T12:00:30.25+02:00".
[[nodiscard]] std::optional<WallTime> parse_rfc3339(std::string_view text);

}  // namespace fairlane
