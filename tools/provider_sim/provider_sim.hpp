// ProviderSim: a stand-in for an AI provider that behaves like a real one, so fairlane can be
// run and tested on loopback with nothing leaving the machine and nothing costing money.
// It speaks both dialects (POST /v1/chat/completions, POST /v1/messages) and ENFORCES its
// limits the way providers do: 503 overloaded when a call arrives with the in-flight cap
// full; 429 with retry-after and the dialect's rate-limit headers when the minute's
// requests or tokens are spent (input + output tokens, counted on arrival with max_tokens as
// the output estimate, corrected when the call ends). It bills what it serves, fails on
// demand, and reports GET /stats (totals) and GET /stats/calls (calls per page text, so a
// test can tell a page sent twice from two pages).
//
// A page may come as an image: image parts in the user message's content, in either
// dialect's form (call_body.hpp). Each is billed by the dialect's published rule
// (image_tokens) on top of the text, and the answer is the page: its text, and for each
// image a line "image sha256:<hex> <width>x<height>", so a test can tell each result belongs
// to its page. A malformed part (bad base64, not a PNG or JPEG, a media type the bytes
// belie) gets a 400 in the dialect's error format, naming the part and what is wrong, as a
// provider's does. GET /stats counts image_parts and image_tokens (in input_tokens) of the
// calls billed; /stats/calls keys a page by that text, image lines included.
//
// GET /stats keeps what the client caused apart from what was injected: rejected_429 and
// rejected_503 count only refusals for exceeding the limits (a well-behaved client sees
// none); failed_500, timeouts, resets, malformed, hostile_text and storm_429 count injected
// faults.
//
// Its limits may change mid-run (Config::changes), as a provider's do when it lowers an
// account's limits under load: from then on it enforces, and its rate-limit headers
// announce, the new ones. GET /stats shows those in force ("limits") and how many changes
// have been applied ("changes_applied").
//
// Thread safety: one io_context thread runs it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fairlane/core/result.hpp"

namespace boost::asio {
class io_context;
}

namespace fairlane::provider_sim {

// A 429 storm: every call arriving from `start` after the stand-in's first call, for
// `length`, is answered 429 with Retry-After `retry_after`, whatever its budget says. (From
// the first call, not the stand-in's start: a client that takes long to start, a build with
// sanitizers on a busy machine, still meets it.)
struct Storm {
  std::chrono::milliseconds start{0};
  std::chrono::milliseconds length{0};
  std::chrono::milliseconds retry_after{0};
};

// A change of limits at `at` after the stand-in began or, when `at_call` is set, as that
// call arrives (counted from the start, 1 the first, never reset by POST /stats/reset): that
// call is the first under the new limits. Each field given replaces the current value (rpm
// and tpm at least 1, latency_ms at least 0). A test that must change the limits at a point
// of its own run, whatever the machine's pace, counts calls; one that follows a clock, time.
struct LimitChange {
  std::chrono::milliseconds at{0};
  std::optional<std::int64_t> requests_per_minute;
  std::optional<std::int64_t> tokens_per_minute;
  std::optional<double> latency_ms;
  std::optional<std::int64_t> at_call;
};

struct Config {
  std::int64_t requests_per_minute = 1'500;
  std::int64_t tokens_per_minute = 300'000;
  std::int64_t max_in_flight = 200;
  double latency_ms = 2'000.0;
  double latency_jitter = 0.0;  // lognormal sigma around latency_ms (0: fixed)
  std::int64_t output_tokens = 240;
  // Output tokens drawn from a quantile table instead: (probability, tokens), 0 to 1.
  std::vector<std::pair<double, double>> output_tokens_quantiles;
  double price_per_mtok = 3.0;  // dollars per million tokens, input and output alike
  double fail_rate = 0.0;       // answer 500
  double timeout_rate = 0.0;    // never answer (until the client goes away)
  double reset_rate = 0.0;      // close the connection abruptly
  double malformed_rate = 0.0;  // answer 200 with broken JSON
  // Answer with text no database takes as it is, in turn: 200 with a NUL (\u0000) in the
  // answer's text, then 500 with a body that is no JSON, holds a NUL byte and ends in a
  // UTF-8 sequence cut short (counted as hostile_text).
  double hostile_text_rate = 0.0;
  std::vector<Storm> storms;  // windows of 429s for everyone (counted as storm_429)
  // Limits changed mid-run. A change may lower or raise rpm and tpm, but only a limit the
  // configuration sets (not 0, unlimited): see check_changes.
  std::vector<LimitChange> changes;
  std::uint64_t seed = 1;
  std::string api_key;  // when set, calls without it get 401
  // How input tokens are counted: ceil(bytes / 4), as fairlane estimates them; with
  // cjk_tokens, each CJK character (or Hangul, or kana) counts one token and only the rest
  // bytes / 4, as real tokenizers count such text: denser than fairlane's estimate.
  bool cjk_tokens = false;
};

// The input tokens of `text` under `config`'s counting.
[[nodiscard]] std::int64_t count_input_tokens(std::string_view text, bool cjk_tokens);

// The calls that carried one page (the user message's text, with a line per image as the
// answer has it: CallBody::page): every call that arrived, those answered with a 200, and
// those in flight now (admitted, not answered yet; a call that never answers stays in
// flight until its client goes).
struct TextCalls {
  std::int64_t calls = 0;
  std::int64_t answered = 0;
  std::int64_t in_flight = 0;
};

// Parses "0:40,0.5:240,0.9:1100,0.99:3800,1:4000" into a quantile table.
Result<std::vector<std::pair<double, double>>> parse_quantiles(const std::string& text);

// Parses "START_S:LENGTH_S:RETRY_AFTER_S" (seconds, fractions allowed), e.g. "2:5:10".
Result<Storm> parse_storm(const std::string& text);

// Parses "AT:KEY=VALUE,..." with keys rpm, tpm and latency-ms (any subset, each once). AT is
// milliseconds after the start, or "call=N" for the N-th call: "4000:tpm=3000,latency-ms=400"
// gives 3,000 tokens a minute and 400 ms a call from 4 s after the start; "call=100:tpm=3000"
// from the 100th call.
Result<LimitChange> parse_change(const std::string& text);

// Whether `config`'s changes fit it: a change of rpm or tpm needs that limit set (a limit
// cannot appear from unlimited, nor become unlimited).
Status check_changes(const Config& config);

class Server {
 public:
  Server(boost::asio::io_context& io, Config config);
  // NOLINTNEXTLINE(bugprone-exception-escape): see the definition
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Starts listening; port 0 picks a free one. Returns the port.
  Result<std::uint16_t> listen(const std::string& address, std::uint16_t port);

  // Stops accepting and closes every connection.
  void stop();

  // GET /stats as JSON.
  [[nodiscard]] std::string stats_json() const;

  // GET /stats/calls: {"pages": [{"text", "calls", "answered", "in_flight"}, ...]}, by text.
  [[nodiscard]] std::string calls_json() const;
  [[nodiscard]] std::unordered_map<std::string, TextCalls> calls_by_text() const;
  // The same summed over every text (without walking them): calls, answered, in flight.
  [[nodiscard]] TextCalls call_totals() const;

 private:
  struct Impl;
  // Shared with every connection's coroutine, so calls still waiting when the server goes
  // (and the io_context destroys or resumes them later) find their state intact.
  std::shared_ptr<Impl> impl_;
};

}  // namespace fairlane::provider_sim
