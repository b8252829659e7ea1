#include "cli/app.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>

#include "fairlane/version.hpp"

namespace fairlane::cli {
namespace {

// Refuses an empty value: `--db ""`, or `db = ` in a config file (a comment after the `=`
// too), would have SQLite open a private temporary database that vanishes at exit, and an
// empty provider or address fails far from its cause. (No description: help stays as is.)
CLI::Validator not_empty() {
  return CLI::Validator(
      [](const std::string& value) {
        return value.empty() ? std::string("must not be empty") : std::string();
      },
      "", "not empty");
}

// The whole of `text` as a finite number, or nullopt: not a number, past double's range,
// NaN or infinite.
std::optional<double> finite_number(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double number = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(number)) {
    return std::nullopt;
  }
  return number;
}

// A number from `min` to `max`, finite: CLI11's own range checks compare, and NaN compares
// false, so `--max-wait nan` passed and made the door accept everything; and an integer past
// int64 was read as INT64_MAX. Checked on the text, before it is converted, for integer
// options too. (No description: help stays as is.)
CLI::Validator within(double min, double max) {
  return CLI::Validator(
      [min, max](const std::string& value) {
        const auto number = finite_number(value);
        if (!number) return fmt::format("'{}' is not a number", value);
        if (*number < min || *number > max) return fmt::format("must be from {} to {}", min, max);
        return std::string();
      },
      "", "within");
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

// A length of time as a number and a unit, "30d", "12h", "90m" or "45s" (seconds without
// one), in seconds.
CLI::AsNumberWithUnit duration() {
  return CLI::AsNumberWithUnit(
      std::map<std::string, double>{{"s", 1.0}, {"m", 60.0}, {"h", 3'600.0}, {"d", 86'400.0}},
      CLI::AsNumberWithUnit::CASE_SENSITIVE, "DURATION");
}

// A retention: 0 (`allow_zero`: keep everything) or from kMinRetention to kMaxRetention.
CLI::Validator retention(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](const std::string& value) {
        // The text as AsNumberWithUnit left it: seconds, or what it could not read.
        const auto number = finite_number(value);
        if (!number) return fmt::format("'{}' is not a length of time such as 30d or 12h", value);
        const double seconds = *number;
        if (allow_zero && seconds == 0.0) return std::string();
        if (seconds > std::chrono::duration<double>(kMaxRetention).count()) {
          return std::string("must be at most 36500d (100 years)") +
                 (allow_zero ? "; 0 keeps every job" : "");
        }
        if (seconds >= std::chrono::duration<double>(kMinRetention).count()) return std::string();
        return std::string(
                   "must be at least 1h: a finished job's spend counts for an hour, and its owner "
                   "needs the time to fetch its result") +
               (allow_zero ? " (0 keeps every job)" : "");
      },
      "", "retention");
}

}  // namespace

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

CommandLine::CommandLine()
    : app("fairlane: a fair work-queue dispatcher for batch document jobs.\n"
          "Pages wait in per-user lanes and are sent to a rate-limited AI provider in fair "
          "order,\n"
          "never beyond its requests per minute, tokens per minute or calls in flight.",
          "fairlane") {
  app.set_version_flag("--version", std::string("fairlane ") + kVersion,
                       "Print the version and exit");
  app.set_config("--config", "", "Read options from a TOML file (flags win)");
  app.allow_config_extras(false);

  serve_command = app.add_subcommand("serve", "Run the service: the API and the dispatcher");
  serve_command
      ->add_option("--listen", serve.listen,
                   "IP:PORT to listen on, such as 127.0.0.1:8080 or [::1]:8080 (port 0: any)")
      ->capture_default_str()
      ->check(not_empty());
  serve_command
      ->add_option("--db", serve.db,
                   "The SQLite database, or a postgresql:// URI (a cluster's shared database)")
      ->capture_default_str()
      ->check(not_empty());
  serve_command
      ->add_option("--provider-url", serve.provider_url,
                   "The provider, e.g. https://api.openai.com")
      ->required()
      ->check(not_empty());
  serve_command->add_option("--provider-dialect", serve.provider_dialect, "openai or anthropic")
      ->capture_default_str();
  serve_command->add_option("--model", serve.model, "The model to ask")
      ->capture_default_str()
      ->check(not_empty());
  serve_command->add_option("--api-key-env", serve.api_key_env,
                            "The environment variable holding the provider's key");
  serve_command
      ->add_option("--admin-key-env", serve.admin_key_env,
                   "The environment variable holding the admin key")
      ->capture_default_str();
  serve_command->add_option("--prompt", serve.prompt, "The instruction sent with every page");
  serve_command->add_option("--rpm", serve.rpm, "The provider's requests per minute (0: none)")
      ->capture_default_str()
      ->check(within(0, 1e12));
  serve_command->add_option("--tpm", serve.tpm, "The provider's tokens per minute (0: none)")
      ->capture_default_str()
      ->check(within(0, 1e12));
  serve_command
      ->add_option("--max-in-flight", serve.max_in_flight, "Calls in flight at once (0: none)")
      ->capture_default_str()
      ->check(within(0, 1e6));
  serve_command->add_option("--max-tokens", serve.max_tokens, "Output tokens asked per page")
      ->capture_default_str()
      ->check(within(1, 1e7));
  serve_command
      ->add_option("--max-wait", serve.max_wait,
                   "Seconds the door lets the queue add to a job's own time")
      ->capture_default_str()
      ->check(within(0.001, 1e7));
  serve_command
      ->add_option("--max-job-seconds", serve.max_job_seconds,
                   "Seconds a job may take alone at the provider's limits (0: no limit); "
                   "longer ones are refused 422 job_too_large")
      ->capture_default_str()
      ->check(within(0, 1e7));
  serve_command
      ->add_option("--promise-window", serve.promise_window,
                   "Seconds an accepted upload's promise waits for the uploads that come with "
                   "it, before its 202 (0: promised at once)")
      ->capture_default_str()
      ->check(within(0, 10));
  serve_command
      ->add_option("--order", serve.order,
                   "promises: fair order, but a job whose promise is at risk takes the turns of "
                   "work newer than its promise; fair: plain fair order, every backlogged user "
                   "an equal share at all times, promises only revised")
      ->capture_default_str()
      ->check(CLI::IsMember({"promises", "fair"}));
  serve_command
      ->add_option("--max-attempts", serve.max_attempts, "Failed attempts before a page fails")
      ->capture_default_str()
      ->check(within(1, 1000));
  serve_command
      ->add_option("--max-queued-pages-per-user", serve.max_queued_pages_per_user,
                   "Pages a user may have queued")
      ->capture_default_str()
      ->check(within(1, 1e9));
  serve_command->add_option("--max-body-mb", serve.max_body_mb, "The largest upload, in MB")
      ->capture_default_str()
      ->check(within(1, 1e6));
  serve_command
      ->add_option("--max-receiving-mb", serve.max_receiving_mb,
                   "Upload bodies on their way at once, in MB (one user's: half; at least "
                   "--max-body-mb); more: 503 busy from the headers")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  serve_command
      ->add_option("--max-header-kb", serve.max_header_kb,
                   "The largest request headers (or chunk header, or trailer), in KB; "
                   "larger: 431")
      ->capture_default_str()
      ->check(CLI::Range(1, 63));
  serve_command->add_option("--max-pages", serve.max_pages, "Pages in one upload; more: 413")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  serve_command
      ->add_option("--max-page-kb", serve.max_page_kb,
                   "Text in one page (JSON, or a PDF's), in KB; more: 413")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  serve_command
      ->add_option("--max-connections", serve.max_connections,
                   "Connections open at once; more get 503 and are closed at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  serve_command
      ->add_option("--read-timeout", serve.read_timeout,
                   "Seconds a whole request (headers and body) may take to arrive")
      ->capture_default_str()
      ->check(within(1, 86400));
  serve_command
      ->add_option("--write-timeout", serve.write_timeout,
                   "Seconds a client may take none of an answer before it is given up")
      ->capture_default_str()
      ->check(within(1, 86400));
  serve_command
      ->add_option("--backoff-base", serve.backoff_base,
                   "Seconds of the first retry's backoff ceiling (full jitter, doubling)")
      ->capture_default_str()
      ->check(within(0.001, 86400));
  serve_command->add_option("--backoff-max", serve.backoff_max, "Seconds a backoff never exceeds")
      ->capture_default_str()
      ->check(within(0.001, 86400));
  serve_command
      ->add_option("--call-timeout", serve.call_timeout,
                   "Seconds a provider call may take before it is given up and retried")
      ->capture_default_str()
      ->check(within(0.01, 3600));
  serve_command->add_option("--instance", serve.instance,
                            "This instance's id in a cluster (default: host name and process id)");
  serve_command
      ->add_option("--lease-s", serve.lease_s,
                   "Seconds within which a follower takes over from a dead leader (a cluster's)")
      ->capture_default_str()
      ->check(within(0.5, 600));
  serve_command
      ->add_option("--db-readers", serve.db_readers,
                   "Connections that read job views, results and live events, and commit "
                   "uploads, off the io thread (PostgreSQL's; 0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  serve_command
      ->add_option("--stop-deadline", serve.stop_deadline,
                   "Seconds calls in flight get to finish on SIGTERM")
      ->capture_default_str()
      ->check(within(0, 3600));
  serve_command
      ->add_option("--price-per-mtok", serve.price_per_mtok,
                   "The provider's USD per million tokens, for jobs' cost (0: not shown)")
      ->capture_default_str()
      ->check(within(0, 1e6));
  serve_command
      ->add_option("--pdf-timeout", serve.pdf_timeout,
                   "Seconds (of time and of CPU) reading one uploaded PDF may take")
      ->capture_default_str()
      ->check(within(1, 3600));
  serve_command
      ->add_option("--pdf-memory-mb", serve.pdf_memory_mb,
                   "Memory reading one uploaded PDF may use")
      ->capture_default_str()
      ->check(CLI::Range(64, 1'000'000));
  serve_command
      ->add_option("--page-input", serve.page_input,
                   "How a PDF's pages go to the provider: auto (a page with a text layer as "
                   "text, one without as an image), text, or image (every page)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "text", "image"}));
  serve_command
      ->add_option("--render-dpi", serve.render_dpi,
                   "Resolution of the pages sent as images (the long edge stays within "
                   "1568 px)")
      ->capture_default_str()
      ->check(within(36, 600));
  serve_command
      ->add_option("--heartbeat", serve.heartbeat,
                   "Seconds without an event before a live-events stream gets a heartbeat")
      ->capture_default_str()
      ->check(within(0.1, 3600));

  serve_command
      ->add_option("--retain", serve.retain,
                   "Prune the jobs that finished longer ago than this, such as 30d or 12h, "
                   "with their pages and results (0: keep every job)")
      ->transform(duration())
      ->check(retention(true))
      ->type_name("DURATION")
      ->capture_default_str();

  // `fairlane read-pdf`: the child process serve reads an uploaded PDF in (not for people,
  // so not in --help): the PDF on stdin, its pages on stdout.
  read_pdf_command = app.add_subcommand("read-pdf", "");
  read_pdf_command->group("");
  read_pdf_command->add_option("--cpu-seconds", reader_cpu_seconds);
  read_pdf_command->add_option("--memory-mb", reader_memory_mb);
  read_pdf_command->add_option("--max-pages", reader_max_pages);
  read_pdf_command->add_option("--max-page-bytes", reader_max_page_bytes);
  read_pdf_command->add_option("--max-image-bytes", reader_max_image_bytes);
  read_pdf_command->add_option("--page-input", reader_page_input)
      ->check(CLI::IsMember({"auto", "text", "image"}));
  read_pdf_command->add_option("--dpi", reader_dpi)->check(CLI::Range(36.0, 600.0));

  CLI::App* user_command = app.add_subcommand("user", "Manage users");
  user_add_command =
      user_command->add_subcommand("add", "Add a user and print their API key (shown once)");
  user_add_command->add_option("name", user_name, "The user's name")->required();
  user_add_command->add_option("--weight", weight, "Fair-share weight, 1 to 1000")
      ->capture_default_str();
  user_add_command->add_option("--db", user_db, "The SQLite database, or a postgresql:// URI")
      ->capture_default_str()
      ->check(not_empty());
  user_command->require_subcommand(1);

  prune_command = app.add_subcommand(
      "prune", "Delete the jobs that finished long ago, with their pages and results");
  prune_command->add_option("--db", prune.db, "The SQLite database, or a postgresql:// URI")
      ->capture_default_str()
      ->check(not_empty());
  prune_command
      ->add_option("--older-than", prune.older_than_s,
                   "Prune the jobs that finished longer ago than this, such as 30d (at least 1h)")
      ->required()
      ->transform(duration())
      ->check(retention(false))
      ->type_name("DURATION");
  prune_command->add_flag("--dry-run", prune.dry_run,
                          "Count the jobs and pages that would go, and delete nothing");

  // The client commands: --server and --key are the app's, so that a config file holds them
  // once, and may follow the command's name.
  app.fallthrough();
  app.add_option("--server", server, "The service's URL (env FAIRLANE_URL)")->capture_default_str();
  app.add_option("--key", key, "Your API key (env FAIRLANE_KEY)");

  enqueue_command =
      app.add_subcommand("enqueue", "Upload PDFs (or pages as JSON); prints the door's answer");
  enqueue_command->add_option("files", enqueue.files, "The PDFs")->check(CLI::ExistingFile);
  enqueue_command
      ->add_option("--pages-json", enqueue.pages_json,
                   R"(A JSON file {"name": ..., "pages": ["text", ...]} instead of PDFs)")
      ->check(CLI::ExistingFile);
  enqueue_command->add_option("--name", enqueue.name,
                              "The job's name (one upload; default the file's name)");
  enqueue_command
      ->add_option("--max-tokens", enqueue.max_tokens,
                   "Output tokens asked per page (default the service's)")
      ->check(CLI::Range(1, 1'000'000));
  enqueue_command->add_option(
      "--idempotency-key", enqueue.idempotency_key,
      "Makes a retried upload return the first job (1 to 255 bytes of UTF-8 text)");
  enqueue_command->add_flag("--watch", watch_after, "Follow the jobs until they end");

  watch_command =
      app.add_subcommand("watch", "Live progress of jobs until they end, then a summary");
  watch_command->add_option("jobs", watch_jobs, "Job ids")->required();

  status_command =
      app.add_subcommand("status", "The service's queue and your jobs (the admin: the queue)");

  result_command = app.add_subcommand("result", "A job's pages, as Markdown (or --json)");
  result_command->add_option("job", result_job, "The job id")->required();
  result_command->add_option("-o,--output", result_file, "Write to this file, not stdout");
  result_command->add_flag("--json", result_json, "The service's JSON as it is");

  cancel_command =
      app.add_subcommand("cancel", "Cancel a job's queued pages (calls in flight finish)");
  cancel_command->add_option("job", cancel_job, "The job id")->required();

  estimate_command = app.add_subcommand("estimate", "What the door would say to an upload now");
  estimate_command->add_option("--pages", estimate_pages, "Pages in the upload")
      ->required()
      ->check(CLI::PositiveNumber);
  estimate_command->add_option("--tokens-per-page", tokens_per_page,
                               "Tokens one page reserves, input and output");
}

void CommandLine::parse(int argc, char** argv) {
  std::vector<std::string> args = config_first(argc, argv);
  std::vector<char*> pointers;
  pointers.reserve(args.size());
  for (std::string& arg : args) pointers.push_back(arg.data());
  app.parse(static_cast<int>(pointers.size()), pointers.data());
}

}  // namespace fairlane::cli
