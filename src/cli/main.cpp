// The `fairlane` command: `fairlane serve` runs the service; `fairlane user add` adds a user
// to a database and prints their key. (The client commands, enqueue, watch, status, result,
// cancel and estimate, come with the CLI's own issue.) Every flag can also come from a TOML
// file given with --config.
#include <sys/resource.h>
#include <CLI/CLI.hpp>

#include <boost/asio.hpp>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include "fairlane/curl_provider.hpp"
#include "fairlane/store.hpp"
#include "fairlane/version.hpp"
#include "service/dispatcher.hpp"
#include "service/http_server.hpp"
#include "service/router.hpp"

namespace {

// Exit statuses, documented in README.md.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;  // the command could not do its job
constexpr int kExitUsage = 2;    // the command line itself is wrong

struct ServeOptions {
  std::string listen = "127.0.0.1:8080";
  std::string db = "fairlane.db";
  std::string provider_url;
  std::string provider_dialect = "openai";
  std::string model = "default";
  std::string api_key_env;
  std::string admin_key_env = "FAIRLANE_ADMIN_KEY";
  std::string prompt = "Extract the text of this page and structure it as Markdown.";
  std::int64_t rpm = 1'500;
  std::int64_t tpm = 300'000;
  std::int64_t max_in_flight = 200;
  std::int64_t max_tokens = 1'000;
  double max_wait = 60.0;
  std::int64_t max_attempts = 5;
  std::int64_t max_queued_pages_per_user = 10'000;
  std::int64_t max_body_mb = 100;
  double stop_deadline = 30.0;
  double backoff_base = 1.0;
  double backoff_max = 60.0;
  double heartbeat = 15.0;
};

int fail(const std::string& message) {
  std::cerr << "fairlane: " << message << '\n';
  return kExitFailure;
}

int serve(const ServeOptions& o) {
  const auto colon = o.listen.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    try {
      port = std::stoi(o.listen.substr(colon + 1));
    } catch (const std::exception&) {
      port = -1;
    }
  }
  if (port < 0 || port > 65535) {
    std::cerr << "fairlane: --listen takes ADDRESS:PORT, such as 127.0.0.1:8080, not '" << o.listen
              << "'\n";
    return kExitUsage;
  }
  const auto dialect = fairlane::dialect_from(o.provider_dialect);
  if (!dialect) {
    std::cerr << "fairlane: --provider-dialect is openai or anthropic, not '" << o.provider_dialect
              << "'\n";
    return kExitUsage;
  }
  // A thousand connections need a thousand descriptors: raise the soft limit to the hard.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  boost::asio::io_context io;
  auto store = fairlane::Store::open(o.db);
  if (!store.ok()) return fail(store.status().message());
  std::string admin_key;
  if (const char* key = std::getenv(o.admin_key_env.c_str()); key != nullptr) admin_key = key;

  fairlane::CurlProviderConfig client;
  client.base_url = o.provider_url;
  client.dialect = *dialect;
  client.api_key_env = o.api_key_env;
  client.max_connections = static_cast<std::size_t>(std::max<std::int64_t>(o.max_in_flight, 1));
  auto provider = fairlane::make_curl_provider(io, client);
  if (!provider.ok()) return fail(provider.status().message());

  fairlane::service::DispatcherConfig config;
  config.limits = {o.rpm, o.tpm, o.max_in_flight};
  config.prompt = o.prompt;
  config.model = o.model;
  config.max_attempts = o.max_attempts;
  config.backoff_base = std::chrono::duration_cast<fairlane::Clock::duration>(
      std::chrono::duration<double>(o.backoff_base));
  config.backoff_max = std::chrono::duration_cast<fairlane::Clock::duration>(
      std::chrono::duration<double>(o.backoff_max));
  config.door.max_wait_s = o.max_wait;
  config.door.max_queued_pages_per_user = o.max_queued_pages_per_user;
  fairlane::service::Dispatcher dispatcher(io, *store.value(), *provider.value(), config);
  if (const fairlane::Status started = dispatcher.start(); !started.ok()) {
    return fail(started.message());
  }
  fairlane::service::Router router(*store.value(), dispatcher,
                                   {admin_key, o.prompt, o.max_tokens, 10'000});
  fairlane::service::HttpLimits limits;
  limits.max_body_bytes = static_cast<std::size_t>(o.max_body_mb) * 1024 * 1024;
  limits.heartbeat = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(o.heartbeat));
  fairlane::service::HttpServer server(io, router, limits);
  auto bound = server.listen(o.listen.substr(0, colon), static_cast<std::uint16_t>(port));
  if (!bound.ok()) return fail(bound.status().message());

  int exit_status = kExitOk;
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& error, int) {
    if (error) return;
    std::cerr << "fairlane: stopping: no new work; calls in flight may finish\n";
    server.stop();
    const auto deadline = std::chrono::duration_cast<fairlane::Clock::duration>(
        std::chrono::duration<double>(o.stop_deadline));
    dispatcher.stop(deadline, [&](const fairlane::Status& status) {
      if (!status.ok()) {
        std::cerr << "fairlane: " << status.message() << '\n';
        exit_status = kExitFailure;
      }
      io.stop();
    });
  });
  std::cout << "listening on http://" << o.listen.substr(0, colon) << ':' << bound.value()
            << std::endl;
  io.run();
  return exit_status;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "fairlane: a fair work-queue dispatcher for batch document jobs.\n"
      "Pages wait in per-user lanes and are sent to a rate-limited AI provider in fair order,\n"
      "never beyond its requests per minute, tokens per minute or calls in flight.",
      "fairlane"};
  app.set_version_flag("--version", std::string("fairlane ") + fairlane::kVersion,
                       "Print the version and exit");
  app.set_config("--config", "", "Read options from a TOML file (flags win)");
  app.allow_config_extras(false);

  ServeOptions o;
  CLI::App* serve_command =
      app.add_subcommand("serve", "Run the service: the API and the dispatcher");
  serve_command->add_option("--listen", o.listen, "ADDRESS:PORT to listen on (port 0: any)")
      ->capture_default_str();
  serve_command->add_option("--db", o.db, "The SQLite database")->capture_default_str();
  serve_command
      ->add_option("--provider-url", o.provider_url, "The provider, e.g. https://api.openai.com")
      ->required();
  serve_command->add_option("--provider-dialect", o.provider_dialect, "openai or anthropic")
      ->capture_default_str();
  serve_command->add_option("--model", o.model, "The model to ask")->capture_default_str();
  serve_command->add_option("--api-key-env", o.api_key_env,
                            "The environment variable holding the provider's key");
  serve_command
      ->add_option("--admin-key-env", o.admin_key_env,
                   "The environment variable holding the admin key")
      ->capture_default_str();
  serve_command->add_option("--prompt", o.prompt, "The instruction sent with every page");
  serve_command->add_option("--rpm", o.rpm, "The provider's requests per minute (0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  serve_command->add_option("--tpm", o.tpm, "The provider's tokens per minute (0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  serve_command->add_option("--max-in-flight", o.max_in_flight, "Calls in flight at once (0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  serve_command->add_option("--max-tokens", o.max_tokens, "Output tokens asked per page")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve_command->add_option("--max-wait", o.max_wait, "Seconds of estimated wait the door accepts")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve_command->add_option("--max-attempts", o.max_attempts, "Failed attempts before a page fails")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve_command
      ->add_option("--max-queued-pages-per-user", o.max_queued_pages_per_user,
                   "Pages a user may have queued")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve_command->add_option("--max-body-mb", o.max_body_mb, "The largest upload, in MB")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve_command
      ->add_option("--backoff-base", o.backoff_base,
                   "Seconds of the first retry's backoff ceiling (full jitter, doubling)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve_command->add_option("--backoff-max", o.backoff_max, "Seconds a backoff never exceeds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve_command
      ->add_option("--stop-deadline", o.stop_deadline,
                   "Seconds calls in flight get to finish on SIGTERM")
      ->capture_default_str();
  serve_command
      ->add_option("--heartbeat", o.heartbeat,
                   "Seconds without an event before a live-events stream gets a heartbeat")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);

  std::string user_name;
  std::int64_t weight = 1;
  std::string user_db = "fairlane.db";
  CLI::App* user_command = app.add_subcommand("user", "Manage users");
  CLI::App* add_command =
      user_command->add_subcommand("add", "Add a user and print their API key (shown once)");
  add_command->add_option("name", user_name, "The user's name")->required();
  add_command->add_option("--weight", weight, "Fair-share weight, 1 to 1000")
      ->capture_default_str();
  add_command->add_option("--db", user_db, "The SQLite database")->capture_default_str();
  user_command->require_subcommand(1);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints help, the version, or what was wrong with the command line.
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  try {
    if (serve_command->parsed()) return serve(o);
    if (add_command->parsed()) {
      auto store = fairlane::Store::open(user_db);
      if (!store.ok()) return fail(store.status().message());
      auto added = store.value()->add_user(user_name, weight);
      if (!added.ok()) return fail(added.status().message());
      std::cout << added->key << '\n';
      return kExitOk;
    }
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  std::cout << app.help();
  return kExitOk;
}
