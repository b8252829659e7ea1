// Provider: the AI provider fairlane sends pages to, behind an interface the dispatcher
// calls once per page. A call takes a page request and, later, on the provider's executor,
// yields exactly one outcome: an answer with its usage, or the reason there is none, with
// the rate-limit headers the provider sent either way.
//
// Outcomes and what the dispatcher does with them (docs/architecture.md):
//   ok               store the output, settle the tokens with the usage
//   rate_limited     429: pause all dispatch until retry_after, page back to the head
//   overloaded       503 (Anthropic: 529): the same, retry_after when the provider gave one
//   server_error     other 5xx: back off and retry the page, up to max_attempts
//   client_error     4xx (not 429): the request itself is wrong; fail the page, no retry;
//                    but 401, 402 and 407 refuse fairlane itself (its key, its account,
//                    a proxy's login): an outage, paused as when unreachable
//   timeout          no answer in time: back off and retry
//   connection_error reset, broken connection: back off and retry; refused or no such host
//                    (unreachable): pause all dispatch, page back to the head, no attempt
//   bad_response     2xx whose body is not a valid answer: back off and retry
//
// Thread safety: a Provider belongs to the thread that runs its executor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "fairlane/core/clock.hpp"
#include "fairlane/core/page_image.hpp"
#include "fairlane/provider/rate_limit_headers.hpp"

namespace fairlane {

// The wire format: OpenAI's chat completions or Anthropic's messages.
enum class Dialect { openai, anthropic };
[[nodiscard]] std::string_view to_string(Dialect dialect);
[[nodiscard]] std::optional<Dialect> dialect_from(std::string_view name);

// The text part beside a page's image in the user message (the prompt is the system's).
inline constexpr std::string_view kImagePageText = "The page, as an image:";

struct ProviderRequest {
  std::string prompt;     // the instruction (system message)
  std::string page_text;  // the page (user message), when it goes as text
  std::string model;
  std::int64_t max_tokens = 0;
  // The page's image, when it goes as one: the user message is then the image, and a text
  // part saying which page it is (dialect.cpp).
  std::optional<PageImage> image = {};
};

namespace outcome {
struct Ok {
  std::string output;
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
};
struct RateLimited {
  std::optional<Clock::duration> retry_after;
};
struct Overloaded {
  std::optional<Clock::duration> retry_after;
};
struct ServerError {
  int status = 0;
  std::string detail;
};
struct ClientError {
  int status = 0;
  std::string detail;
  // When the refusal is of fairlane itself, never the page's (its key, its account's quota,
  // credit or payment, a proxy's login), and every page would meet it: what the operator
  // should check. Empty for a refusal of the page (classify() tells them apart).
  std::string remedy = {};
  // What the provider counted for it, when it says: a 2xx in which the model declines the
  // page (a refusal) comes with its usage. Nullopt for a 4xx.
  std::optional<std::int64_t> used_tokens = std::nullopt;
};
struct Timeout {};
struct ConnectionError {
  std::string detail;
  // No connection could be made (refused, timed out, no such host): nothing was sent, the outage
  // is the provider's, not the page's.
  bool unreachable = false;
};
struct BadResponse {
  std::string why;
};
}  // namespace outcome

using OutcomeKind = std::variant<outcome::Ok, outcome::RateLimited, outcome::Overloaded,
                                 outcome::ServerError, outcome::ClientError, outcome::Timeout,
                                 outcome::ConnectionError, outcome::BadResponse>;

// "ok", "rate_limited", "overloaded", "server_error", "client_error", "timeout",
// "connection_error", "bad_response": names for logs and metrics.
[[nodiscard]] std::string_view outcome_name(const OutcomeKind& kind);

struct ProviderOutcome {
  OutcomeKind kind;
  int http_status = 0;      // 0 when no response came
  RateLimitHeaders limits;  // whatever the response said about the provider's budgets
  Clock::duration latency{};
};

class Provider {
 public:
  using Done = std::function<void(ProviderOutcome)>;

  virtual ~Provider() = default;

  // Starts one call. `done` runs exactly once, later (never inside call()), on the
  // provider's executor, unless the provider is destroyed first.
  virtual void call(const ProviderRequest& request, Done done) = 0;

  // Calls started and not yet done.
  [[nodiscard]] virtual std::size_t in_flight() const = 0;
};

}  // namespace fairlane
