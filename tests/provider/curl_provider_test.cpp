// The client against the stand-in, on loopback, one io_context for both: every outcome
// in both dialects, and the stand-in's limits seen from outside.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "fairlane/provider/curl_provider.hpp"
#include "provider_sim.hpp"

using namespace std::chrono_literals;
using fairlane::CurlProviderConfig;
using fairlane::Dialect;
using fairlane::ProviderOutcome;
using fairlane::ProviderRequest;
namespace outcome = fairlane::outcome;
namespace sim = fairlane::provider_sim;

namespace {

// A stand-in and a client on one io_context.
struct Rig {
  // `url_tail` follows the stand-in's address in --provider-url.
  explicit Rig(sim::Config config, Dialect dialect = Dialect::openai,
               CurlProviderConfig client = {}, const std::string& url_tail = "")
      : server(io, std::move(config)) {
    auto port = server.listen("127.0.0.1", 0);
    REQUIRE(port.ok());
    client.base_url = "http://127.0.0.1:" + std::to_string(port.value()) + url_tail;
    client.dialect = dialect;
    auto made = fairlane::make_curl_provider(io, client);
    REQUIRE_MESSAGE(made.ok(), made.status().message());
    provider = std::move(made).value();
  }

  // Starts `count` calls at once and runs until all are done (10 s at most).
  std::vector<ProviderOutcome> calls(int count, const ProviderRequest& request = kPage) {
    std::vector<ProviderOutcome> done;
    for (int i = 0; i < count; ++i) {
      provider->call(request, [&done](ProviderOutcome o) { done.push_back(std::move(o)); });
    }
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (static_cast<int>(done.size()) < count && std::chrono::steady_clock::now() < deadline) {
      io.run_for(20ms);
    }
    REQUIRE(static_cast<int>(done.size()) == count);
    return done;
  }

  boost::json::object stats() const { return boost::json::parse(server.stats_json()).as_object(); }

  static inline const ProviderRequest kPage{
      "Extract the text.", "It was a bright cold day in April.", "stand-in-model", 240};
  boost::asio::io_context io;
  sim::Server server;
  std::unique_ptr<fairlane::Provider> provider;
};

sim::Config quick() {
  sim::Config config;
  config.latency_ms = 5;
  return config;
}

template <typename Kind>
const Kind& expect(const ProviderOutcome& o) {
  REQUIRE_MESSAGE(std::holds_alternative<Kind>(o.kind), "got " << fairlane::outcome_name(o.kind));
  return std::get<Kind>(o.kind);
}

// One call of the page to `url` by a client of its own on `io`, run until it ends (20 s).
ProviderOutcome call_once(boost::asio::io_context& io, const std::string& url) {
  CurlProviderConfig config;
  config.base_url = url;
  auto provider = fairlane::make_curl_provider(io, config);
  REQUIRE(provider.ok());
  std::vector<ProviderOutcome> done;
  provider.value()->call(Rig::kPage, [&](ProviderOutcome o) { done.push_back(std::move(o)); });
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (done.empty() && std::chrono::steady_clock::now() < deadline) io.run_for(10ms);
  REQUIRE(done.size() == 1);
  return done[0];
}

}  // namespace

TEST_CASE("An answer in each dialect: the page's text, the usage, the rate-limit headers") {
  for (const Dialect dialect : {Dialect::openai, Dialect::anthropic}) {
    CAPTURE(fairlane::to_string(dialect));
    Rig rig(quick(), dialect);
    const auto done = rig.calls(1);
    const auto& ok = expect<outcome::Ok>(done[0]);
    CHECK(done[0].http_status == 200);
    CHECK(ok.output == Rig::kPage.page_text);
    // ceil((17 + 34 bytes) / 4) = 13 input tokens; 240 output tokens.
    CHECK(ok.input_tokens == 13);
    CHECK(ok.output_tokens == 240);
    CHECK(done[0].limits.requests.limit == 1'500);
    CHECK(done[0].limits.requests.remaining == 1'499);
    CHECK(done[0].limits.tokens.limit == 300'000);
    CHECK(done[0].latency >= 5ms);
    CHECK(rig.stats().at("ok") == 1);
  }
}

TEST_CASE("Calls past the stand-in's RPM get 429 with a retry-after that fits its bucket") {
  for (const Dialect dialect : {Dialect::openai, Dialect::anthropic}) {
    CAPTURE(fairlane::to_string(dialect));
    sim::Config config = quick();
    config.requests_per_minute = 6;  // one request every 10 s
    Rig rig(config, dialect);
    const auto done = rig.calls(8);
    int ok = 0;
    int limited = 0;
    for (const auto& o : done) {
      if (std::holds_alternative<outcome::Ok>(o.kind)) ++ok;
      if (const auto* r = std::get_if<outcome::RateLimited>(&o.kind)) {
        ++limited;
        CHECK(o.http_status == 429);
        REQUIRE(r->retry_after.has_value());
        // The bucket is empty: the next request fits in at most 10 s (less the time the
        // calls took to arrive, which a loaded machine may stretch).
        CHECK(*r->retry_after > 5s);
        CHECK(*r->retry_after <= 10s);
        CHECK(o.limits.requests.remaining == 0);
      }
    }
    CHECK(ok == 6);
    CHECK(limited == 2);
    CHECK(rig.stats().at("rejected_429") == 2);
  }
}

TEST_CASE("Calls past the stand-in's TPM get 429 too") {
  sim::Config config = quick();
  config.tokens_per_minute = 1'000;  // each call reserves 13 + 240 = 253: three fit
  Rig rig(config);
  const auto done = rig.calls(4);
  int limited = 0;
  for (const auto& o : done)
    limited += std::holds_alternative<outcome::RateLimited>(o.kind) ? 1 : 0;
  CHECK(limited == 1);
}

TEST_CASE("Calls past the stand-in's in-flight cap get 503 overloaded") {
  sim::Config config = quick();
  config.max_in_flight = 2;
  config.latency_ms = 1'000;  // long enough that all five arrive while two are held
  Rig rig(config, Dialect::anthropic);
  const auto done = rig.calls(5);
  int overloaded = 0;
  for (const auto& o : done) {
    if (std::holds_alternative<outcome::Overloaded>(o.kind)) {
      ++overloaded;
      CHECK(o.http_status == 503);
    }
  }
  CHECK(overloaded == 3);
  CHECK(rig.stats().at("max_in_flight_seen") == 2);
}

TEST_CASE("Faults on demand, in each dialect: 500, never answering, a reset, broken JSON") {
  for (const Dialect dialect : {Dialect::openai, Dialect::anthropic}) {
    CAPTURE(fairlane::to_string(dialect));
    {
      sim::Config config = quick();
      config.fail_rate = 1.0;
      Rig rig(config, dialect);
      const auto done = rig.calls(1);
      CHECK(expect<outcome::ServerError>(done[0]).status == 500);
    }
    {
      sim::Config config = quick();
      config.timeout_rate = 1.0;
      CurlProviderConfig client;
      client.call_timeout = 300ms;
      Rig rig(config, dialect, client);
      const auto done = rig.calls(1);
      expect<outcome::Timeout>(done[0]);
      CHECK(done[0].latency >= 300ms);
    }
    {
      sim::Config config = quick();
      config.reset_rate = 1.0;
      Rig rig(config, dialect);
      // The provider had the call: a reset is the call's failure, not an outage.
      CHECK_FALSE(expect<outcome::ConnectionError>(rig.calls(1)[0]).unreachable);
    }
    {
      sim::Config config = quick();
      config.malformed_rate = 1.0;
      Rig rig(config, dialect);
      const auto done = rig.calls(1);
      CHECK(expect<outcome::BadResponse>(done[0]).why.find("not JSON") != std::string::npos);
    }
    {
      sim::Config config = quick();
      config.max_in_flight = 1;
      config.latency_ms = 1'000;
      Rig rig(config, dialect);
      const auto done = rig.calls(2);
      CHECK(std::holds_alternative<outcome::Overloaded>(done[0].kind) !=
            std::holds_alternative<outcome::Overloaded>(done[1].kind));
    }
  }
}

TEST_CASE("A 429 storm refuses every call in its window, apart from the limit refusals") {
  sim::Config config = quick();
  config.storms = {sim::Storm{0ms, 60s, 7s}};
  Rig rig(config);
  const auto done = rig.calls(3);
  for (const auto& o : done) {
    CHECK(o.http_status == 429);
    CHECK(expect<outcome::RateLimited>(o).retry_after ==
          std::optional<fairlane::Clock::duration>(7s));
    // Not charged to the budget: the minute's requests are all still there.
    CHECK(o.limits.requests.remaining == 1'500);
  }
  const auto stats = rig.stats();
  CHECK(stats.at("storm_429") == 3);
  CHECK(stats.at("rejected_429") == 0);
  CHECK(stats.at("requests") == 3);
}

TEST_CASE("Calls before a storm's window are answered as usual") {
  sim::Config config = quick();
  config.storms = {sim::Storm{60s, 10s, 1s}};
  Rig rig(config);
  expect<outcome::Ok>(rig.calls(1)[0]);
  CHECK(rig.stats().at("storm_429") == 0);
}

TEST_CASE("A storm is written START_S:LENGTH_S:RETRY_AFTER_S") {
  const auto storm = sim::parse_storm("2:5.5:10");
  REQUIRE(storm.ok());
  CHECK(storm->start == 2s);
  CHECK(storm->length == 5500ms);
  CHECK(storm->retry_after == 10s);
  for (const char* bad : {"2:5", "2:5:10:1", "a:5:10", "2:-1:10", "2:5:10s", ""}) {
    CAPTURE(bad);
    const auto refused = sim::parse_storm(bad);
    CHECK(refused.status().code() == fairlane::StatusCode::invalid_argument);
    CHECK(refused.status().message().find("START_S:LENGTH_S:RETRY_AFTER_S") != std::string::npos);
  }
}

TEST_CASE("A change of limits is written AT:KEY=VALUE,... with keys rpm, tpm, latency-ms") {
  const auto all = sim::parse_change("4000:rpm=30,tpm=3000,latency-ms=400.5");
  REQUIRE(all.ok());
  CHECK(all->at == 4000ms);
  CHECK(all->requests_per_minute == 30);
  CHECK(all->tokens_per_minute == 3000);
  CHECK(all->latency_ms == 400.5);
  const auto one = sim::parse_change("0:tpm=1");
  REQUIRE(one.ok());
  CHECK(one->at == 0ms);
  CHECK_FALSE(one->requests_per_minute);
  CHECK(one->tokens_per_minute == 1);
  CHECK_FALSE(one->latency_ms);
  CHECK_FALSE(one->at_call);
  const auto at_call = sim::parse_change("call=114:tpm=15120,latency-ms=400");
  REQUIRE(at_call.ok());
  CHECK(at_call->at_call == 114);
  CHECK(at_call->tokens_per_minute == 15'120);
  CHECK(at_call->latency_ms == 400.0);
  for (const char* bad :
       {"", "4000", "4000:", "-1:tpm=5", "4s:tpm=5", "4000:tpm", "4000:tpm=0", "4000:tpm=-5",
        "4000:tpm=1.5", "4000:rpm=5,rpm=6", "4000:speed=2", "4000:latency-ms=-1",
        "4000:latency-ms=fast", "4000:tpm=5,", "call=0:tpm=5", "call=:tpm=5", "call=-2:tpm=5",
        "call=1.5:tpm=5", "calls=3:tpm=5"}) {
    CAPTURE(bad);
    const auto refused = sim::parse_change(bad);
    CHECK(refused.status().code() == fairlane::StatusCode::invalid_argument);
    CHECK(refused.status().message().find("AT:KEY=VALUE") != std::string::npos);
    CHECK(refused.status().message().find("call=N") != std::string::npos);
  }
}

TEST_CASE("A change may set only a limit the configuration sets") {
  sim::Config config;
  config.changes = {sim::LimitChange{1s, std::nullopt, 1'000, std::nullopt, std::nullopt}};
  CHECK(sim::check_changes(config).ok());
  config.tokens_per_minute = 0;
  CHECK(sim::check_changes(config).code() == fairlane::StatusCode::invalid_argument);
  config.changes = {sim::LimitChange{1s, std::nullopt, std::nullopt, 10.0, std::nullopt}};
  CHECK(sim::check_changes(config).ok());
}

namespace {

// Runs the rig's io_context until the stand-in has applied `n` changes (5 s at most).
void wait_for_changes(Rig& rig, std::int64_t n) {
  for (int i = 0; i < 500 && rig.stats().at("changes_applied").as_int64() < n; ++i) {
    rig.io.run_for(10ms);
  }
  REQUIRE(rig.stats().at("changes_applied").as_int64() == n);
}

}  // namespace

TEST_CASE("After a change the stand-in enforces and announces the new limits, in both dialects") {
  for (const Dialect dialect : {Dialect::openai, Dialect::anthropic}) {
    CAPTURE(fairlane::to_string(dialect));
    sim::Config config = quick();
    config.changes = {sim::LimitChange{0ms, 2, 150'000, 20.0, std::nullopt}};
    Rig rig(config, dialect);
    wait_for_changes(rig, 1);
    const auto limits = rig.stats().at("limits").as_object();
    CHECK(limits.at("requests_per_minute") == 2);
    CHECK(limits.at("tokens_per_minute") == 150'000);
    CHECK(limits.at("latency_ms") == 20.0);
    const auto done = rig.calls(3);
    int ok = 0;
    for (const auto& o : done) {
      CHECK(o.limits.requests.limit == 2);
      CHECK(o.limits.tokens.limit == 150'000);
      CHECK(o.limits.tokens_limit() == 150'000);
      if (std::holds_alternative<outcome::Ok>(o.kind)) {
        ++ok;
        CHECK(o.latency >= 20ms);
      }
    }
    CHECK(ok == 2);  // the third is over the new RPM of 2
    CHECK(rig.stats().at("rejected_429") == 1);
  }
}

TEST_CASE("A change may raise a limit above the configured one") {
  sim::Config config = quick();
  config.tokens_per_minute = 1'000;
  config.changes = {sim::LimitChange{0ms, std::nullopt, 2'000, std::nullopt, std::nullopt}};
  Rig rig(config);
  wait_for_changes(rig, 1);
  CHECK(rig.stats().at("limits").as_object().at("tokens_per_minute") == 2'000);
  const auto done = rig.calls(1);
  expect<outcome::Ok>(done[0]);
  CHECK(done[0].limits.tokens.limit == 2'000);
  // The bucket started full at 1,000 and the call took 253: raising the limit added no
  // tokens at once (it refills 33 a second, so this holds for 7 s of a slow machine).
  CHECK(*done[0].limits.tokens.remaining < 1'000);
}

TEST_CASE("A change at a call applies as that call arrives, whatever the time") {
  sim::Config config = quick();
  // At 0 ms a timed change would have applied at once: only the count applies these. Given
  // out of order, applied in call order.
  config.changes = {sim::LimitChange{0ms, std::nullopt, std::nullopt, 30.0, 5},
                    sim::LimitChange{0ms, 2, std::nullopt, std::nullopt, 2}};
  Rig rig(config);
  const auto first = rig.calls(1);
  expect<outcome::Ok>(first[0]);
  CHECK(first[0].limits.requests.limit == 1'500);
  CHECK(rig.stats().at("changes_applied") == 0);
  // Calls 2 to 4: the second is the first under an RPM of 2, so the fourth is refused.
  int ok = 0;
  for (const auto& o : rig.calls(3)) {
    CHECK(o.limits.requests.limit == 2);
    if (std::holds_alternative<outcome::Ok>(o.kind)) ++ok;
  }
  CHECK(ok == 2);
  CHECK(rig.stats().at("rejected_429") == 1);
  CHECK(rig.stats().at("changes_applied") == 1);
  CHECK(rig.stats().at("limits").as_object().at("latency_ms") == 5.0);
  rig.calls(1);  // the fifth
  CHECK(rig.stats().at("changes_applied") == 2);
  CHECK(rig.stats().at("limits").as_object().at("latency_ms") == 30.0);
}

TEST_CASE("Nobody listening is a connection error that says the provider is unreachable") {
  boost::asio::io_context io;
  CurlProviderConfig config;
  config.base_url = "http://127.0.0.1:1";
  auto provider = fairlane::make_curl_provider(io, config);
  REQUIRE(provider.ok());
  std::vector<ProviderOutcome> done;
  provider.value()->call(Rig::kPage, [&](ProviderOutcome o) { done.push_back(std::move(o)); });
  CHECK(provider.value()->in_flight() == 1);
  for (int i = 0; i < 500 && done.empty(); ++i) io.run_for(10ms);
  REQUIRE(done.size() == 1);
  CHECK(expect<outcome::ConnectionError>(done[0]).unreachable);
  CHECK(done[0].http_status == 0);
  CHECK(provider.value()->in_flight() == 0);
}

TEST_CASE("A connect that is never answered is unreachable, not a call that timed out") {
  // A listener whose queue of connections is full drops the SYNs of new ones, as a firewall
  // or a partition does: the connect waits, and times out.
  using tcp = boost::asio::ip::tcp;
  boost::asio::io_context io;
  const tcp::endpoint loopback{boost::asio::ip::make_address("127.0.0.1"), 0};
  tcp::acceptor silent(io, loopback);
  silent.listen(0);
  const tcp::endpoint at{loopback.address(), silent.local_endpoint().port()};
  // Fill the queue; never accepted. Connected asynchronously: a blocking connect whose SYN
  // is dropped waits for the kernel to give up, two minutes.
  std::vector<tcp::socket> queued;
  for (int i = 0; i < 2; ++i) {
    queued.emplace_back(io, tcp::v4());
    queued.back().async_connect(at, [](const boost::system::error_code&) {});
  }
  CurlProviderConfig config;
  config.base_url = "http://127.0.0.1:" + std::to_string(at.port());
  config.connect_timeout = 300ms;
  auto provider = fairlane::make_curl_provider(io, config);
  REQUIRE(provider.ok());
  std::vector<ProviderOutcome> done;
  provider.value()->call(Rig::kPage, [&](ProviderOutcome o) { done.push_back(std::move(o)); });
  for (int i = 0; i < 500 && done.empty(); ++i) io.run_for(10ms);
  REQUIRE(done.size() == 1);
  // Nothing was sent: the provider is away, and the page spends no attempt on it.
  CHECK(expect<outcome::ConnectionError>(done[0]).unreachable);
  CHECK(done[0].http_status == 0);
}

TEST_CASE("An answer larger than any page's is cut off, not held whole") {
  // Something at the provider's URL that answers 200 with a body without end (a wrong URL,
  // a proxy's stream): the client stops at its cap, and the call failed saying so.
  using tcp = boost::asio::ip::tcp;
  boost::asio::io_context io;
  tcp::acceptor endless(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  std::optional<tcp::socket> peer;
  std::size_t written = 0;
  const std::string chunk(64 * 1024, 'x');
  std::function<void()> write_more = [&] {
    boost::asio::async_write(*peer, boost::asio::buffer(chunk),
                             [&](const boost::system::error_code& error, std::size_t n) {
                               written += n;
                               if (!error) write_more();
                             });
  };
  endless.async_accept([&](const boost::system::error_code& error, tcp::socket socket) {
    REQUIRE_FALSE(error);
    peer.emplace(std::move(socket));
    const std::string head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n";
    boost::asio::write(*peer, boost::asio::buffer(head));
    write_more();
  });
  const ProviderOutcome o =
      call_once(io, "http://127.0.0.1:" + std::to_string(endless.local_endpoint().port()));
  const auto& failed = expect<outcome::BadResponse>(o);
  CHECK_MESSAGE(failed.why.find("larger than 8 MB") != std::string::npos, failed.why);
  CHECK(written < std::size_t{64} * 1024 * 1024);  // stopped near the cap, not at the deadline
}

TEST_CASE("The key is sent, checked, and appears in no outcome") {
  const std::string key = "sk-test-5f1d2c9a-never-print-me";
  setenv("FAIRLANE_TEST_PROVIDER_KEY", key.c_str(), 1);
  setenv("FAIRLANE_TEST_WRONG_KEY", "sk-wrong", 1);
  for (const Dialect dialect : {Dialect::openai, Dialect::anthropic}) {
    CAPTURE(fairlane::to_string(dialect));
    sim::Config config = quick();
    config.api_key = key;
    CurlProviderConfig right;
    right.api_key_env = "FAIRLANE_TEST_PROVIDER_KEY";
    Rig good(config, dialect, right);
    expect<outcome::Ok>(good.calls(1)[0]);

    CurlProviderConfig wrong;
    wrong.api_key_env = "FAIRLANE_TEST_WRONG_KEY";
    Rig bad(config, dialect, wrong);
    const auto done = bad.calls(1);
    const auto& refused = expect<outcome::ClientError>(done[0]);
    CHECK(refused.status == 401);
    CHECK(refused.detail.find("sk-") == std::string::npos);
  }
  boost::asio::io_context io;
  CurlProviderConfig missing;
  missing.base_url = "http://127.0.0.1:1";
  missing.api_key_env = "FAIRLANE_TEST_UNSET_KEY_VARIABLE";
  const auto refused = fairlane::make_curl_provider(io, missing);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("FAIRLANE_TEST_UNSET_KEY_VARIABLE") != std::string::npos);
}

TEST_CASE("A provider URL with a slash at its end is taken, one ending in /v1 is refused") {
  // Before, http://host:port/ was called at //v1/chat/completions (404 for every page), and
  // https://api.openai.com/v1, as OPENAI_BASE_URL is written, at /v1/v1/... (the same).
  for (const std::string tail : {"/", "//"}) {
    CAPTURE(tail);
    Rig rig(quick(), Dialect::openai, {}, tail);
    expect<outcome::Ok>(rig.calls(1)[0]);
  }
  boost::asio::io_context io;
  const auto refusal = [&](const std::string& url) {
    CurlProviderConfig config;
    config.base_url = url;
    const auto made = fairlane::make_curl_provider(io, config);
    return made.ok() ? std::string("(taken)") : made.status().message();
  };
  CHECK(refusal("https://api.openai.com/v1") ==
        "--provider-url https://api.openai.com/v1 ends in /v1, and fairlane adds "
        "/v1/chat/completions or /v1/messages itself: give https://api.openai.com");
  CHECK(refusal("https://api.anthropic.com/v1/") ==
        "--provider-url https://api.anthropic.com/v1/ ends in /v1, and fairlane adds "
        "/v1/chat/completions or /v1/messages itself: give https://api.anthropic.com");
  CHECK(refusal("127.0.0.1:9000") ==
        "--provider-url 127.0.0.1:9000 is not an http:// or https:// URL: give one, such as "
        "http://127.0.0.1:9000");
  CHECK(refusal("https://gateway.example/openai") == "(taken)");
  CHECK(refusal("HTTPS://API.OPENAI.COM/V1") ==
        "--provider-url HTTPS://API.OPENAI.COM/V1 ends in /v1, and fairlane adds "
        "/v1/chat/completions or /v1/messages itself: give HTTPS://API.OPENAI.COM");
}

TEST_CASE("What the stand-in bills is what the client was told") {
  sim::Config config = quick();
  config.output_tokens_quantiles = {{0.0, 40}, {0.5, 240}, {0.9, 1100}, {1.0, 4000}};
  Rig rig(config);
  ProviderRequest request = Rig::kPage;
  request.max_tokens = 4'000;
  const auto done = rig.calls(50, request);
  std::int64_t input = 0;
  std::int64_t output = 0;
  for (const auto& o : done) {
    const auto& ok = expect<outcome::Ok>(o);
    input += ok.input_tokens;
    output += ok.output_tokens;
    CHECK(ok.output_tokens <= 4'000);
  }
  const auto stats = rig.stats();
  CHECK(stats.at("input_tokens") == input);
  CHECK(stats.at("output_tokens") == output);
  CHECK(stats.at("cost_usd").as_double() ==
        doctest::Approx(static_cast<double>(input + output) * 3.0 / 1e6));
}

TEST_CASE("The stand-in corrects a call's tokens when it ends: unused output comes back") {
  sim::Config config = quick();
  config.tokens_per_minute = 10'000;
  config.output_tokens = 10;
  Rig rig(config);
  ProviderRequest request = Rig::kPage;
  request.max_tokens = 1'000;  // reserves 13 + 1,000; uses 13 + 10
  const auto first = rig.calls(1);
  const auto second = rig.calls(1);
  // Corrected: 10,000 - 23 - 23 (plus refill). Uncorrected it would be 10,000 - 2 x 1,013.
  REQUIRE(second[0].limits.tokens.remaining.has_value());
  CHECK(*second[0].limits.tokens.remaining >= 9'950);
}

TEST_CASE("A call that is never answered holds its in-flight place until the client goes") {
  sim::Config config = quick();
  config.timeout_rate = 1.0;
  CurlProviderConfig client;
  client.call_timeout = 500ms;
  Rig rig(config, Dialect::openai, client);
  std::vector<ProviderOutcome> done;
  rig.provider->call(Rig::kPage, [&](ProviderOutcome o) { done.push_back(std::move(o)); });
  // Bounded: run until the stand-in holds the call, then until the client gives up.
  for (int i = 0; i < 100 && rig.stats().at("in_flight") != 1; ++i) rig.io.run_for(10ms);
  CHECK(rig.stats().at("in_flight") == 1);
  for (int i = 0; i < 500 && done.empty(); ++i) rig.io.run_for(10ms);
  REQUIRE(done.size() == 1);
  expect<outcome::Timeout>(done[0]);
  for (int i = 0; i < 100 && rig.stats().at("in_flight") != 0; ++i) rig.io.run_for(10ms);
  CHECK(rig.stats().at("in_flight") == 0);
}

TEST_CASE("The stand-in counts the calls of each page text: arrived, answered, in flight") {
  Rig rig(quick());
  const ProviderRequest other{"Extract the text.", "Another page.", "stand-in-model", 240};
  std::vector<ProviderOutcome> done;
  const auto collect = [&done](ProviderOutcome o) { done.push_back(std::move(o)); };
  rig.provider->call(Rig::kPage, collect);
  rig.provider->call(Rig::kPage, collect);
  rig.provider->call(other, collect);
  for (int i = 0; i < 500 && done.size() < 3; ++i) rig.io.run_for(10ms);
  REQUIRE(done.size() == 3);
  auto texts = rig.server.calls_by_text();
  REQUIRE(texts.size() == 2);
  const sim::TextCalls page = texts.at(std::string(Rig::kPage.page_text));
  const sim::TextCalls another = texts.at("Another page.");
  CHECK(page.calls == 2);
  CHECK(page.answered == 2);
  CHECK(another.calls == 1);
  CHECK(another.answered == 1);
  CHECK(page.in_flight == 0);
  CHECK(another.in_flight == 0);
  const sim::TextCalls totals = rig.server.call_totals();
  CHECK(totals.calls == 3);
  CHECK(totals.answered == 3);
  CHECK(totals.in_flight == 0);
  const auto json = boost::json::parse(rig.server.calls_json()).as_object();
  const auto& pages = json.at("pages").as_array();
  REQUIRE(pages.size() == 2);
  CHECK(pages[0].at("text") == "Another page.");  // in text order
  CHECK(pages[0].at("calls") == another.calls);
  CHECK(pages[1].at("answered") == page.answered);
}

TEST_CASE("A call never answered is in flight for its text until its client goes") {
  sim::Config config = quick();
  config.timeout_rate = 1.0;
  CurlProviderConfig client;
  client.call_timeout = 500ms;
  Rig rig(config, Dialect::openai, client);
  std::vector<ProviderOutcome> done;
  rig.provider->call(Rig::kPage, [&](ProviderOutcome o) { done.push_back(std::move(o)); });
  const std::string text(Rig::kPage.page_text);
  const auto in_flight = [&] {
    const auto texts = rig.server.calls_by_text();
    const auto found = texts.find(text);
    return found == texts.end() ? -1 : found->second.in_flight;
  };
  for (int i = 0; i < 100 && in_flight() != 1; ++i) rig.io.run_for(10ms);
  CHECK(in_flight() == 1);
  CHECK(rig.server.call_totals().in_flight == 1);
  for (int i = 0; i < 500 && done.empty(); ++i) rig.io.run_for(10ms);
  REQUIRE(done.size() == 1);
  for (int i = 0; i < 100 && in_flight() != 0; ++i) rig.io.run_for(10ms);
  CHECK(in_flight() == 0);
  CHECK(rig.server.calls_by_text().at(text).calls == 1);
  CHECK(rig.server.calls_by_text().at(text).answered == 0);
}

TEST_CASE("Connections are reused, and never more than max_connections are open (0: no cap)") {
  SUBCASE("one after another: one connection") {
    Rig rig(quick());
    for (int i = 0; i < 20; ++i) expect<outcome::Ok>(rig.calls(1)[0]);
    CHECK(rig.stats().at("max_connections_seen") == 1);
  }
  SUBCASE("forty at once under a cap of four") {
    CurlProviderConfig client;
    client.max_connections = 4;
    Rig rig(quick(), Dialect::openai, client);
    for (const auto& o : rig.calls(40)) expect<outcome::Ok>(o);
    CHECK(rig.stats().at("max_connections_seen").as_int64() <= 4);
  }
  SUBCASE("forty at once with no cap (0): a connection each, none queued behind another") {
    CurlProviderConfig client;
    client.max_connections = 0;
    Rig rig(quick(), Dialect::openai, client);
    for (const auto& o : rig.calls(40)) expect<outcome::Ok>(o);
    CHECK(rig.stats().at("max_connections_seen").as_int64() > 4);
  }
}

TEST_CASE("A provider destroyed with calls in flight calls nobody back") {
  sim::Config config = quick();
  config.latency_ms = 200;
  Rig rig(config);
  int called = 0;
  // By reference: the outcome is not looked at. A lambda taking it by value, unused, makes
  // GCC 12 at -O3 warn that the moved-in variant's string "may be used uninitialized" when
  // it is destroyed (-Wmaybe-uninitialized, a false positive in std::variant's inlined reset).
  for (int i = 0; i < 3; ++i) {
    rig.provider->call(Rig::kPage, [&](const ProviderOutcome&) { ++called; });
  }
  rig.io.run_for(50ms);
  CHECK(rig.provider->in_flight() == 3);
  rig.provider.reset();
  rig.io.run_for(400ms);
  CHECK(called == 0);
}

TEST_CASE("The stand-in counts a CJK character as a token when asked, the rest as bytes / 4") {
  using fairlane::provider_sim::count_input_tokens;
  const std::string han = "\xe6\xbc\xa2\xe5\xad\x97";  // two ideographs, six bytes
  CHECK(count_input_tokens(han, false) == 2);          // ceil(6 / 4)
  CHECK(count_input_tokens(han, true) == 2);
  CHECK(count_input_tokens(han + han + han + han, false) == 6);
  CHECK(count_input_tokens(han + han + han + han, true) == 8);
  CHECK(count_input_tokens("Extract this: " + han, true) == 2 + 4);  // 14 ASCII bytes
  // Hangul and kana count too; other three-byte characters (a euro sign) do not.
  CHECK(count_input_tokens("\xea\xb0\x80\xe3\x81\x82", true) == 2);
  CHECK(count_input_tokens("\xe2\x82\xac\xe2\x82\xac", true) == 2);  // ceil(6 / 4)
  CHECK(count_input_tokens("", true) == 0);
}

namespace {

// A server on loopback that answers every connection's first request head with `answer`,
// and the outcome of one call to `url` (the provider's URL) with it there.
struct Canned {
  using tcp = boost::asio::ip::tcp;
  explicit Canned(std::string answer_text) : answer(std::move(answer_text)) { accept(); }

  void accept() {
    acceptor.async_accept([this](const boost::system::error_code& error, tcp::socket socket) {
      if (error) return;
      auto peer = std::make_shared<tcp::socket>(std::move(socket));
      auto head = std::make_shared<std::string>();
      boost::asio::async_read_until(
          *peer, boost::asio::dynamic_buffer(*head), "\r\n\r\n",
          [this, peer, head](const boost::system::error_code& read, std::size_t) {
            if (!read) boost::asio::write(*peer, boost::asio::buffer(answer));
            heads.push_back(*head);
          });
      accept();
    });
  }

  ProviderOutcome call(const std::string& url) { return call_once(io, url); }

  [[nodiscard]] std::string url() const {
    return "http://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
  }

  boost::asio::io_context io;
  tcp::acceptor acceptor{io, {boost::asio::ip::make_address("127.0.0.1"), 0}};
  std::string answer;
  std::vector<std::string> heads;
};

// Sets an environment variable for a scope (libcurl reads its proxy from there).
struct ScopedEnv {
  ScopedEnv(const char* name_text, const char* value) : name(name_text) {
    if (const char* before = std::getenv(name)) old = before;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old) {
      ::setenv(name, old->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  const char* name;
  std::optional<std::string> old;
};

}  // namespace

TEST_CASE("A redirect names where it points, and is a refusal of fairlane's URL") {
  Canned moved(
      "HTTP/1.1 301 Moved Permanently\r\nLocation: https://api.example.test/v1/chat/completions"
      "\r\nContent-Type: text/html\r\nContent-Length: 9\r\n\r\n<html/>\r\n");
  const ProviderOutcome o = moved.call(moved.url());
  CHECK(o.http_status == 301);
  const auto& refused = expect<outcome::ClientError>(o);
  CHECK(refused.detail == "redirected to https://api.example.test/v1/chat/completions");
  CHECK_FALSE(refused.remedy.empty());
}

TEST_CASE("A proxy that refuses the tunnel with 407 is a refusal of fairlane, naming the proxy") {
  // An https provider through HTTPS_PROXY: libcurl asks the proxy to CONNECT, and a 407
  // there failed the transfer with no response code, a transient error every page spent
  // its attempts on. Any other refusal of the tunnel leaves the provider out of reach.
  Canned proxy("HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n");
  const ScopedEnv https_proxy("HTTPS_PROXY", proxy.url().c_str());
  const ScopedEnv lower("https_proxy", proxy.url().c_str());
  const ScopedEnv no_proxy("NO_PROXY", nullptr);
  const ScopedEnv no_proxy_lower("no_proxy", nullptr);
  const ProviderOutcome o = proxy.call("https://provider.example.test");
  REQUIRE(proxy.heads.size() == 1);
  CHECK(proxy.heads[0].starts_with("CONNECT provider.example.test:443"));
  CHECK(o.http_status == 407);
  const auto& refused = expect<outcome::ClientError>(o);
  CHECK(refused.detail == "the proxy answered the tunnel's CONNECT with 407");
  CHECK(refused.remedy == "check the proxy's login (libcurl's proxy variables)");

  Canned gateway("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n");
  const ScopedEnv https_proxy_2("HTTPS_PROXY", gateway.url().c_str());
  const ScopedEnv lower_2("https_proxy", gateway.url().c_str());
  const ProviderOutcome away = gateway.call("https://provider.example.test");
  CHECK(expect<outcome::ConnectionError>(away).unreachable);
}
