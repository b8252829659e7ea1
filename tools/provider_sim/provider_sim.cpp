// The provider stand-in's server: Beast over Asio coroutines, one io_context thread. Its
// limits are enforced with fairlane's own Budget on the steady clock (token buckets, as
// both providers document theirs); see provider_sim.hpp. Limits that change mid-run are
// the budget's announced limits: it is built with the largest limits the run will have,
// and follow_announced sets those in force, at the start and at each change.
#include "provider_sim.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <boost/json.hpp>
#include <charconv>
#include <cmath>
#include <exception>
#include <iostream>
#include <list>
#include <random>
#include <sstream>
#include <utility>
#include <variant>

#include "call_body.hpp"
#include "fairlane/core/budget.hpp"
#include "fairlane/core/clock.hpp"
#include "fairlane/provider/rate_limit_headers.hpp"
#include "provider/listen.hpp"
#include "provider/rate_limit_format.hpp"

namespace fairlane::provider_sim {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;
using asio::awaitable;
using asio::use_awaitable;

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// What a connection does after a call.
enum class Action { answer, hang, reset };

// Counts a call in flight for its text until the call ends (this goes).
class OpenCall {
 public:
  explicit OpenCall(TextCalls& counts) : counts_(&counts) { ++counts_->in_flight; }
  OpenCall(OpenCall&& other) noexcept : counts_(std::exchange(other.counts_, nullptr)) {}
  OpenCall(const OpenCall&) = delete;
  OpenCall& operator=(const OpenCall&) = delete;
  OpenCall& operator=(OpenCall&&) = delete;
  ~OpenCall() {
    if (counts_ != nullptr) --counts_->in_flight;
  }

 private:
  TextCalls* counts_;
};

// A call that hangs keeps its place, and stays in flight, until the client leaves.
struct Held {
  Lease lease;
  OpenCall open;
};

struct Reply {
  Response response;
  Action action = Action::answer;
  std::optional<Held> held;
};

struct Minute {
  std::int64_t requests = 0, ok = 0, rejected_429 = 0, rejected_503 = 0, storm_429 = 0;
  std::int64_t input_tokens = 0, output_tokens = 0;
};

// The largest limit a run has: the configured one or a change's. 0 (unlimited) stays 0:
// check_changes refuses changes to an unlimited limit.
std::int64_t largest_limit(std::int64_t configured, const std::vector<LimitChange>& changes,
                           std::optional<std::int64_t> LimitChange::*field) {
  if (configured == 0) return 0;
  std::int64_t largest = configured;
  for (const LimitChange& change : changes) {
    if (change.*field) largest = std::max(largest, *(change.*field));
  }
  return largest;
}

std::string error_body(Dialect dialect, std::string_view type, std::string_view message) {
  if (dialect == Dialect::anthropic) {
    return json::serialize(json::object{
        {"type", "error"}, {"error", json::object{{"type", type}, {"message", message}}}});
  }
  return json::serialize(
      json::object{{"error", json::object{{"message", message}, {"type", type}, {"code", type}}}});
}

}  // namespace

std::int64_t count_input_tokens(std::string_view text, bool cjk_tokens) {
  if (!cjk_tokens) return static_cast<std::int64_t>((text.size() + 3) / 4);
  std::int64_t cjk = 0;
  std::size_t other_bytes = 0;
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    // A three-byte UTF-8 sequence: U+0800 to U+FFFF.
    if ((lead & 0xF0) == 0xE0 && i + 2 < text.size()) {
      const std::uint32_t code = ((lead & 0x0Fu) << 12) |
                                 ((static_cast<unsigned char>(text[i + 1]) & 0x3Fu) << 6) |
                                 (static_cast<unsigned char>(text[i + 2]) & 0x3Fu);
      // CJK punctuation, kana, the unified ideographs, Hangul, compatibility ideographs.
      const bool dense = (code >= 0x3000 && code <= 0x9FFF) || (code >= 0xAC00 && code <= 0xD7AF) ||
                         (code >= 0xF900 && code <= 0xFAFF);
      if (dense) {
        ++cjk;
        i += 3;
        continue;
      }
    }
    ++other_bytes;
    ++i;
  }
  return cjk + static_cast<std::int64_t>((other_bytes + 3) / 4);
}

// Reports, rather than swallows, an exception that ends a coroutine.
constexpr ReportFailure report_failure{"fairlane-provider-sim: a connection failed"};

struct Server::Impl : std::enable_shared_from_this<Server::Impl> {
  Impl(asio::io_context& context, Config c)
      : io(context),
        config(std::move(c)),
        budget(clock, BudgetLimits{largest_limit(config.requests_per_minute, config.changes,
                                                 &LimitChange::requests_per_minute),
                                   largest_limit(config.tokens_per_minute, config.changes,
                                                 &LimitChange::tokens_per_minute),
                                   config.max_in_flight}),
        rng(config.seed),
        started(clock.now()),
        born(started) {
    budget.follow_announced(config.requests_per_minute, config.tokens_per_minute);
    // The timed changes in time order, then those at a call in call order.
    std::stable_sort(config.changes.begin(), config.changes.end(),
                     [](const LimitChange& a, const LimitChange& b) {
                       return std::pair(a.at_call.value_or(0), a.at) <
                              std::pair(b.at_call.value_or(0), b.at);
                     });
    next_call_change = static_cast<std::size_t>(
        std::find_if(config.changes.begin(), config.changes.end(),
                     [](const LimitChange& change) { return change.at_call.has_value(); }) -
        config.changes.begin());
  }

  asio::io_context& io;
  Config config;
  SteadyClock clock;
  Budget budget;
  std::mt19937_64 rng;
  Clock::time_point started;  // of the counters (POST /stats/reset moves it)
  Clock::time_point born;     // of the server: timed changes count from here
  // The first call's arrival: storms count from here, so that a storm meets the calls
  // however long the client takes to start.
  std::optional<Clock::time_point> first_call;
  std::optional<tcp::acceptor> acceptor;
  std::list<std::weak_ptr<beast::tcp_stream>> connections;
  std::optional<asio::steady_timer> change_timer;  // until the next change of limits
  std::size_t changes_applied = 0;
  std::int64_t calls_arrived = 0;    // since the start: what a change at a call counts
  std::size_t next_call_change = 0;  // index in config.changes of the next change at a call

  // Counters (GET /stats).
  std::int64_t requests = 0, ok = 0, rejected_429 = 0, rejected_503 = 0, failed_500 = 0;
  std::int64_t timeouts = 0, resets = 0, malformed = 0, unauthorized = 0, bad_requests = 0;
  std::int64_t storm_429 = 0, hostile_text = 0;
  std::int64_t input_tokens = 0, output_tokens = 0, max_in_flight_seen = 0;
  std::int64_t image_parts = 0, image_tokens = 0;  // of the calls billed; in input_tokens
  std::int64_t connections_open = 0, max_connections_seen = 0;
  double cost_usd = 0.0;
  std::vector<Minute> minutes;
  // Per page text. Entries are never erased while a call of theirs is in flight, so an
  // OpenCall's pointer stays valid (an unordered_map's elements do not move).
  std::unordered_map<std::string, TextCalls> texts;

  Minute& this_minute() {
    const auto index = static_cast<std::size_t>(
        std::chrono::duration_cast<std::chrono::minutes>(clock.now() - started).count());
    if (minutes.size() <= index) minutes.resize(index + 1);
    return minutes[index];
  }

  // Each coroutine holds `self`, keeping this state alive as long as it runs.
  awaitable<void> accept_loop(std::shared_ptr<Impl> self);
  // Applies each timed change of limits at its time, until the last or until stopped.
  awaitable<void> follow_changes(std::shared_ptr<Impl> self);
  // Applies the changes due at the call that just arrived.
  void change_at_call();
  void apply(const LimitChange& change);
  awaitable<void> session(std::shared_ptr<Impl> self, tcp::socket socket);
  awaitable<Reply> handle(const Request& request);
  awaitable<Reply> call(Dialect dialect, const Request& request);
  Response respond(const Request& request, http::status status, std::string body) const;
  void add_limit_headers(Dialect dialect, Response& response) const;
  const Storm* storm_now() const;
  double draw_latency_ms();
  std::int64_t draw_output_tokens(std::int64_t max_tokens);
  std::string stats() const;
  std::string calls() const;
};

Server::Server(asio::io_context& io, Config config)
    : impl_(std::make_shared<Impl>(io, std::move(config))) {
  if (!impl_->config.changes.empty()) {
    impl_->change_timer.emplace(io);
    asio::co_spawn(io, impl_->follow_changes(impl_), report_failure);
  }
}

// Asio's cancel() (of the change timer) throws only when the reactor itself fails:
// std::terminate is right then.
// NOLINTNEXTLINE(bugprone-exception-escape)
Server::~Server() {
  stop();
}

Result<std::uint16_t> Server::listen(const std::string& address, std::uint16_t port) {
  auto opened = open_acceptor(impl_->io, address, port);
  if (!opened.ok()) return opened.status();
  tcp::acceptor acceptor = std::move(opened).value();
  const std::uint16_t bound = acceptor.local_endpoint().port();
  impl_->acceptor.emplace(std::move(acceptor));
  asio::co_spawn(impl_->io, impl_->accept_loop(impl_), report_failure);
  return bound;
}

void Server::stop() {
  if (!impl_) return;
  boost::system::error_code ignored;
  if (impl_->acceptor) impl_->acceptor->close(ignored);
  if (impl_->change_timer) impl_->change_timer->cancel();
  for (auto& weak : impl_->connections) {
    if (auto stream = weak.lock()) stream->socket().close(ignored);
  }
  impl_->connections.clear();
}

std::string Server::stats_json() const {
  return impl_->stats();
}

std::string Server::calls_json() const {
  return impl_->calls();
}

std::unordered_map<std::string, TextCalls> Server::calls_by_text() const {
  return impl_->texts;
}

TextCalls Server::call_totals() const {
  return TextCalls{impl_->requests, impl_->ok + impl_->malformed,
                   impl_->budget.in_flight().in_use()};
}

awaitable<void> Server::Impl::accept_loop(std::shared_ptr<Impl> self) {
  while (acceptor && acceptor->is_open()) {
    boost::system::error_code error;
    tcp::socket socket =
        co_await acceptor->async_accept(asio::redirect_error(use_awaitable, error));
    if (error) {
      if (error == asio::error::operation_aborted || !acceptor->is_open()) co_return;
      continue;  // a failed accept (out of descriptors, say) is not the end of the server
    }
    asio::co_spawn(io, session(self, std::move(socket)), report_failure);
  }
}

awaitable<void> Server::Impl::follow_changes(std::shared_ptr<Impl> /*self*/) {
  for (const LimitChange& change : config.changes) {
    if (change.at_call) co_return;  // the rest are at a call
    change_timer->expires_at(born + change.at);
    boost::system::error_code error;
    co_await change_timer->async_wait(asio::redirect_error(use_awaitable, error));
    if (error) co_return;  // stopped
    apply(change);
  }
}

void Server::Impl::change_at_call() {
  ++calls_arrived;
  while (next_call_change < config.changes.size() &&
         *config.changes[next_call_change].at_call <= calls_arrived) {
    apply(config.changes[next_call_change++]);
  }
}

void Server::Impl::apply(const LimitChange& change) {
  budget.follow_announced(change.requests_per_minute, change.tokens_per_minute);
  if (change.latency_ms) config.latency_ms = *change.latency_ms;
  ++changes_applied;
}

awaitable<void> Server::Impl::session(std::shared_ptr<Impl> /*self*/, tcp::socket socket) {
  auto stream = std::make_shared<beast::tcp_stream>(std::move(socket));
  ++connections_open;
  max_connections_seen = std::max(max_connections_seen, connections_open);
  struct Closed {
    std::int64_t& open;
    ~Closed() { --open; }
  } closed{connections_open};
  connections.remove_if([](const auto& weak) { return weak.expired(); });
  connections.push_back(stream);
  beast::flat_buffer buffer;
  boost::system::error_code error;
  while (true) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(std::uint64_t{16} * 1024 * 1024);
    stream->expires_after(std::chrono::seconds(120));  // an idle connection is closed
    co_await http::async_read(*stream, buffer, parser, asio::redirect_error(use_awaitable, error));
    if (error) break;
    stream->expires_never();
    Reply reply = co_await handle(parser.get());
    if (reply.action == Action::reset) {
      stream->socket().set_option(asio::socket_base::linger(true, 0), error);
      stream->socket().close(error);
      co_return;
    }
    if (reply.action == Action::hang) {
      // Never answer; keep the call's place until the client gives up and closes.
      http::request_parser<http::string_body> ignored;
      co_await http::async_read(*stream, buffer, ignored,
                                asio::redirect_error(use_awaitable, error));
      if (reply.held) reply.held->lease.cancel();
      break;
    }
    const bool keep_alive = reply.response.keep_alive();
    co_await http::async_write(*stream, reply.response, asio::redirect_error(use_awaitable, error));
    if (error || !keep_alive) break;
  }
  stream->socket().shutdown(tcp::socket::shutdown_send, error);
}

Response Server::Impl::respond(const Request& request, http::status status,
                               std::string body) const {
  Response response{status, request.version()};
  response.set(http::field::server, "fairlane-provider-sim");
  response.set(http::field::content_type, "application/json");
  response.keep_alive(request.keep_alive());
  response.body() = std::move(body);
  response.prepare_payload();
  return response;
}

void Server::Impl::add_limit_headers(Dialect dialect, Response& response) const {
  const auto add = [&](std::string_view name, const std::string& value) {
    response.set(name, value);
  };
  const TokenBucket& requests_bucket = budget.requests();
  const TokenBucket& tokens_bucket = budget.tokens();
  if (dialect == Dialect::openai) {
    if (!requests_bucket.unlimited()) {
      add("x-ratelimit-limit-requests", std::to_string(requests_bucket.capacity()));
      add("x-ratelimit-remaining-requests", std::to_string(requests_bucket.remaining()));
      add("x-ratelimit-reset-requests", format_go_duration(requests_bucket.time_until_full()));
    }
    if (!tokens_bucket.unlimited()) {
      add("x-ratelimit-limit-tokens", std::to_string(tokens_bucket.capacity()));
      add("x-ratelimit-remaining-tokens", std::to_string(tokens_bucket.remaining()));
      add("x-ratelimit-reset-tokens", format_go_duration(tokens_bucket.time_until_full()));
    }
    return;
  }
  const WallTime now = std::chrono::system_clock::now();
  const auto reset_at = [&](const TokenBucket& bucket) {
    return format_rfc3339(now +
                          std::chrono::duration_cast<WallTime::duration>(bucket.time_until_full()));
  };
  if (!requests_bucket.unlimited()) {
    add("anthropic-ratelimit-requests-limit", std::to_string(requests_bucket.capacity()));
    add("anthropic-ratelimit-requests-remaining", std::to_string(requests_bucket.remaining()));
    add("anthropic-ratelimit-requests-reset", reset_at(requests_bucket));
  }
  if (!tokens_bucket.unlimited()) {
    for (const std::string_view kind : {"tokens", "input-tokens", "output-tokens"}) {
      const std::string prefix = fmt::format("anthropic-ratelimit-{}-", kind);
      add(prefix + "limit", std::to_string(tokens_bucket.capacity()));
      add(prefix + "remaining", std::to_string(tokens_bucket.remaining()));
      add(prefix + "reset", reset_at(tokens_bucket));
    }
  }
}

const Storm* Server::Impl::storm_now() const {
  if (!first_call) return nullptr;
  const auto since = clock.now() - *first_call;
  for (const Storm& storm : config.storms) {
    if (since >= storm.start && since < storm.start + storm.length) return &storm;
  }
  return nullptr;
}

double Server::Impl::draw_latency_ms() {
  if (config.latency_jitter <= 0.0) return config.latency_ms;
  std::normal_distribution<double> z(0.0, 1.0);
  return config.latency_ms * std::exp(config.latency_jitter * z(rng));
}

std::int64_t Server::Impl::draw_output_tokens(std::int64_t max_tokens) {
  auto tokens = static_cast<double>(config.output_tokens);
  const auto& q = config.output_tokens_quantiles;
  if (q.size() >= 2) {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    const auto upper = std::upper_bound(
        q.begin(), q.end(), u, [](double p, const auto& point) { return p < point.first; });
    if (upper == q.begin()) {
      tokens = q.front().second;
    } else if (upper == q.end()) {
      tokens = q.back().second;
    } else {
      const auto lower = std::prev(upper);
      const double f = (u - lower->first) / (upper->first - lower->first);
      tokens = lower->second + f * (upper->second - lower->second);
    }
  }
  return std::clamp<std::int64_t>(std::llround(tokens), 0, max_tokens);
}

awaitable<Reply> Server::Impl::handle(const Request& request) {
  const std::string_view target = request.target();
  if (request.method() == http::verb::get && target == "/stats") {
    co_return Reply{respond(request, http::status::ok, stats()), Action::answer, {}};
  }
  if (request.method() == http::verb::get && target == "/stats/calls") {
    co_return Reply{respond(request, http::status::ok, calls()), Action::answer, {}};
  }
  if (request.method() == http::verb::post && target == "/stats/reset") {
    requests = ok = rejected_429 = rejected_503 = failed_500 = timeouts = resets = malformed = 0;
    hostile_text = 0;
    storm_429 = 0;
    unauthorized = bad_requests = input_tokens = output_tokens = max_in_flight_seen = 0;
    image_parts = image_tokens = 0;
    cost_usd = 0.0;
    minutes.clear();
    for (auto& [text, counts] : texts) counts.calls = counts.answered = 0;
    std::erase_if(texts, [](const auto& entry) { return entry.second.in_flight == 0; });
    started = clock.now();
    co_return Reply{respond(request, http::status::ok, stats()), Action::answer, {}};
  }
  if (request.method() == http::verb::post && target == "/v1/chat/completions") {
    co_return co_await call(Dialect::openai, request);
  }
  if (request.method() == http::verb::post && target == "/v1/messages") {
    co_return co_await call(Dialect::anthropic, request);
  }
  co_return Reply{
      respond(
          request, http::status::not_found,
          error_body(
              Dialect::openai, "not_found",
              "use POST /v1/chat/completions, POST /v1/messages, GET /stats or GET /stats/calls")),
      Action::answer,
      {}};
}

awaitable<Reply> Server::Impl::call(Dialect dialect, const Request& request) {
  const auto refuse = [&](http::status status, std::string_view type, std::string_view message) {
    Reply reply{respond(request, status, error_body(dialect, type, message)), Action::answer, {}};
    add_limit_headers(dialect, reply.response);
    return reply;
  };
  if (!config.api_key.empty()) {
    const std::string_view given =
        dialect == Dialect::openai ? request[http::field::authorization] : request["x-api-key"];
    const std::string expected =
        dialect == Dialect::openai ? "Bearer " + config.api_key : config.api_key;
    if (given != expected) {
      ++unauthorized;
      co_return refuse(http::status::unauthorized, "authentication_error", "invalid API key");
    }
  }

  // The request: model, max_tokens, the text of every message (and the system prompt) and
  // its images.
  Result<CallBody> read = read_call_body(dialect, request.body(), config.cjk_tokens);
  if (!read.ok()) {
    ++bad_requests;
    co_return refuse(http::status::bad_request, "invalid_request_error", read.status().message());
  }
  const CallBody& body = read.value();
  const std::int64_t max_tokens = body.max_tokens;
  const std::int64_t input = body.input_tokens();

  change_at_call();
  if (!first_call) first_call = clock.now();
  ++requests;
  ++this_minute().requests;
  TextCalls& counts = texts[body.page];
  ++counts.calls;
  if (const Storm* storm = storm_now()) {
    // Injected, so neither counted as a limit refusal nor charged to the budget.
    ++storm_429;
    ++this_minute().storm_429;
    Reply reply = refuse(http::status::too_many_requests, "rate_limit_error",
                         "the service is overloaded: retry after the time given");
    reply.response.set(http::field::retry_after,
                       std::to_string(retry_after_seconds(storm->retry_after)));
    reply.response.set("retry-after-ms", std::to_string(storm->retry_after.count()));
    co_return reply;
  }
  Admission admission = budget.admit(input + max_tokens);
  if (const auto* wait = std::get_if<Wait>(&admission); wait && wait->limit == Limit::concurrency) {
    ++rejected_503;
    ++this_minute().rejected_503;
    Reply reply = refuse(http::status::service_unavailable, "overloaded_error",
                         "too many calls in flight: retry shortly");
    reply.response.set(http::field::retry_after, "1");
    co_return reply;
  }
  if (!std::holds_alternative<Lease>(admission)) {
    ++rejected_429;
    ++this_minute().rejected_429;
    const auto* wait = std::get_if<Wait>(&admission);
    const Clock::duration wait_for = wait ? wait->wait : std::chrono::seconds(60);
    const std::string which = wait ? std::string(to_string(wait->limit)) : "tokens";
    Reply reply = refuse(http::status::too_many_requests, "rate_limit_error",
                         wait ? fmt::format("rate limit reached for {} per minute", which)
                              : "the request is larger than a minute's token limit");
    reply.response.set(http::field::retry_after, std::to_string(retry_after_seconds(wait_for)));
    reply.response.set(
        "retry-after-ms",
        std::to_string(std::chrono::ceil<std::chrono::milliseconds>(wait_for).count()));
    co_return reply;
  }
  Lease lease = std::move(std::get<Lease>(admission));
  OpenCall open(counts);
  max_in_flight_seen = std::max(max_in_flight_seen, budget.in_flight().in_use());

  // Faults on demand, one draw per call.
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  const double fail = config.fail_rate;
  const double hang = fail + config.timeout_rate;
  const double reset = hang + config.reset_rate;
  const double broken = reset + config.malformed_rate;
  const bool hostile = u >= broken && u < broken + config.hostile_text_rate;
  // Hostile answers take turns: a 200 whose text holds a NUL, then a 500 of raw bytes.
  const bool hostile_500 = hostile && hostile_text % 2 == 1;
  if (hostile) ++hostile_text;
  if (u >= fail && u < hang) {
    ++timeouts;
    // The analyzer of clang-tidy 14 loses track of moves across a coroutine's suspensions.
    // NOLINTNEXTLINE(clang-analyzer-cplusplus.Move)
    co_return Reply{Response{}, Action::hang, Held{std::move(lease), std::move(open)}};
  }

  boost::system::error_code error;
  asio::steady_timer latency(io, std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double, std::milli>(draw_latency_ms())));
  co_await latency.async_wait(asio::redirect_error(use_awaitable, error));

  if (u < fail) {
    ++failed_500;
    lease.cancel();
    co_return refuse(http::status::internal_server_error, "api_error", "internal error, try again");
  }
  if (hostile_500) {
    lease.cancel();
    static constexpr char kRaw[] = "internal error\0 (a NUL byte), then a cut \xe2\x82";
    Reply reply{
        respond(request, http::status::internal_server_error, std::string(kRaw, sizeof kRaw - 1)),
        Action::answer,
        {}};
    add_limit_headers(dialect, reply.response);
    co_return reply;
  }
  if (u >= hang && u < reset) {
    ++resets;
    lease.cancel();
    co_return Reply{Response{}, Action::reset, {}};
  }
  const std::int64_t output = draw_output_tokens(max_tokens);
  lease.settle(input + output);
  input_tokens += input;
  output_tokens += output;
  image_parts += static_cast<std::int64_t>(body.images.size());
  image_tokens += body.image_tokens();
  // The minute the call ends in, looked up again: the vector may have grown while it slept.
  Minute& minute = this_minute();
  minute.input_tokens += input;
  minute.output_tokens += output;
  cost_usd += static_cast<double>(input + output) * config.price_per_mtok / 1e6;
  const std::string& model = body.model;
  ++counts.answered;
  // JSON writes the NUL as \u0000, which decodes to a NUL byte in the text.
  const std::string text = hostile ? body.page + std::string(1, '\0') + " after a NUL" : body.page;
  std::string answer;
  if (u >= reset && u < broken) {
    ++malformed;
    answer = R"({"id": "broken", "choices": [{"message": {"content": "half an ans)";
  } else if (dialect == Dialect::openai) {
    ++ok;
    ++minute.ok;
    answer = json::serialize(json::object{
        {"id", fmt::format("chatcmpl-{}", requests)},
        {"object", "chat.completion"},
        {"model", model},
        {"choices", json::array{json::object{
                        {"index", 0},
                        {"message", json::object{{"role", "assistant"}, {"content", text}}},
                        {"finish_reason", "stop"}}}},
        {"usage", json::object{{"prompt_tokens", input},
                               {"completion_tokens", output},
                               {"total_tokens", input + output}}}});
  } else {
    ++ok;
    ++minute.ok;
    answer = json::serialize(
        json::object{{"id", fmt::format("msg_{}", requests)},
                     {"type", "message"},
                     {"role", "assistant"},
                     {"model", model},
                     {"content", json::array{json::object{{"type", "text"}, {"text", text}}}},
                     {"stop_reason", "end_turn"},
                     {"usage", json::object{{"input_tokens", input}, {"output_tokens", output}}}});
  }
  Reply reply{respond(request, http::status::ok, std::move(answer)), Action::answer, {}};
  add_limit_headers(dialect, reply.response);
  co_return reply;
}

std::string Server::Impl::stats() const {
  const BudgetLimits limits = budget.effective_limits();
  json::array series;
  for (std::size_t i = 0; i < minutes.size(); ++i) {
    const Minute& m = minutes[i];
    series.push_back(json::object{{"minute", i},
                                  {"requests", m.requests},
                                  {"ok", m.ok},
                                  {"rejected_429", m.rejected_429},
                                  {"rejected_503", m.rejected_503},
                                  {"storm_429", m.storm_429},
                                  {"input_tokens", m.input_tokens},
                                  {"output_tokens", m.output_tokens}});
  }
  return json::serialize(
      json::object{{"requests", requests},
                   {"ok", ok},
                   {"rejected_429", rejected_429},
                   {"rejected_503", rejected_503},
                   {"failed_500", failed_500},
                   {"timeouts", timeouts},
                   {"resets", resets},
                   {"malformed", malformed},
                   {"hostile_text", hostile_text},
                   {"storm_429", storm_429},
                   {"unauthorized", unauthorized},
                   {"bad_requests", bad_requests},
                   {"in_flight", budget.in_flight().in_use()},
                   {"max_in_flight_seen", max_in_flight_seen},
                   {"connections", connections_open},
                   {"max_connections_seen", max_connections_seen},
                   {"input_tokens", input_tokens},
                   {"output_tokens", output_tokens},
                   {"image_parts", image_parts},
                   {"image_tokens", image_tokens},
                   {"cost_usd", cost_usd},
                   {"limits", json::object{{"requests_per_minute", limits.requests_per_minute},
                                           {"tokens_per_minute", limits.tokens_per_minute},
                                           {"max_in_flight", limits.max_in_flight},
                                           {"latency_ms", config.latency_ms}}},
                   {"changes_applied", changes_applied},
                   {"per_minute", std::move(series)}});
}

std::string Server::Impl::calls() const {
  std::vector<const std::pair<const std::string, TextCalls>*> sorted;
  sorted.reserve(texts.size());
  for (const auto& entry : texts) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  json::array pages;
  for (const auto* entry : sorted) {
    pages.push_back(json::object{{"text", entry->first},
                                 {"calls", entry->second.calls},
                                 {"answered", entry->second.answered},
                                 {"in_flight", entry->second.in_flight}});
  }
  return json::serialize(json::object{{"pages", std::move(pages)}});
}

Result<std::vector<std::pair<double, double>>> parse_quantiles(const std::string& text) {
  std::vector<std::pair<double, double>> points;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto colon = item.find(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument(item);
      points.emplace_back(std::stod(item.substr(0, colon)), std::stod(item.substr(colon + 1)));
    } catch (const std::exception&) {
      return Status(StatusCode::invalid_argument,
                    fmt::format("'{}' is not a probability:tokens pair (write 0.5:240)", item));
    }
  }
  bool ordered = points.size() >= 2 && points.front().first == 0.0 && points.back().first == 1.0;
  for (std::size_t i = 1; ordered && i < points.size(); ++i) {
    ordered = points[i].first > points[i - 1].first && points[i].second >= points[i - 1].second;
  }
  if (!ordered) {
    return Status(StatusCode::invalid_argument,
                  "--output-tokens-dist needs points from 0 to 1 with both numbers rising, "
                  "e.g. 0:40,0.5:240,0.9:1100,0.99:3800,1:4000");
  }
  return points;
}

Result<Storm> parse_storm(const std::string& text) {
  const auto bad = [&] {
    return Status(StatusCode::invalid_argument,
                  fmt::format("--storm takes START_S:LENGTH_S:RETRY_AFTER_S in seconds, e.g. "
                              "2:5:10, not '{}'",
                              text));
  };
  std::stringstream in(text);
  std::string item;
  std::vector<double> seconds;
  while (std::getline(in, item, ':')) {
    try {
      std::size_t used = 0;
      seconds.push_back(std::stod(item, &used));
      if (used != item.size()) return bad();
    } catch (const std::exception&) {
      return bad();
    }
  }
  if (seconds.size() != 3 ||
      std::any_of(seconds.begin(), seconds.end(), [](double s) { return !(s >= 0 && s < 1e6); })) {
    return bad();
  }
  const auto ms = [](double s) { return std::chrono::milliseconds(std::llround(s * 1000)); };
  return Storm{ms(seconds[0]), ms(seconds[1]), ms(seconds[2])};
}

Result<LimitChange> parse_change(const std::string& text) {
  const auto bad = [&](std::string_view why) {
    return Status(StatusCode::invalid_argument,
                  fmt::format("--change takes AT:KEY=VALUE,... with AT in milliseconds or "
                              "call=N, and keys rpm, tpm and latency-ms, e.g. "
                              "4000:tpm=3000,latency-ms=400 or call=100:tpm=3000; '{}' {}",
                              text, why));
  };
  const auto colon = text.find(':');
  if (colon == std::string::npos) return bad("has no ':' after the time");
  // A whole number of digits: no sign, no fraction, no spaces.
  const auto whole = [](std::string_view digits) -> std::optional<std::int64_t> {
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() ||
        value < 0) {
      return std::nullopt;
    }
    return value;
  };
  LimitChange change{};
  const std::string_view at = std::string_view(text).substr(0, colon);
  if (constexpr std::string_view kCall = "call="; at.starts_with(kCall)) {
    const auto call = whole(at.substr(kCall.size()));
    if (!call || *call < 1 || *call > 1'000'000'000) {
      return bad("gives the call as other than a whole number from 1");
    }
    change.at_call = call;
  } else {
    const auto at_ms = whole(at);
    if (!at_ms || *at_ms > 1'000'000'000) {
      return bad("does not start with a time in milliseconds or call=N");
    }
    change.at = std::chrono::milliseconds(*at_ms);
  }
  std::string_view rest = std::string_view(text).substr(colon + 1);
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const auto equals = item.find('=');
    if (equals == std::string_view::npos) {
      return bad(fmt::format("has '{}', not KEY=VALUE", item));
    }
    const std::string_view key = item.substr(0, equals);
    const std::string_view value = item.substr(equals + 1);
    if (key == "rpm" || key == "tpm") {
      auto& field = key == "rpm" ? change.requests_per_minute : change.tokens_per_minute;
      const auto limit = whole(value);
      if (field) return bad(fmt::format("gives {} twice", key));
      if (!limit || *limit < 1 || *limit > TokenBucket::kMaxCapacity) {
        return bad(fmt::format("gives {} as '{}': a whole number from 1", key, value));
      }
      field = limit;
    } else if (key == "latency-ms") {
      double ms = 0.0;
      const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), ms);
      if (change.latency_ms) return bad("gives latency-ms twice");
      if (value.empty() || error != std::errc() || end != value.data() + value.size() ||
          !(ms >= 0.0 && ms < 1e9)) {
        return bad(fmt::format("gives latency-ms as '{}': a number from 0", value));
      }
      change.latency_ms = ms;
    } else {
      return bad(fmt::format("has the unknown key '{}'", key));
    }
    if (comma == std::string_view::npos) return change;
    rest.remove_prefix(comma + 1);
  }
}

Status check_changes(const Config& config) {
  for (const LimitChange& change : config.changes) {
    if ((change.requests_per_minute && config.requests_per_minute == 0) ||
        (change.tokens_per_minute && config.tokens_per_minute == 0)) {
      return Status(StatusCode::invalid_argument,
                    "--change may change rpm or tpm only when --rpm or --tpm sets it (not 0, "
                    "unlimited)");
    }
  }
  return {};
}

}  // namespace fairlane::provider_sim
