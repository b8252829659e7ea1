// fairlane-crashtest: SIGKILLs `fairlane serve` at random moments of a workload of several
// users and books, restarts it on the same database until everything has ended, and checks
// that nothing accepted was lost or duplicated (docs/reliability.md, "Crash tests").
// Exits 0 only when every check holds.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <system_error>

#include "crashtest.hpp"
#include "fairlane/version.hpp"

// An exception that reaches here is a bug; it is reported, not left to std::terminate.
int main(int argc, char** argv) try {
  CLI::App app{
      "fairlane-crashtest: users upload books to `fairlane serve` while it drains them to a\n"
      "provider stand-in (in this process, without faults); serve is SIGKILLed at random\n"
      "moments (during uploads, dispatch and completion) and restarted on the same database\n"
      "until everything has ended. Then: every page of every upload answered 202 is done\n"
      "exactly once; no job is partial; the stand-in saw at most one extra call per page per\n"
      "kill that found it in flight; the database's integrity check passed after every kill\n"
      "(SQLite's PRAGMA integrity_check; on PostgreSQL, every job's counters against its\n"
      "pages' states).",
      "fairlane-crashtest"};
  app.set_version_flag("--version", std::string("fairlane-crashtest ") + fairlane::kVersion);
  fairlane::crashtest::Config config;
  std::string report;
  app.add_option("--fairlane", config.fairlane, "The fairlane binary")->required();
  app.add_option("--seed", config.seed, "Seed of the kills' moments and the uploads' choices")
      ->capture_default_str();
  app.add_option("--kills", config.kills, "SIGKILLs of fairlane serve")
      ->capture_default_str()
      ->check(CLI::Range(1, 10'000));
  app.add_option("--users", config.users, "Users uploading at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000));
  app.add_option("--books", config.books, "Books per user")
      ->capture_default_str()
      ->check(CLI::Range(1, 10'000));
  app.add_option("--pages", config.pages, "Pages per book")
      ->capture_default_str()
      ->check(CLI::Range(1, 10'000));
  app.add_option("--pdf-every", config.pdf_every,
                 "Every Nth book of a user is sent as a PDF (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 10'000));
  app.add_option("--abandon", config.abandon,
                 "Share of uploads cut by a kill that are never sent again")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--max-in-flight", config.max_in_flight, "fairlane serve's --max-in-flight")
      ->capture_default_str()
      ->check(CLI::Range(1, 10'000));
  app.add_option("--latency-ms", config.latency_ms, "The stand-in's time to answer a call")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 60'000.0));
  app.add_option("--kill-gap", config.kill_gap_s,
                 "Mean seconds from a start of serve to the next kill's aim")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 3'600.0));
  app.add_option("--upload-gap", config.upload_gap_s, "Mean seconds between a user's books")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3'600.0));
  app.add_option("--deadline", config.deadline_s, "Seconds the whole run may take")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86'400.0));
  app.add_option("--db", config.db,
                 "The database serve runs on and the checks read: a postgresql:// URI of an "
                 "empty database, or a SQLite file (default: one in the work folder)");
  app.add_option("--lease-s", config.lease_s,
                 "On PostgreSQL, serve's --lease-s: a restarted serve leads once the killed "
                 "one's lease has run out")
      ->capture_default_str()
      ->check(CLI::Range(0.5, 600.0));
  app.add_option("--call-timeout", config.call_timeout_s,
                 "serve's --call-timeout (default: serve's own). It also bounds how long a "
                 "restarted serve holds places under the cap for the killed one's calls when "
                 "no call has ended yet")
      ->check(CLI::Range(0.0, 3'600.0));
  app.add_option("--work-dir", config.work_dir,
                 "Folder for the database and serve.log (default: a temporary one, removed "
                 "when every check holds)");
  app.add_flag("--require-landings", config.require_landings,
               "Fail unless kills landed during uploads, dispatch and completion, each at least "
               "once");
  app.add_flag("--keep", config.keep, "Keep the temporary folder even when every check holds");
  app.add_option("--report", report, "Also write the summary as Markdown to this file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  fairlane::crashtest::Summary summary;
  try {
    summary = fairlane::crashtest::run(config);
  } catch (const std::exception& e) {  // an answer of the service that is not what the API says
    std::cerr << "fairlane-crashtest: " << e.what() << '\n';
    return 1;
  }
  std::cout << fairlane::crashtest::summary_text(config, summary) << std::flush;
  if (!report.empty()) {
    std::string command = "fairlane-crashtest";
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      command += ' ';
      command += arg.find_first_of(" '\"$") == std::string::npos ? arg : "'" + arg + "'";
    }
    const auto parent = std::filesystem::path(report).parent_path();
    std::error_code ignored;
    if (!parent.empty()) std::filesystem::create_directories(parent, ignored);
    std::ofstream out(report);
    out << fairlane::crashtest::summary_markdown(config, summary, command);
    // Closed before it is checked: a report smaller than the stream's buffer is written only
    // then, and a full disk would otherwise pass unseen.
    out.close();
    if (out.fail()) {
      std::cerr << "fairlane-crashtest: could not write " << report << ": "
                << std::generic_category().message(errno) << '\n';
      return 1;
    }
  }
  return summary.ok() ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << "fairlane-crashtest: internal error: " << e.what() << '\n';
  return 1;
}
