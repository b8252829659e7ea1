// fairlane-sim: runs scenarios (samples/scenarios/*.json) on virtual time against fairlane's
// real core and prints a Markdown report. Exit status 0 when every run kept the invariants,
// 1 when one broke them, 2 for a bad command line or scenario.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <exception>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "fairlane/version.hpp"
#include "report.hpp"
#include "scenario.hpp"
#include "simulation.hpp"

// An exception that reaches here is a bug; it is reported, not left to std::terminate.
int main(int argc, char** argv) try {
  CLI::App app{"fairlane-sim: fairlane's scheduler, budgets, estimator and door on virtual time.",
               "fairlane-sim"};
  app.set_version_flag("--version", std::string("fairlane-sim ") + fairlane::kVersion);
  std::vector<std::string> paths;
  std::string scheduler = "scenario";
  app.add_option("scenario", paths, "Scenario files (JSON)")->required()->check(CLI::ExistingFile);
  app.add_option("--scheduler", scheduler, "fair, fifo, both, or scenario (what the file says)")
      ->check(CLI::IsMember({"fair", "fifo", "both", "scenario"}));
  bool ignore_promises = false;
  app.add_flag("--ignore-promises", ignore_promises,
               "Plain deficit round robin: no job goes first when its promise is at risk");
  std::optional<double> promise_window;
  app.add_option("--promise-window", promise_window,
                 "Seconds a promise waits for the uploads that come with it (PromiseWindow)")
      ->check(CLI::Range(0.0, 60.0));
  std::string books_path;
  app.add_option("--books", books_path,
                 "Write every accepted book (run, user, arrival, pages, promised, taken, ideal) "
                 "to this CSV file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  std::ofstream books_csv;
  if (!books_path.empty()) {
    books_csv.open(books_path);
    if (!books_csv) {
      std::cerr << "fairlane-sim: cannot write " << books_path << '\n';
      return 2;
    }
    books_csv << fairlane::sim::books_csv_header();
  }
  bool all_hold = true;
  for (const std::string& path : paths) {
    auto scenario = fairlane::sim::load_scenario(path);
    if (!scenario.ok()) {
      std::cerr << "fairlane-sim: " << scenario.status().message() << '\n';
      return 2;
    }
    using fairlane::sim::SchedulerKind;
    if (scheduler == "fair") scenario->schedulers = {SchedulerKind::fair};
    if (scheduler == "fifo") scenario->schedulers = {SchedulerKind::fifo};
    if (scheduler == "both") scenario->schedulers = {SchedulerKind::fair, SchedulerKind::fifo};
    if (ignore_promises) scenario->fairlane.keep_promises = false;
    if (promise_window) scenario->fairlane.promise_window_s = *promise_window;
    std::vector<fairlane::sim::Metrics> runs;
    try {
      for (const SchedulerKind kind : scenario->schedulers) {
        runs.push_back(fairlane::sim::simulate(scenario.value(), kind));
        if (books_csv.is_open())
          books_csv << fairlane::sim::books_csv(scenario.value(), runs.back());
        all_hold = all_hold && fairlane::sim::invariants_hold(runs.back());
      }
    } catch (const std::exception& e) {
      std::cerr << "fairlane-sim: " << path << ": " << e.what() << '\n';
      return 1;
    }
    std::cout << fairlane::sim::markdown_report(scenario.value(), runs);
  }
  return all_hold ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << "fairlane-sim: internal error: " << e.what() << '\n';
  return 1;
}
