#include <doctest/doctest.h>

#include <chrono>

#include "fairlane/provider/rate_limit_headers.hpp"
#include "provider/rate_limit_format.hpp"

using namespace std::chrono_literals;
using fairlane::HeaderList;
using fairlane::parse_go_duration;
using fairlane::parse_rate_limit_headers;
using fairlane::parse_retry_after;
using fairlane::parse_rfc3339;
using fairlane::WallTime;

namespace {

// 2024-08-21T17:00:00Z
const WallTime kNow = WallTime(std::chrono::seconds(1'724'259'600));

std::int64_t ms(fairlane::Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace

TEST_CASE("Go durations as OpenAI's reset headers write them") {
  CHECK(ms(*parse_go_duration("1s")) == 1'000);
  CHECK(ms(*parse_go_duration("6m0s")) == 360'000);
  CHECK(ms(*parse_go_duration("120ms")) == 120);
  CHECK(ms(*parse_go_duration("1h2m3.5s")) == 3'723'500);
  CHECK(ms(*parse_go_duration("0.5s")) == 500);
  CHECK(parse_go_duration("250us")->count() == 250'000);
  CHECK(parse_go_duration("0")->count() == 0);
  CHECK_FALSE(parse_go_duration(""));
  CHECK_FALSE(parse_go_duration("6m0"));
  CHECK_FALSE(parse_go_duration("-1s"));
  CHECK_FALSE(parse_go_duration("1 s"));
  CHECK_FALSE(parse_go_duration("1d"));
  CHECK_FALSE(parse_go_duration("s"));
}

TEST_CASE("RFC 3339 times as Anthropic's reset headers write them") {
  CHECK(*parse_rfc3339("2024-08-21T17:00:30Z") == kNow + 30s);
  CHECK(*parse_rfc3339("2024-08-21T17:00:30.25Z") == kNow + 30250ms);
  CHECK(*parse_rfc3339("2024-08-21T19:00:30+02:00") == kNow + 30s);
  CHECK(*parse_rfc3339("2024-08-21T16:30:00-00:30") == kNow);
  CHECK_FALSE(parse_rfc3339("2024-08-21 17:00"));
  CHECK_FALSE(parse_rfc3339("2024-02-30T00:00:00Z"));
  CHECK_FALSE(parse_rfc3339("2024-08-21T25:00:00Z"));
  CHECK_FALSE(parse_rfc3339("2024-08-21T17:00:30"));
  CHECK_FALSE(parse_rfc3339("yesterday"));
}

TEST_CASE("An RFC 3339 time is in range once its offset is applied, so it reads back") {
  // Years 1970 to 2261 in UTC: an offset can move a time at either end out of them, and what
  // was accepted there was written in a year the parser refuses.
  CHECK_FALSE(parse_rfc3339("1970-01-01T00:00:00+00:01"));
  CHECK_FALSE(parse_rfc3339("2261-12-31T23:59:59-23:59"));
  CHECK_FALSE(parse_rfc3339("2261-12-31T23:59:59.5Z"));  // written as the next second
  for (const char* edge : {"1970-01-01T00:00:00Z", "1970-01-01T00:01:00+00:01",
                           "2261-12-31T23:59:59Z", "2261-12-31T23:00:00-00:59"}) {
    const auto time = parse_rfc3339(edge);
    REQUIRE_MESSAGE(time, edge);
    const auto again = parse_rfc3339(fairlane::format_rfc3339(*time));
    REQUIRE_MESSAGE(again, edge);
    CHECK(*again == *time);
  }
}

TEST_CASE("Retry-After as seconds or as an HTTP-date") {
  CHECK(ms(*parse_retry_after("120", kNow)) == 120'000);
  CHECK(ms(*parse_retry_after(" 0 ", kNow)) == 0);
  CHECK(ms(*parse_retry_after("Wed, 21 Aug 2024 17:00:30 GMT", kNow)) == 30'000);
  // The obsolete forms HTTP still allows.
  CHECK(ms(*parse_retry_after("Wednesday, 21-Aug-24 17:00:45 GMT", kNow)) == 45'000);
  CHECK(ms(*parse_retry_after("Wed Aug 21 17:01:00 2024", kNow)) == 60'000);
  // A date already past means now.
  CHECK(ms(*parse_retry_after("Wed, 21 Aug 2024 16:00:00 GMT", kNow)) == 0);
  CHECK_FALSE(parse_retry_after("-5", kNow));
  CHECK_FALSE(parse_retry_after("soon", kNow));
  CHECK_FALSE(parse_retry_after("", kNow));
}

TEST_CASE("OpenAI's rate-limit headers, as its documentation shows them") {
  const HeaderList headers{
      {"x-ratelimit-limit-requests", "60"},     {"x-ratelimit-limit-tokens", "150000"},
      {"x-ratelimit-remaining-requests", "59"}, {"x-ratelimit-remaining-tokens", "149984"},
      {"x-ratelimit-reset-requests", "1s"},     {"x-ratelimit-reset-tokens", "6m0s"},
      {"Content-Type", "application/json"}};
  const auto parsed = parse_rate_limit_headers(headers, kNow);
  CHECK(parsed.requests.limit == 60);
  CHECK(parsed.requests.remaining == 59);
  CHECK(ms(*parsed.requests.reset) == 1'000);
  CHECK(parsed.tokens.limit == 150'000);
  CHECK(parsed.tokens.remaining == 149'984);
  CHECK(ms(*parsed.tokens.reset) == 360'000);
  CHECK(parsed.tokens_remaining() == 149'984);
  CHECK(parsed.tokens_limit() == 150'000);
  CHECK_FALSE(parsed.retry_after);
}

TEST_CASE("A 429's retry-after-ms is finer than its Retry-After, and names are case-insensitive") {
  const HeaderList headers{
      {"Retry-After", "2"}, {"Retry-After-Ms", "1234.5"}, {"X-RateLimit-Remaining-Tokens", "0"}};
  const auto parsed = parse_rate_limit_headers(headers, kNow);
  CHECK(parsed.retry_after->count() == 1'234'500'000);
  CHECK(parsed.tokens.remaining == 0);
}

TEST_CASE("Anthropic's rate-limit headers, as its documentation shows them") {
  const HeaderList headers{{"retry-after", "30"},
                           {"anthropic-ratelimit-requests-limit", "50"},
                           {"anthropic-ratelimit-requests-remaining", "0"},
                           {"anthropic-ratelimit-requests-reset", "2024-08-21T17:00:30Z"},
                           {"anthropic-ratelimit-tokens-limit", "48000"},
                           {"anthropic-ratelimit-tokens-remaining", "47000"},
                           {"anthropic-ratelimit-tokens-reset", "2024-08-21T17:00:01Z"},
                           {"anthropic-ratelimit-input-tokens-limit", "40000"},
                           {"anthropic-ratelimit-input-tokens-remaining", "39000"},
                           {"anthropic-ratelimit-input-tokens-reset", "2024-08-21T17:00:01Z"},
                           {"anthropic-ratelimit-output-tokens-limit", "8000"},
                           {"anthropic-ratelimit-output-tokens-remaining", "7500"},
                           {"anthropic-ratelimit-output-tokens-reset", "2024-08-21T17:00:02.5Z"}};
  const auto parsed = parse_rate_limit_headers(headers, kNow);
  CHECK(ms(*parsed.retry_after) == 30'000);
  CHECK(parsed.requests.limit == 50);
  CHECK(parsed.requests.remaining == 0);
  CHECK(ms(*parsed.requests.reset) == 30'000);
  CHECK(parsed.tokens.remaining == 47'000);
  CHECK(parsed.input_tokens.limit == 40'000);
  CHECK(parsed.input_tokens.remaining == 39'000);
  CHECK(ms(*parsed.input_tokens.reset) == 1'000);
  CHECK(parsed.output_tokens.remaining == 7'500);
  CHECK(ms(*parsed.output_tokens.reset) == 2'500);
  // The input limit and what is left of it are tighter than the combined ones; the output
  // limit, and what is left of it, are not followed.
  CHECK(parsed.tokens_remaining() == 39'000);
  CHECK(parsed.tokens.limit == 48'000);
  CHECK(parsed.output_tokens.limit == 8'000);
  CHECK(parsed.tokens_limit() == 40'000);
}

TEST_CASE("Anthropic's output tokens left do not hold the tokens bucket (input + output) down") {
  // As a real answer from Anthropic carries them: the combined limit is the sum of the input
  // and output ones, and output is a fifth of it. Before, the bucket fairlane reserves input
  // + max_tokens from was lowered to the output tokens left at every answer, while its
  // limit followed the input one: a sixth of the account's throughput.
  const HeaderList headers{{"anthropic-ratelimit-input-tokens-limit", "80000"},
                           {"anthropic-ratelimit-input-tokens-remaining", "79000"},
                           {"anthropic-ratelimit-output-tokens-limit", "16000"},
                           {"anthropic-ratelimit-output-tokens-remaining", "15000"},
                           {"anthropic-ratelimit-tokens-limit", "96000"},
                           {"anthropic-ratelimit-tokens-remaining", "94000"}};
  const auto parsed = parse_rate_limit_headers(headers, kNow);
  CHECK(parsed.tokens_limit() == 80'000);
  CHECK(parsed.tokens_remaining() == 79'000);
}

TEST_CASE("Values that do not parse are left out, not guessed") {
  const HeaderList headers{{"x-ratelimit-remaining-tokens", "lots"},
                           {"x-ratelimit-reset-tokens", "soon"},
                           {"anthropic-ratelimit-requests-remaining", "-3"},
                           {"anthropic-ratelimit-requests-reset", "tomorrow"},
                           {"retry-after", "never"}};
  const auto parsed = parse_rate_limit_headers(headers, kNow);
  CHECK_FALSE(parsed.tokens.remaining);
  CHECK_FALSE(parsed.tokens.reset);
  CHECK_FALSE(parsed.requests.remaining);
  CHECK_FALSE(parsed.requests.reset);
  CHECK_FALSE(parsed.retry_after);
  CHECK_FALSE(parsed.tokens_remaining());
  CHECK_FALSE(parsed.tokens_limit());
}

TEST_CASE("The tokens limit to follow: the tightest of tokens and input tokens, never 0") {
  const auto limit = [](const HeaderList& headers) {
    return parse_rate_limit_headers(headers, kNow).tokens_limit();
  };
  CHECK(limit({{"anthropic-ratelimit-tokens-limit", "30000"},
               {"anthropic-ratelimit-input-tokens-limit", "40000"}}) == 30'000);
  CHECK(limit({{"anthropic-ratelimit-input-tokens-limit", "40000"}}) == 40'000);
  // Only an output limit: nothing the combined bucket follows.
  CHECK_FALSE(limit({{"anthropic-ratelimit-output-tokens-limit", "8000"}}));
  // A 0 is left out, and does not hide the limit beside it.
  CHECK(limit({{"anthropic-ratelimit-tokens-limit", "0"},
               {"anthropic-ratelimit-input-tokens-limit", "40000"}}) == 40'000);
  CHECK_FALSE(limit({{"x-ratelimit-limit-tokens", "0"}}));
  CHECK_FALSE(limit({{"x-ratelimit-limit-tokens", "half"}}));
  CHECK(limit({{"X-RateLimit-Limit-Tokens", "75000"}}) == 75'000);
}

TEST_CASE("Durations and times are written the way providers write them, and read back") {
  CHECK(fairlane::format_go_duration(std::chrono::minutes(6)) == "6m0s");
  CHECK(fairlane::format_go_duration(1500ms) == "1.5s");
  CHECK(fairlane::format_go_duration(120ms) == "120ms");
  CHECK(fairlane::format_go_duration(0ms) == "0s");
  CHECK(ms(*parse_go_duration(fairlane::format_go_duration(83'250ms))) == 83'250);
  CHECK(fairlane::format_rfc3339(kNow + 30s) == "2024-08-21T17:00:30Z");
  CHECK(fairlane::format_rfc3339(kNow + 100ms) == "2024-08-21T17:00:01Z");  // rounded up
  CHECK(*parse_rfc3339(fairlane::format_rfc3339(kNow + 90s)) == kNow + 90s);
}

TEST_CASE("Absurd waits are capped at a day and absurd resets refused, never overflowed") {
  CHECK(std::chrono::duration_cast<std::chrono::seconds>(*parse_retry_after("99999999999", kNow))
            .count() == 86'400);
  CHECK(std::chrono::duration_cast<std::chrono::seconds>(
            *parse_retry_after("Fri, 01 Jan 2100 00:00:00 GMT", kNow))
            .count() == 86'400);
  CHECK_FALSE(parse_go_duration("99999999999h"));
  CHECK_FALSE(parse_go_duration("25h"));
  CHECK(parse_go_duration("24h"));
  const auto parsed = parse_rate_limit_headers({{"retry-after-ms", "1e30"}}, kNow);
  CHECK(std::chrono::duration_cast<std::chrono::seconds>(*parsed.retry_after).count() == 86'400);
  CHECK(fairlane::format_go_duration(1500100us) == "1.501s");  // rounded up
}

// Found by the rate_limit_headers fuzz target (tests/data/fuzz/rate_limit_headers): a year
// outside what a WallTime's 64-bit nanoseconds hold overflowed in the conversion.
TEST_CASE("RFC 3339 times outside 1970 to 2261 are refused, not overflowed") {
  CHECK_FALSE(parse_rfc3339("1013-11-29T12:00:30Z"));
  CHECK_FALSE(parse_rfc3339("1969-12-31T23:59:59Z"));
  CHECK_FALSE(parse_rfc3339("2262-01-01T00:00:00Z"));
  CHECK_FALSE(parse_rfc3339("9999-12-31T23:59:60-23:59"));
  CHECK(*parse_rfc3339("1970-01-01T00:00:00Z") == WallTime{});
  // The latest a WallTime is converted from (UBSan watches it), refused as 2262 in UTC.
  CHECK_FALSE(parse_rfc3339("2261-12-31T23:59:60.999-23:59"));
  const auto parsed = parse_rate_limit_headers(
      {{"anthropic-ratelimit-requests-reset", "1013-11-29T12:00:30Z"}}, kNow);
  CHECK_FALSE(parsed.requests.reset);
}

// Found by the rate_limit_headers fuzz target: an Anthropic reset decades ahead was kept,
// though a reset beyond a day is refused (as OpenAI's Go durations are).
TEST_CASE("An Anthropic reset more than a day away is refused, one within a day kept") {
  const auto far =
      parse_rate_limit_headers({{"anthropic-ratelimit-requests-reset", "2062-11-29T12:00:30Z"},
                                {"anthropic-ratelimit-tokens-reset", "2024-08-22T17:00:01Z"}},
                               kNow);
  CHECK_FALSE(far.requests.reset);
  CHECK_FALSE(far.tokens.reset);
  const auto near =
      parse_rate_limit_headers({{"anthropic-ratelimit-requests-reset", "2024-08-22T17:00:00Z"},
                                {"anthropic-ratelimit-tokens-reset", "2024-08-21T16:00:00Z"}},
                               kNow);
  CHECK(near.requests.reset == std::chrono::hours(24));
  CHECK(near.tokens.reset == fairlane::Clock::duration::zero());  // already past: now
}

TEST_CASE("HTTP-dates centuries away are a day's wait or none, not overflowed") {
  CHECK(std::chrono::duration_cast<std::chrono::seconds>(
            *parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", kNow))
            .count() == 86'400);
  CHECK(*parse_retry_after("Sat, 01 Jan 1600 00:00:00 GMT", kNow) ==
        fairlane::Clock::duration::zero());
  CHECK(*parse_retry_after("Thu, 01 Jan 1970 00:00:00 GMT", kNow) ==
        fairlane::Clock::duration::zero());
}

// Found by the rate_limit_headers fuzz target: "1s1\u00b5s" formatted as "1.001s" (rounded
// up to the millisecond) read back 1 ns short, because the nearest double to 1.001 is below
// it and the conversion truncated.
TEST_CASE("Decimal durations and fractions read to the nearest nanosecond") {
  CHECK(*parse_go_duration("1.001s") == 1001ms);
  CHECK(*parse_go_duration("0.3s") == 300ms);
  CHECK(*parse_go_duration("6m0.7s") == 360700ms);
  CHECK(*parse_go_duration("1s1\xC2\xB5s") == 1000001us);
  CHECK(*parse_go_duration(fairlane::format_go_duration(1000001us)) == 1001ms);
  CHECK(*parse_rfc3339("2024-08-21T17:00:00.001Z") == kNow + 1ms);
  const auto parsed = parse_rate_limit_headers({{"retry-after-ms", "1001"}}, kNow);
  CHECK(*parsed.retry_after == 1001ms);
}
