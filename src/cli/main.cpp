// The `fairlane` command: `fairlane serve` runs the service; `fairlane user add` adds a user
// to a database and prints their key; enqueue, watch, status, result, cancel and estimate
// talk to a running service over HTTP (src/cli/commands). Every flag can also come from a
// TOML file given with --config; for --server and --key the order is flags, then the
// environment (FAIRLANE_URL, FAIRLANE_KEY), then the file.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.hpp"
#include "cli/serve.hpp"
#include "fairlane/pdf_reader.hpp"
#include "fairlane/store.hpp"
#include "fairlane/version.hpp"

namespace {

using fairlane::cli::kExitFailure;
using fairlane::cli::kExitOk;
using fairlane::cli::kExitUsage;

int fail(const std::string& message) {
  std::cerr << "fairlane: " << message << '\n';
  return kExitFailure;
}

// Whether `flag` ("--server") is on the command line itself, as "--server X" or
// "--server=X": then it wins over the environment, which wins over the config file.
bool on_command_line(int argc, char** argv, std::string_view flag) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (arg == "--") return false;
    if (arg == flag || (arg.size() > flag.size() && arg.substr(0, flag.size()) == flag &&
                        arg[flag.size()] == '=')) {
      return true;
    }
  }
  return false;
}

// The arguments with "--config FILE" moved to the front. CLI11 applies a config file's
// [serve] and [user.add] sections only when --config comes before the subcommand; people
// write it anywhere.
std::vector<std::string> config_first(int argc, char** argv) {
  std::vector<std::string> config;
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (arg == "--") {
      for (; i < argc; ++i) rest.emplace_back(argv[i]);
      break;
    }
    if (arg == "--config" && i + 1 < argc) {
      config = {std::string(arg), argv[++i]};
    } else if (arg.rfind("--config=", 0) == 0) {
      config = {std::string(arg)};
    } else {
      rest.emplace_back(arg);
    }
  }
  std::vector<std::string> args{argc > 0 ? argv[0] : "fairlane"};
  args.insert(args.end(), config.begin(), config.end());
  args.insert(args.end(), rest.begin(), rest.end());
  return args;
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

  fairlane::cli::ServeOptions o;
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
      ->add_option("--max-header-kb", o.max_header_kb,
                   "The largest request headers, in KB; larger: 431")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  serve_command->add_option("--max-pages", o.max_pages, "Pages in one upload; more: 413")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  serve_command
      ->add_option("--max-page-kb", o.max_page_kb,
                   "Text in one page (JSON, or a PDF's), in KB; more: 413")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  serve_command
      ->add_option("--max-connections", o.max_connections,
                   "Connections open at once; more get 503 and are closed at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  serve_command
      ->add_option("--read-timeout", o.read_timeout,
                   "Seconds a whole request (headers and body) may take to arrive")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86'400.0));
  serve_command
      ->add_option("--backoff-base", o.backoff_base,
                   "Seconds of the first retry's backoff ceiling (full jitter, doubling)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve_command->add_option("--backoff-max", o.backoff_max, "Seconds a backoff never exceeds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve_command
      ->add_option("--call-timeout", o.call_timeout,
                   "Seconds a provider call may take before it is given up and retried")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 3600.0));
  serve_command
      ->add_option("--stop-deadline", o.stop_deadline,
                   "Seconds calls in flight get to finish on SIGTERM")
      ->capture_default_str();
  serve_command
      ->add_option("--price-per-mtok", o.price_per_mtok,
                   "The provider's USD per million tokens, for jobs' cost (0: not shown)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  serve_command
      ->add_option("--pdf-timeout", o.pdf_timeout,
                   "Seconds (of time and of CPU) reading one uploaded PDF may take")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  serve_command
      ->add_option("--pdf-memory-mb", o.pdf_memory_mb, "Memory reading one uploaded PDF may use")
      ->capture_default_str()
      ->check(CLI::Range(64, 1'000'000));
  serve_command
      ->add_option("--heartbeat", o.heartbeat,
                   "Seconds without an event before a live-events stream gets a heartbeat")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));

  // `fairlane read-pdf`: the child process serve reads an uploaded PDF in (not for people,
  // so not in --help): the PDF on stdin, its pages on stdout.
  std::int64_t reader_cpu_seconds = 60;
  std::int64_t reader_memory_mb = 2048;
  std::int64_t reader_max_pages = 10'000;
  CLI::App* read_pdf_command = app.add_subcommand("read-pdf", "");
  read_pdf_command->group("");
  read_pdf_command->add_option("--cpu-seconds", reader_cpu_seconds);
  read_pdf_command->add_option("--memory-mb", reader_memory_mb);
  read_pdf_command->add_option("--max-pages", reader_max_pages);

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

  // The client commands: --server and --key are the app's, so that a config file holds them
  // once, and may follow the command's name.
  app.fallthrough();
  std::string server = "http://127.0.0.1:8080";
  std::string key;
  app.add_option("--server", server, "The service's URL (env FAIRLANE_URL)")->capture_default_str();
  app.add_option("--key", key, "Your API key (env FAIRLANE_KEY)");

  fairlane::cli::EnqueueOptions enqueue_options;
  bool watch_after = false;
  CLI::App* enqueue_command =
      app.add_subcommand("enqueue", "Upload PDFs (or pages as JSON); prints the door's answer");
  enqueue_command->add_option("files", enqueue_options.files, "The PDFs")->check(CLI::ExistingFile);
  enqueue_command
      ->add_option("--pages-json", enqueue_options.pages_json,
                   "A JSON file {\"name\": ..., \"pages\": [\"text\", ...]} instead of PDFs")
      ->check(CLI::ExistingFile);
  enqueue_command->add_option("--name", enqueue_options.name,
                              "The job's name (one upload; default the file's name)");
  enqueue_command
      ->add_option("--max-tokens", enqueue_options.max_tokens,
                   "Output tokens asked per page (default the service's)")
      ->check(CLI::Range(1, 1'000'000));
  enqueue_command->add_option("--idempotency-key", enqueue_options.idempotency_key,
                              "Makes a retried upload return the first job");
  enqueue_command->add_flag("--watch", watch_after, "Follow the jobs until they end");

  std::vector<std::string> watch_jobs;
  CLI::App* watch_command =
      app.add_subcommand("watch", "Live progress of jobs until they end, then a summary");
  watch_command->add_option("jobs", watch_jobs, "Job ids")->required();

  CLI::App* status_command =
      app.add_subcommand("status", "The service's queue and your jobs (the admin: the queue)");

  std::string result_job;
  std::optional<std::string> result_file;
  bool result_json = false;
  CLI::App* result_command = app.add_subcommand("result", "A job's pages, as Markdown (or --json)");
  result_command->add_option("job", result_job, "The job id")->required();
  result_command->add_option("-o,--output", result_file, "Write to this file, not stdout");
  result_command->add_flag("--json", result_json, "The service's JSON as it is");

  std::string cancel_job;
  CLI::App* cancel_command =
      app.add_subcommand("cancel", "Cancel a job's queued pages (calls in flight finish)");
  cancel_command->add_option("job", cancel_job, "The job id")->required();

  std::int64_t estimate_pages = 0;
  std::optional<std::int64_t> tokens_per_page;
  CLI::App* estimate_command =
      app.add_subcommand("estimate", "What the door would say to an upload now");
  estimate_command->add_option("--pages", estimate_pages, "Pages in the upload")
      ->required()
      ->check(CLI::PositiveNumber);
  estimate_command->add_option("--tokens-per-page", tokens_per_page,
                               "Tokens one page reserves, input and output");

  try {
    std::vector<std::string> args = config_first(argc, argv);
    std::vector<char*> pointers;
    for (std::string& arg : args) pointers.push_back(arg.data());
    app.parse(static_cast<int>(pointers.size()), pointers.data());
  } catch (const CLI::ParseError& e) {
    // CLI11 prints help, the version, or what was wrong with the command line.
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  try {
    if (serve_command->parsed()) return fairlane::cli::serve(o);
    if (read_pdf_command->parsed()) {
      return fairlane::read_pdf_child(std::cin, std::cout, reader_cpu_seconds, reader_memory_mb,
                                      reader_max_pages);
    }
    if (add_command->parsed()) {
      auto store = fairlane::Store::open(user_db);
      if (!store.ok()) return fail(store.status().message());
      auto added = store.value()->add_user(user_name, weight);
      if (!added.ok()) return fail(added.status().message());
      std::cout << added->key << '\n';
      return kExitOk;
    }
    if (!on_command_line(argc, argv, "--server")) {
      if (const char* env = std::getenv("FAIRLANE_URL"); env != nullptr && *env != '\0')
        server = env;
    }
    if (!on_command_line(argc, argv, "--key")) {
      if (const char* env = std::getenv("FAIRLANE_KEY"); env != nullptr && *env != '\0') key = env;
    }
    const fairlane::cli::Output output{std::cout, std::cerr, isatty(STDOUT_FILENO) == 1};
    const bool client = enqueue_command->parsed() || watch_command->parsed() ||
                        status_command->parsed() || result_command->parsed() ||
                        cancel_command->parsed() || estimate_command->parsed();
    if (client && key.empty()) {
      std::cerr << "fairlane: this needs your API key: pass --key KEY or set FAIRLANE_KEY "
                   "(`fairlane user add NAME` makes one)\n";
      return fairlane::cli::kExitUnauthorized;
    }
    fairlane::cli::HttpClient http(server, key);
    if (enqueue_command->parsed()) {
      std::vector<std::string> accepted;
      const int code = fairlane::cli::enqueue(http, enqueue_options, output, accepted);
      if (!watch_after || accepted.empty()) return code;
      const int watched = fairlane::cli::watch(http, accepted, output);
      return code != kExitOk ? code : watched;
    }
    if (watch_command->parsed()) return fairlane::cli::watch(http, watch_jobs, output);
    if (status_command->parsed()) return fairlane::cli::status(http, output);
    if (result_command->parsed()) {
      return fairlane::cli::result(http, result_job, result_file, result_json, output);
    }
    if (cancel_command->parsed()) return fairlane::cli::cancel(http, cancel_job, output);
    if (estimate_command->parsed()) {
      return fairlane::cli::estimate(http, estimate_pages, tokens_per_page, output);
    }
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  std::cout << app.help();
  return kExitOk;
}
