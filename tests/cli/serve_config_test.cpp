// What `fairlane serve` gives each piece from its options.
#include "cli/serve_config.hpp"

#include <doctest/doctest.h>

#include "simulation.hpp"

using fairlane::cli::provider_config;
using fairlane::cli::ServeOptions;

TEST_CASE("The provider client opens as many connections as calls may be in flight") {
  ServeOptions options;
  options.max_in_flight = 50;
  CHECK(provider_config(options, fairlane::Dialect::openai).max_connections == 50);
  // 0 is no cap on calls in flight: no cap on connections either. One connection for all of
  // them queued every call behind the one before in libcurl, where its timeout ran out.
  options.max_in_flight = 0;
  CHECK(provider_config(options, fairlane::Dialect::openai).max_connections == 0);
}

TEST_CASE("--listen takes an IP address and a port of digits, IPv6 in brackets") {
  using fairlane::cli::listen_address;
  const auto v4 = listen_address("127.0.0.1:8080");
  REQUIRE(v4.ok());
  CHECK(v4->address == "127.0.0.1");
  CHECK(v4->port == 8080);
  CHECK(v4->url_host() == "127.0.0.1");
  const auto v6 = listen_address("[::1]:65535");
  REQUIRE(v6.ok());
  CHECK(v6->address == "::1");
  CHECK(v6->port == 65535);
  CHECK(v6->url_host() == "[::1]");
  CHECK(listen_address("0.0.0.0:0")->port == 0);  // any free port
  CHECK(listen_address("[::]:1")->address == "::");
}

TEST_CASE("--listen refuses a port with junk, out of range or missing, naming the remedy") {
  using fairlane::cli::listen_address;
  // Until 2026-12-07 std::stoi read "80x" as 80, and " 80" and "+80" passed too.
  for (const char* bad : {"127.0.0.1:80x", "127.0.0.1:", "127.0.0.1", "127.0.0.1:65536",
                          "127.0.0.1:99999999999999999999", "127.0.0.1:-1", "127.0.0.1: 80",
                          "127.0.0.1:+80", "[::1]:8o80"}) {
    const auto listen = listen_address(bad);
    REQUIRE_MESSAGE(!listen.ok(), bad);
    CHECK(listen.status().code() == fairlane::StatusCode::invalid_argument);
    CHECK_MESSAGE(
        listen.status().message().find("a port of digits, 0 to 65535") != std::string::npos,
        listen.status().message());
  }
}

TEST_CASE("--listen refuses a host that is not an IP address, saying to use one") {
  using fairlane::cli::listen_address;
  // Until 2026-12-07 these passed here and failed when the socket was opened, with no remedy.
  for (const char* bad : {"localhost:8080", "example.com:80", ":8080", "[localhost]:8080",
                          "[127.0.0.1]:8080", "::1:8080", "[::1:8080", "[::1]8080"}) {
    const auto listen = listen_address(bad);
    REQUIRE_MESSAGE(!listen.ok(), bad);
    CHECK_MESSAGE(
        listen.status().message().find("such as 127.0.0.1:8080 or [::1]:8080") != std::string::npos,
        listen.status().message());
  }
}

TEST_CASE("The simulator runs the budget fairlane serve keeps for the same limits") {
  // Its headroom included: without it, the simulator sent pages that the service holds back
  // a quarter second (two pages of 1,040 tokens at 2,080 TPM), and its figures were of a
  // budget the service does not run.
  ServeOptions options;
  options.rpm = 600;
  options.tpm = 300'000;
  options.max_in_flight = 20;
  fairlane::sim::FairlaneSettings settings;
  settings.requests_per_minute = 600;
  settings.tokens_per_minute = 300'000;
  settings.max_in_flight = 20;
  const fairlane::BudgetLimits served = fairlane::cli::dispatcher_config(options).limits;
  const fairlane::BudgetLimits simulated = fairlane::sim::limits_of(settings);
  CHECK(simulated.requests_per_minute == served.requests_per_minute);
  CHECK(simulated.tokens_per_minute == served.tokens_per_minute);
  CHECK(simulated.max_in_flight == served.max_in_flight);
  CHECK(served.token_headroom == 1'250);
  CHECK(simulated.token_headroom == served.token_headroom);
}
