#include "fairlane/provider/rate_limit_headers.hpp"
#include "fairlane/core/text.hpp"
#include "provider/rate_limit_format.hpp"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

namespace fairlane {
namespace {

// The longest wait or reset a header may announce: a day. Anything longer is capped (a
// Retry-After) or refused (a reset), and no conversion to nanoseconds can overflow.
constexpr std::int64_t kLongestWait_s = 86'400;

// The years an RFC 3339 time may have: a WallTime (64-bit nanoseconds since 1970) holds
// them all, with any offset and fraction.
constexpr std::int64_t kFirstYear = 1970;
constexpr std::int64_t kLastYear = 2261;

// A whole number made only of digits (no sign, no spaces inside).
std::optional<std::int64_t> parse_count(std::string_view s) {
  s = trim(s);
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || error != std::errc() || end != s.data() + s.size() || value < 0) {
    return std::nullopt;
  }
  return value;
}

// A non-negative decimal such as "3" or "3.25".
std::optional<double> parse_decimal(std::string_view s) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s.front()))) return std::nullopt;
  double value = 0.0;
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (error != std::errc() || end != s.data() + s.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

Clock::duration until(WallTime then, WallTime now) {
  return then > now ? std::chrono::duration_cast<Clock::duration>(then - now)
                    : Clock::duration::zero();
}

// Two digits at `s[at]`, or -1.
int two_digits(std::string_view s, std::size_t at) {
  if (at + 2 > s.size() || !std::isdigit(static_cast<unsigned char>(s[at])) ||
      !std::isdigit(static_cast<unsigned char>(s[at + 1]))) {
    return -1;
  }
  return (s[at] - '0') * 10 + (s[at + 1] - '0');
}

}  // namespace

std::optional<Clock::duration> parse_go_duration(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  if (text == "0") return Clock::duration::zero();
  // Longer unit names first, so "ms" is not read as "m" followed by garbage.
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"ns", 1e-9},  {"us", 1e-6}, {"\xC2\xB5s", 1e-6}, {"ms", 1e-3},
      {"h", 3600.0}, {"m", 60.0},  {"s", 1.0}};
  double total_s = 0.0;
  while (!text.empty()) {
    std::size_t digits = 0;
    while (digits < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
      ++digits;
    }
    const auto number = parse_decimal(text.substr(0, digits));
    if (!number) return std::nullopt;
    text.remove_prefix(digits);
    bool matched = false;
    for (const auto& [unit, scale] : kUnits) {
      if (text.substr(0, unit.size()) == unit) {
        total_s += *number * scale;
        text.remove_prefix(unit.size());
        matched = true;
        break;
      }
    }
    if (!matched) return std::nullopt;
  }
  if (total_s > kLongestWait_s) return std::nullopt;
  return from_seconds(total_s);
}

std::optional<WallTime> parse_rfc3339(std::string_view text) {
  text = trim(text);
  // YYYY-MM-DDTHH:MM:SS
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != 't' && text[10] != ' ') || text[13] != ':' ||
      text[16] != ':') {
    return std::nullopt;
  }
  const auto year = parse_count(text.substr(0, 4));
  const int month = two_digits(text, 5);
  const int day = two_digits(text, 8);
  const int hour = two_digits(text, 11);
  const int minute = two_digits(text, 14);
  const int second = two_digits(text, 17);
  // WallTime counts nanoseconds in 64 bits: 1677 to 2262. A reset outside 1970 to 2261 is
  // nobody's rate limit, and outside that range the conversion would overflow.
  if (!year || *year < kFirstYear || *year > kLastYear || month < 1 || day < 1 || hour < 0 ||
      hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 60) {
    return std::nullopt;
  }
  const std::chrono::year_month_day date{std::chrono::year{static_cast<int>(*year)},
                                         std::chrono::month{static_cast<unsigned>(month)},
                                         std::chrono::day{static_cast<unsigned>(day)}};
  if (!date.ok()) return std::nullopt;
  std::size_t at = 19;
  double fraction = 0.0;
  if (at < text.size() && text[at] == '.') {
    std::size_t end = at + 1;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    const auto digits = parse_decimal(fmt::format("0{}", text.substr(at, end - at)));
    if (!digits || end == at + 1) return std::nullopt;
    fraction = *digits;
    at = end;
  }
  std::chrono::minutes offset{0};
  const std::string_view zone = text.substr(at);
  if (zone == "Z" || zone == "z") {
    // UTC
  } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':') {
    const int oh = two_digits(zone, 1);
    const int om = two_digits(zone, 4);
    if (oh < 0 || oh > 23 || om < 0 || om > 59) return std::nullopt;
    offset = std::chrono::minutes((zone[0] == '+' ? 1 : -1) * (oh * 60 + om));
  } else {
    return std::nullopt;
  }
  const auto local = std::chrono::sys_days(date) + std::chrono::hours(hour) +
                     std::chrono::minutes(minute) + std::chrono::seconds(second) - offset;
  const WallTime time =
      std::chrono::time_point_cast<WallTime::duration>(local) + from_seconds(fraction);
  // In range in UTC too, as format_rfc3339 writes it (to the next second): an offset or a
  // fraction can take a time at either end out of the years checked above.
  const auto utc = std::chrono::ceil<std::chrono::seconds>(time);
  const auto first = std::chrono::sys_days(std::chrono::year{static_cast<int>(kFirstYear)} /
                                           std::chrono::January / 1);
  const auto after_last = std::chrono::sys_days(std::chrono::year{static_cast<int>(kLastYear + 1)} /
                                                std::chrono::January / 1);
  if (utc < first || utc >= after_last) return std::nullopt;
  return time;
}

std::string format_go_duration(Clock::duration d) {
  // Rounded up: a reset announced early invites a client back before the budget exists.
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
  if (ms <= 0) return "0s";
  if (ms < 1'000) return fmt::format("{}ms", ms);
  const auto minutes = ms / 60'000;
  const double secs = static_cast<double>(ms % 60'000) / 1'000.0;
  if (minutes == 0) return fmt::format("{}s", secs);
  return fmt::format("{}m{}s", minutes, secs);
}

std::string format_rfc3339(WallTime t) {
  const auto whole = std::chrono::ceil<std::chrono::seconds>(t);
  const auto days = std::chrono::floor<std::chrono::days>(whole);
  const std::chrono::year_month_day date{days};
  const std::chrono::hh_mm_ss time{whole - days};
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", static_cast<int>(date.year()),
                     static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                     time.hours().count(), time.minutes().count(), time.seconds().count());
}

std::optional<Clock::duration> parse_retry_after(std::string_view value, WallTime now) {
  value = trim(value);
  if (const auto whole = parse_count(value)) {
    // A wait beyond a day is not a rate limit anyone honours; it is capped there.
    return std::chrono::seconds(std::min<std::int64_t>(*whole, kLongestWait_s));
  }
  if (value.empty() || !std::isalpha(static_cast<unsigned char>(value.front())))
    return std::nullopt;
  // An HTTP-date in any of the three forms RFC 9110 allows; libcurl parses them.
  const std::string date(value);
  const time_t when = curl_getdate(date.c_str(), nullptr);
  if (when == -1) return std::nullopt;
  // Compared in whole seconds first: a date centuries away does not fit a WallTime.
  const std::int64_t now_s =
      std::chrono::floor<std::chrono::seconds>(now).time_since_epoch().count();
  if (when < now_s) return Clock::duration::zero();
  if (when - now_s > kLongestWait_s) return std::chrono::seconds(kLongestWait_s);
  return std::min<Clock::duration>(until(std::chrono::system_clock::from_time_t(when), now),
                                   std::chrono::seconds(kLongestWait_s));
}

namespace {

// The smallest of `field` over the buckets fairlane's tokens bucket follows (see
// tokens_limit()), keeping only values `kept` lets through.
template <typename Keep>
std::optional<std::int64_t> tightest(const RateLimitHeaders& h,
                                     std::optional<std::int64_t> RateLimitBucket::*field,
                                     Keep kept) {
  std::optional<std::int64_t> smallest;
  for (const RateLimitBucket* bucket : {&h.tokens, &h.input_tokens}) {
    const std::optional<std::int64_t>& value = bucket->*field;
    if (value && kept(*value) && (!smallest || *value < *smallest)) smallest = value;
  }
  return smallest;
}

}  // namespace

std::optional<std::int64_t> RateLimitHeaders::tokens_remaining() const {
  return tightest(*this, &RateLimitBucket::remaining, [](std::int64_t) { return true; });
}

std::optional<std::int64_t> RateLimitHeaders::tokens_limit() const {
  return tightest(*this, &RateLimitBucket::limit, [](std::int64_t limit) { return limit > 0; });
}

RateLimitHeaders parse_rate_limit_headers(const HeaderList& headers, WallTime now) {
  RateLimitHeaders out;
  std::optional<Clock::duration> retry_after_ms;
  // Anthropic's headers: anthropic-ratelimit-<bucket>-<field>.
  static constexpr std::pair<std::string_view, RateLimitBucket RateLimitHeaders::*> kAnthropic[] = {
      {"requests", &RateLimitHeaders::requests},
      {"tokens", &RateLimitHeaders::tokens},
      {"input-tokens", &RateLimitHeaders::input_tokens},
      {"output-tokens", &RateLimitHeaders::output_tokens}};
  // OpenAI's headers: x-ratelimit-<field>-<bucket>.
  static constexpr std::pair<std::string_view, RateLimitBucket RateLimitHeaders::*> kOpenAi[] = {
      {"requests", &RateLimitHeaders::requests}, {"tokens", &RateLimitHeaders::tokens}};

  for (const auto& [raw_name, value] : headers) {
    std::string name(trim(raw_name));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (name == "retry-after") {
      out.retry_after = parse_retry_after(value, now);
    } else if (name == "retry-after-ms") {
      if (const auto ms = parse_decimal(trim(value))) {
        retry_after_ms = from_seconds(std::min(*ms / 1000.0, static_cast<double>(kLongestWait_s)));
      }
    }
    for (const auto& [bucket_name, member] : kAnthropic) {
      const std::string prefix = fmt::format("anthropic-ratelimit-{}-", bucket_name);
      if (name.rfind(prefix, 0) != 0) continue;
      const std::string_view field = std::string_view(name).substr(prefix.size());
      RateLimitBucket& bucket = out.*member;
      if (field == "limit") bucket.limit = parse_count(value);
      if (field == "remaining") bucket.remaining = parse_count(value);
      if (field == "reset") {
        // A reset more than a day away is refused, as a Go duration's is.
        const auto when = parse_rfc3339(value);
        const auto reset = when ? until(*when, now) : Clock::duration::max();
        bucket.reset = reset <= std::chrono::seconds(kLongestWait_s)
                           ? std::optional<Clock::duration>(reset)
                           : std::nullopt;
      }
    }
    for (const auto& [bucket_name, member] : kOpenAi) {
      RateLimitBucket& bucket = out.*member;
      if (iequals(name, fmt::format("x-ratelimit-limit-{}", bucket_name))) {
        bucket.limit = parse_count(value);
      }
      if (iequals(name, fmt::format("x-ratelimit-remaining-{}", bucket_name))) {
        bucket.remaining = parse_count(value);
      }
      if (iequals(name, fmt::format("x-ratelimit-reset-{}", bucket_name))) {
        bucket.reset = parse_go_duration(value);
      }
    }
  }
  // retry-after-ms is the finer of the two when both came.
  if (retry_after_ms) out.retry_after = retry_after_ms;
  return out;
}

}  // namespace fairlane
