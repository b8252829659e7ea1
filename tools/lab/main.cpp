// fairlane-lab: runs the lab's cases (docs/lab.md) and writes the report.
//
//   fairlane-lab [--fairlane build/release/src/cli/fairlane] [--case 2 --case 4] [--time-scale 10]
//                [--max-users 12] [--pages 100] [--out lab-report]
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "fairlane/version.hpp"
#include "lab.hpp"

// An exception that reaches here is a bug; it is reported, not left to std::terminate.
int main(int argc, char** argv) try {
  CLI::App app{
      "fairlane-lab: the five ways of sending book pages to a rate-limited provider, "
      "on a ramp of users, against the provider stand-in on loopback",
      "fairlane-lab"};
  app.set_version_flag("--version", std::string("fairlane-lab ") + fairlane::kVersion);
  fairlane::lab::LabConfig config;
  std::vector<int> cases;
  int max_users = 0;
  std::string out = "lab-report";
  app.add_option("--case", cases, "The cases to run, 1 to 5 (repeatable; default all)")
      ->check(CLI::Range(1, 5));
  app.add_option("--fairlane", config.fairlane_binary,
                 "The fairlane binary (case 4); without it, the one beside fairlane-lab, in its "
                 "build tree (BUILD/src/cli/fairlane) or on PATH");
  app.add_option("--time-scale", config.time_scale,
                 "Multiplies every limit by K and divides every duration by K")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1000.0));
  app.add_option("--max-users", max_users, "Stop the ramp at this many users (0: all 80)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--pages", config.pages_per_book, "Pages in each book")
      ->capture_default_str()
      ->check(CLI::Range(1, 10'000));
  app.add_option("--max-wait", config.max_wait_s, "fairlane's --max-wait, in real-world seconds")
      ->capture_default_str();
  app.add_option("--deadline", config.case_deadline_s,
                 "Cut a case short after this many real-world seconds")
      ->capture_default_str();
  bool one_by_one = false;
  app.add_flag("--one-by-one", one_by_one,
               "Case 4: a step's users upload one after another, each waiting for the previous "
               "answer (default: at once, each on a connection of its own)");
  app.add_option("--out", out, "Folder for report.md and chart.svg")->capture_default_str();
  bool check = false;
  app.add_flag("--check", check,
               "Exit 1 unless fairlane (case 4) accepted a book, had no provider 429 or 503 "
               "and every book it accepted came out whole, and all pages at once (case 2) lost "
               "pages");
  CLI11_PARSE(app, argc, argv);
  config.uploads_together = !one_by_one;

  if (max_users > 0) {
    std::vector<int> ramp;
    for (int users : config.ramp) {
      if (users >= max_users) {
        ramp.push_back(max_users);
        break;
      }
      ramp.push_back(users);
    }
    config.ramp = ramp;
  }
  if (cases.empty()) cases = {1, 2, 3, 4, 5};
  // The report's folder, made before the cases run (minutes): a bad --out is said at once.
  if (std::error_code error; !std::filesystem::create_directories(out, error) && error) {
    std::cerr << "fairlane-lab: cannot make the folder " << out << " for the report ("
              << error.message() << "): pass another --out\n";
    return 1;
  }
  // Case 2 opens a connection per page: thousands of descriptors.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  std::vector<fairlane::lab::CaseResult> results;
  for (const int c : cases) {
    const auto which = static_cast<fairlane::lab::Case>(c);
    std::cerr << "fairlane-lab: running " << fairlane::lab::case_name(which) << std::endl;
    results.push_back(fairlane::lab::run_case(which, config));
  }
  const std::string report = fairlane::lab::markdown(results, config);
  std::cout << report;
  int status = 0;
  // Each file checked once closed: a full disk shows only when the data is flushed.
  const auto write = [&status](const std::filesystem::path& file, const std::string& text) {
    std::ofstream stream(file, std::ios::binary);
    stream << text;
    stream.close();
    if (stream.fail()) {
      std::cerr << "fairlane-lab: cannot write " << file.string()
                << ": check that its folder is writable and the disk has room\n";
      status = 1;
      return false;
    }
    return true;
  };
  const bool wrote_report = write(std::filesystem::path(out) / "report.md", report);
  const bool wrote_chart =
      write(std::filesystem::path(out) / "chart.svg", fairlane::lab::svg_chart(results, config));
  if (wrote_report && wrote_chart) {
    std::cerr << "fairlane-lab: wrote " << out << "/report.md and " << out << "/chart.svg\n";
  }
  for (const auto& r : results) {
    if (!r.error.empty()) status = 1;
    if (!check || !r.error.empty()) continue;
    if (r.which == fairlane::lab::Case::fairlane) {
      const bool whole = std::all_of(r.books.begin(), r.books.end(), [](const auto& book) {
        return book.refused() || book.not_uploaded() || book.clean();
      });
      if (r.provider_429 != 0 || r.provider_503 != 0 || !whole || r.cut_short) {
        std::cerr << "CHECK FAILED: fairlane saw provider refusals or broke a book\n";
        status = 1;
      }
      // An upload the service refused or failed (not its door's busy) is the lab's or the
      // service's fault, not the load's.
      const auto lost = std::find_if(r.books.begin(), r.books.end(),
                                     [](const auto& book) { return book.not_uploaded(); });
      if (lost != r.books.end()) {
        std::cerr << "CHECK FAILED: fairlane refused or failed "
                  << std::count_if(r.books.begin(), r.books.end(),
                                   [](const auto& book) { return book.not_uploaded(); })
                  << " uploads, not busy (the first: " << lost->upload_answer << ")\n";
        status = 1;
      }
      // Every book refused would pass the checks above and show nothing of fairlane.
      const auto accepted = std::count_if(r.books.begin(), r.books.end(), [](const auto& book) {
        return !book.refused() && !book.not_uploaded();
      });
      if (accepted == 0) {
        std::cerr << "CHECK FAILED: fairlane accepted none of the " << r.books.size()
                  << " books sent: nothing went through it\n";
        status = 1;
      }
    }
    if (r.which == fairlane::lab::Case::all_at_once) {
      const bool lost = std::any_of(r.books.begin(), r.books.end(),
                                    [](const auto& book) { return !book.clean(); });
      if (!lost) {
        std::cerr << "CHECK FAILED: all pages at once lost nothing: the load was too light\n";
        status = 1;
      }
    }
  }
  return status;
} catch (const std::exception& e) {
  std::cerr << "fairlane-lab: internal error: " << e.what() << '\n';
  return 1;
}
