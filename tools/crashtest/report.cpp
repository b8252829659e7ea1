// The crash test's summary: plain text for the terminal, Markdown for --report.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "crashtest.hpp"
#include "reader.hpp"

namespace fairlane::crashtest {
namespace {

std::string landed(const KillRecord& kill) {
  std::vector<std::string> where;
  if (kill.upload) where.emplace_back("upload");
  if (kill.dispatch) where.emplace_back("dispatch");
  if (kill.completion) where.emplace_back("completion");
  return where.empty() ? "idle" : fmt::format("{}", fmt::join(where, ", "));
}

struct Counts {
  int upload = 0, dispatch = 0, completion = 0, idle = 0;
};

Counts count(const std::vector<KillRecord>& kills) {
  Counts c;
  for (const KillRecord& kill : kills) {
    c.upload += kill.upload ? 1 : 0;
    c.dispatch += kill.dispatch ? 1 : 0;
    c.completion += kill.completion ? 1 : 0;
    c.idle += !kill.upload && !kill.dispatch && !kill.completion ? 1 : 0;
  }
  return c;
}

// The lines both forms share: (label, value).
std::vector<std::pair<std::string, std::string>> figures(const Config& config, const Summary& s) {
  const Findings& f = s.findings;
  const Counts c = count(s.kills);
  int pdfs = 0;
  for (const UploadRecord& u : s.uploads) pdfs += u.pdf ? 1 : 0;
  return {
      {"workload", fmt::format("{} users x {} books x {} pages ({} books as PDFs), seed {}",
                               config.users, config.books, config.pages, pdfs, config.seed)},
      {"kills",
       fmt::format("{} of {} asked; landed during upload {}, dispatch {}, completion {}, "
                   "idle {} (one kill can land in several)",
                   s.kills.size(), config.kills, c.upload, c.dispatch, c.completion, c.idle)},
      {"serve",
       fmt::format("{} starts on one {} database; the last stopped by SIGTERM, exit {}", s.starts,
                   is_postgresql(config.db) ? "PostgreSQL" : "SQLite", s.last_exit)},
      {"uploads",
       fmt::format("{}: {} got a 202, {} abandoned after a kill ({} of them committed "
                   "whole before it), {} sent again after a kill; {} requests cut by "
                   "kills",
                   f.uploads, f.accepted, f.abandoned, f.abandoned_committed, f.retried, f.cut)},
      {"jobs", fmt::format("{} in the database: {} partial, {} of no upload, {} second jobs of "
                           "one upload",
                           f.jobs, f.partial_jobs, f.jobs_without_upload, f.second_jobs)},
      {"pages",
       fmt::format("{} owed ({} of 202s, {} of abandoned uploads committed whole), {} "
                   "done in the results: lost {}, duplicated {}, unexpected {}, wrong "
                   "outputs {}",
                   f.expected_pages + f.abandoned_pages, f.expected_pages, f.abandoned_pages,
                   f.done_pages, f.lost, f.duplicated, f.unexpected, f.wrong_outputs)},
      {"calls", fmt::format("{} at the stand-in ({} refused 429/503), {} extra; pages in flight "
                            "at the kills {}; pages called more than their kills allow {}; "
                            "calls of no page {}",
                            f.calls, s.rejected, f.extra_calls, f.in_flight_at_kills,
                            f.pages_over_bound, f.calls_for_no_page)},
      {"integrity_check",
       fmt::format("{} of {} ok (after every kill and at the end){}",
                   f.integrity_checks - f.integrity_failures, f.integrity_checks,
                   is_postgresql(config.db)
                       ? "; on PostgreSQL: every job's counters against its pages' states"
                       : "")},
      {"time", fmt::format("{:.1f} s", s.duration_s)},
  };
}

std::string verdict(const Summary& s) {
  if (s.ok()) return "every check holds";
  std::string text = "FAILED";
  if (!s.error.empty()) text += ": " + s.error;
  if (s.last_exit != 0 && s.error.empty()) {
    text += fmt::format(": the last `fairlane serve` exited {}", s.last_exit);
  }
  return text;
}

}  // namespace

std::string summary_text(const Config& config, const Summary& s) {
  std::string out = "crashtest\n";
  for (const auto& [label, value] : figures(config, s)) {
    out += fmt::format("  {:<16} {}\n", label, value);
  }
  out +=
      "  kill   at (s)  aimed at     landed during                 in flight  calls open  "
      "integrity\n";
  for (std::size_t k = 0; k < s.kills.size(); ++k) {
    const KillRecord& kill = s.kills[k];
    out += fmt::format("  {:>4} {:>8.2f}  {:<12} {:<29} {:>9} {:>11}  {}\n", k + 1, kill.at_s,
                       kill.aimed_at, landed(kill), kill.in_flight.size(), kill.calls_open,
                       kill.integrity);
  }
  for (const std::string& problem : s.findings.problems) out += "  problem: " + problem + "\n";
  if (!s.work_dir.empty()) out += "  work folder: " + s.work_dir + "\n";
  out += "crashtest: " + verdict(s) + "\n";
  return out;
}

std::string summary_markdown(const Config& config, const Summary& s, const std::string& command) {
  std::string out = "# Crash test\n\n```sh\n" + command + "\n```\n\n";
  out += "| | |\n|---|---|\n";
  for (const auto& [label, value] : figures(config, s)) {
    out += fmt::format("| {} | {} |\n", label, value);
  }
  out += fmt::format("| result | {} |\n\n", verdict(s));
  out +=
      "| kill | at (s) | aimed at | landed during | pages in flight | calls open | "
      "integrity_check |\n|---:|---:|---|---|---:|---:|---|\n";
  for (std::size_t k = 0; k < s.kills.size(); ++k) {
    const KillRecord& kill = s.kills[k];
    out +=
        fmt::format("| {} | {:.2f} | {} | {} | {} | {} | {} |\n", k + 1, kill.at_s, kill.aimed_at,
                    landed(kill), kill.in_flight.size(), kill.calls_open, kill.integrity);
  }
  if (!s.findings.problems.empty()) {
    out += "\nProblems:\n\n";
    for (const std::string& problem : s.findings.problems) out += "- " + problem + "\n";
  }
  return out;
}

}  // namespace fairlane::crashtest
