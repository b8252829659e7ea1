// fairlane-provider-sim: a stand-in AI provider that enforces real limits, for running and
// testing fairlane on loopback. Prints "listening on http://ADDRESS:PORT" once ready.
#include <sys/resource.h>
#include <CLI/CLI.hpp>

#include <boost/asio.hpp>
#include <cstdlib>
#include <iostream>

#include "fairlane/version.hpp"
#include "provider_sim.hpp"

// An exception that reaches here is a bug; it is reported, not left to std::terminate.
int main(int argc, char** argv) try {
  CLI::App app{
      "fairlane-provider-sim: a stand-in AI provider (OpenAI and Anthropic dialects) that\n"
      "enforces its limits like a real one: 429 with retry-after past its RPM or TPM, 503 past\n"
      "its in-flight cap. It takes image parts (PNG or JPEG, base64) and bills them by the\n"
      "dialect's published rule. GET /stats reports what it served and billed, GET\n"
      "/stats/calls the calls per page (its text and images).",
      "fairlane-provider-sim"};
  app.set_version_flag("--version", std::string("fairlane-provider-sim ") + fairlane::kVersion);
  // Every flag can also come from a TOML file: rpm = 600, listen = "127.0.0.1:9000", ...
  app.set_config("--config", "", "Read these options from a TOML file (flags win)");
  app.allow_config_extras(false);
  fairlane::provider_sim::Config config;
  std::string listen = "127.0.0.1:9000";
  std::string distribution;
  std::string api_key_env;
  app.add_option("--listen", listen, "ADDRESS:PORT to listen on (port 0: any free one)")
      ->capture_default_str();
  app.add_option("--rpm", config.requests_per_minute, "Requests per minute (0: unlimited)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--tpm", config.tokens_per_minute, "Tokens per minute (0: unlimited)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-in-flight", config.max_in_flight, "Calls in flight at once (0: unlimited)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--latency-ms", config.latency_ms, "Time to answer a call")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--latency-jitter", config.latency_jitter,
                 "Lognormal sigma around --latency-ms (0: fixed)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--output-tokens", config.output_tokens, "Output tokens of an answer")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option(
      "--output-tokens-dist", distribution,
      "Output tokens from a quantile table, e.g. 0:40,0.5:240,0.9:1100,0.99:3800,1:4000");
  app.add_option("--price-per-mtok", config.price_per_mtok, "Dollars per million tokens")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--fail-rate", config.fail_rate, "Share of calls answered 500")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--timeout-rate", config.timeout_rate, "Share of calls never answered")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--reset-rate", config.reset_rate, "Share of calls whose connection is reset")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--malformed-rate", config.malformed_rate,
                 "Share of calls answered with broken JSON")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--hostile-text-rate", config.hostile_text_rate,
                 "Share of calls answered with text no database takes as it is: in turn, 200 "
                 "with a NUL in the text, and 500 with a raw body holding a NUL and a cut "
                 "UTF-8 sequence")
      ->check(CLI::Range(0.0, 1.0));
  std::vector<std::string> storms;
  app.add_option("--storm", storms,
                 "START_S:LENGTH_S:RETRY_AFTER_S: answer every call 429 with that Retry-After "
                 "for LENGTH_S seconds from START_S after the first call (repeatable)");
  std::vector<std::string> changes;
  app.add_option("--change", changes,
                 "AT:KEY=VALUE,...: from AT (milliseconds after the start, or call=N for "
                 "the N-th call) enforce and announce new limits; keys rpm, tpm, latency-ms, "
                 "e.g. 4000:tpm=3000,latency-ms=400 or call=100:tpm=3000 (repeatable)");
  app.add_option("--seed", config.seed, "Random seed")->capture_default_str();
  app.add_flag("--cjk-tokens", config.cjk_tokens,
               "Count each CJK character as one input token (the rest bytes / 4)");
  app.add_option("--api-key-env", api_key_env,
                 "Require the key in this environment variable (401 otherwise)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (config.fail_rate + config.timeout_rate + config.reset_rate + config.malformed_rate +
          config.hostile_text_rate >
      1.0) {
    std::cerr << "fairlane-provider-sim: the fault rates add up to more than 1\n";
    return 2;
  }
  for (const std::string& text : storms) {
    auto storm = fairlane::provider_sim::parse_storm(text);
    if (!storm.ok()) {
      std::cerr << "fairlane-provider-sim: " << storm.status().message() << '\n';
      return 2;
    }
    config.storms.push_back(storm.value());
  }
  for (const std::string& text : changes) {
    auto change = fairlane::provider_sim::parse_change(text);
    if (!change.ok()) {
      std::cerr << "fairlane-provider-sim: " << change.status().message() << '\n';
      return 2;
    }
    config.changes.push_back(change.value());
  }
  if (const auto fits = fairlane::provider_sim::check_changes(config); !fits.ok()) {
    std::cerr << "fairlane-provider-sim: " << fits.message() << '\n';
    return 2;
  }
  if (!distribution.empty()) {
    auto points = fairlane::provider_sim::parse_quantiles(distribution);
    if (!points.ok()) {
      std::cerr << "fairlane-provider-sim: " << points.status().message() << '\n';
      return 2;
    }
    config.output_tokens_quantiles = std::move(points).value();
  }
  if (!api_key_env.empty()) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread starts
    const char* key = std::getenv(api_key_env.c_str());
    if (key == nullptr || *key == '\0') {
      std::cerr << "fairlane-provider-sim: the environment variable " << api_key_env
                << " is not set\n";
      return 2;
    }
    config.api_key = key;
  }
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) {
    std::cerr << "fairlane-provider-sim: --listen takes ADDRESS:PORT, not '" << listen << "'\n";
    return 2;
  }
  int port = 0;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (const std::exception&) {
    port = -1;
  }
  if (port < 0 || port > 65535) {
    std::cerr << "fairlane-provider-sim: '" << listen.substr(colon + 1) << "' is not a port\n";
    return 2;
  }

  // A thousand connections need a thousand descriptors: raise the soft limit to the hard.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  boost::asio::io_context io;
  fairlane::provider_sim::Server server(io, config);
  auto bound = server.listen(listen.substr(0, colon), static_cast<std::uint16_t>(port));
  if (!bound.ok()) {
    std::cerr << "fairlane-provider-sim: " << bound.status().message() << '\n';
    return 1;
  }
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int) {
    server.stop();
    io.stop();
  });
  std::cout << "listening on http://" << listen.substr(0, colon) << ':' << bound.value()
            << std::endl;
  io.run();
  return 0;
} catch (const std::exception& e) {
  std::cerr << "fairlane-provider-sim: internal error: " << e.what() << '\n';
  return 1;
}
