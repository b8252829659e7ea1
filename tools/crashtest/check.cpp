#include "check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

namespace fairlane::crashtest {
namespace {

constexpr std::size_t kMaxProblems = 20;

struct Problems {
  Findings& findings;
  std::int64_t more = 0;
  template <typename... Args>
  void add(fmt::format_string<Args...> format, Args&&... args) {
    if (findings.problems.size() < kMaxProblems) {
      findings.problems.push_back(fmt::format(format, std::forward<Args>(args)...));
    } else {
      ++more;
    }
  }
  ~Problems() {
    if (more > 0) findings.problems.push_back(fmt::format("... and {} more", more));
  }
};

// A generated book's page K of N starts "Page K of N" (tools/pdfgen).
bool starts_with_page_line(const std::string& output, std::int64_t page, std::int64_t pages) {
  return output.rfind(fmt::format("Page {} of {}", page, pages), 0) == 0;
}

// `text` with every run of whitespace one space, and none at either end.
std::string words_of(std::string_view text) {
  std::string out;
  bool space = false;
  for (const char c : text) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

// Whether a PDF page's result is that page's: it starts with its "Page K of N" line (every
// generated book's page K does) and holds the first words of the page's own text after it,
// however the reader wrapped its lines.
bool is_pdf_page(const std::string& output, const std::string& text, std::int64_t page,
                 std::int64_t pages) {
  if (!starts_with_page_line(output, page, pages)) return false;
  const std::size_t first_line = text.find('\n');
  const std::string body = words_of(first_line == std::string::npos ? "" : text.substr(first_line));
  return words_of(output).find(body.substr(0, std::min<std::size_t>(body.size(), 80))) !=
         std::string::npos;
}

}  // namespace

Findings check(const std::vector<UploadRecord>& uploads, const std::vector<KillRecord>& kills,
               const Observed& observed) {
  Findings f;
  {
    Problems problems{f};

    // Uploads, by (user, Idempotency-Key).
    std::map<std::pair<std::string, std::string>, std::size_t> upload_of;
    for (std::size_t i = 0; i < uploads.size(); ++i) {
      const UploadRecord& u = uploads[i];
      upload_of[{u.user, u.key}] = i;
      ++f.uploads;
      f.cut += u.cut;
      if (u.cut > 0 && !u.abandoned) ++f.retried;
      if (u.failed_without_kill > 0) {
        problems.add("{} requests of {}'s book {} failed with the service up: {}",
                     u.failed_without_kill, u.user, u.book, u.last_error);
      }
      if (u.job_id) {
        ++f.accepted;
        f.expected_pages += u.pages;
      } else if (u.abandoned) {
        ++f.abandoned;
      } else if (u.refused) {
        problems.add("{}'s book {} was refused: {}", u.user, u.book, *u.refused);
      } else {
        problems.add("{}'s book {} never got a 202", u.user, u.book);
      }
    }

    // Jobs: each whole, each an upload's, one per upload; a 202's job is the one it named.
    std::map<std::string, std::size_t> upload_of_job;
    std::vector<std::vector<std::string>> jobs_of_upload(uploads.size());
    for (const JobRow& job : observed.jobs) {
      ++f.jobs;
      const auto found = upload_of.find({job.user, job.idempotency_key});
      if (found == upload_of.end()) {
        ++f.jobs_without_upload;
        problems.add("job {} of {} (key '{}') belongs to no upload", job.public_id, job.user,
                     job.idempotency_key);
        continue;
      }
      const UploadRecord& u = uploads[found->second];
      if (job.page_rows != job.page_count || job.page_count != u.pages) {
        ++f.partial_jobs;
        problems.add("job {} ({}'s book {}) is not whole: {} pages stored, page_count {}, {} sent",
                     job.public_id, u.user, u.book, job.page_rows, job.page_count, u.pages);
      }
      upload_of_job[job.public_id] = found->second;
      jobs_of_upload[found->second].push_back(job.public_id);
    }
    for (std::size_t i = 0; i < uploads.size(); ++i) {
      const UploadRecord& u = uploads[i];
      const auto& jobs = jobs_of_upload[i];
      if (jobs.size() > 1) {
        f.second_jobs += static_cast<std::int64_t>(jobs.size()) - 1;
        problems.add("{}'s book {} became {} jobs", u.user, u.book, jobs.size());
      }
      if (u.job_id && std::find(jobs.begin(), jobs.end(), *u.job_id) == jobs.end()) {
        problems.add("{}'s book {} got 202 with job {}, which the database does not hold", u.user,
                     u.book, *u.job_id);
      }
      if (!u.job_id && u.abandoned && !jobs.empty()) {
        ++f.abandoned_committed;
        f.abandoned_pages += u.pages;
      }
    }

    // The total queue: every page of every 202 done exactly once in the results.
    std::map<std::pair<std::size_t, std::int64_t>, std::int64_t> done;  // (upload, page) -> times
    for (const ResultPage& page : observed.results) {
      const auto found = upload_of_job.find(page.job_id);
      if (found == upload_of_job.end() || page.page < 1 ||
          page.page > uploads[found->second].pages) {
        ++f.unexpected;
        problems.add("the results hold page {} of job {}, which no upload sent", page.page,
                     page.job_id);
        continue;
      }
      if (page.state != "done") continue;
      const UploadRecord& u = uploads[found->second];
      ++f.done_pages;
      ++done[{found->second, page.page}];
      const std::string& text = u.texts[static_cast<std::size_t>(page.page - 1)];
      const bool right =
          u.pdf ? is_pdf_page(page.output, text, page.page, u.pages) : page.output == text;
      if (!right) {
        ++f.wrong_outputs;
        problems.add("page {} of {}'s book {} came back as another text: '{}'", page.page, u.user,
                     u.book, page.output.substr(0, 60));
      }
    }
    // (An abandoned upload's job, committed whole before the kill, is allowed; once stored
    // it is owed like any other, so its pages count like those of a 202.)
    for (const auto& [page, times] : done) {
      if (times > 1) {
        const UploadRecord& u = uploads[page.first];
        f.duplicated += times - 1;
        problems.add("page {} of {}'s book {} is done {} times", page.second, u.user, u.book,
                     times);
      }
    }
    for (std::size_t i = 0; i < uploads.size(); ++i) {
      const UploadRecord& u = uploads[i];
      if (!u.job_id && jobs_of_upload[i].empty()) continue;
      const std::string& job = u.job_id ? *u.job_id : jobs_of_upload[i].front();
      for (std::int64_t page = 1; page <= u.pages; ++page) {
        if (done.find({i, page}) == done.end()) {
          ++f.lost;
          problems.add("page {} of {}'s book {} (job {}) is not done in the results", page, u.user,
                       u.book, job);
        }
      }
    }

    // Calls: at most one extra per kill that found the page in flight.
    std::map<std::string, std::int64_t> bound;
    for (const KillRecord& kill : kills) {
      f.in_flight_at_kills += static_cast<std::int64_t>(kill.in_flight.size());
      for (const std::string& text : kill.in_flight) ++bound[text];
    }
    std::map<std::string, std::int64_t> pages_with_text;
    for (const PageRow& page : observed.pages) ++pages_with_text[page.text];
    for (const auto& [text, count] : pages_with_text) {
      if (count > 1) {
        problems.add("{} pages share the text '{}': their calls cannot be told apart", count,
                     text.substr(0, 60));
      }
    }
    for (const auto& [text, calls] : observed.calls_by_text) {
      f.calls += calls;
      if (!pages_with_text.contains(text)) {
        f.calls_for_no_page += calls;
        problems.add("the stand-in saw {} calls for a text no page has: '{}'", calls,
                     text.substr(0, 60));
      }
    }
    for (const PageRow& page : observed.pages) {
      const auto found = observed.calls_by_text.find(page.text);
      const std::int64_t calls = found == observed.calls_by_text.end() ? 0 : found->second;
      if (page.state == "done" && calls == 0) {
        problems.add("page {} of job {} is done but the stand-in never saw it", page.seq + 1,
                     page.job_id);
      }
      const std::int64_t extra = std::max<std::int64_t>(0, calls - 1);
      f.extra_calls += extra;
      const auto allowed = bound.find(page.text);
      const std::int64_t limit = allowed == bound.end() ? 0 : allowed->second;
      if (extra > limit) {
        ++f.pages_over_bound;
        problems.add("page {} of job {} was called {} times but in flight at only {} kills",
                     page.seq + 1, page.job_id, calls, limit);
      }
    }

    // The database after every kill and at the end.
    for (std::size_t k = 0; k < kills.size(); ++k) {
      const KillRecord& kill = kills[k];
      ++f.integrity_checks;
      if (kill.integrity != "ok") {
        ++f.integrity_failures;
        problems.add("after kill {} the integrity check said: {}", k + 1, kill.integrity);
      }
      if (kill.partial_jobs > 0) {
        problems.add("after kill {} the database held {} partial jobs", k + 1, kill.partial_jobs);
      }
      if (kill.open_not_in_flight > 0) {
        problems.add(
            "at kill {} the stand-in had {} calls of pages the database did not have "
            "in flight",
            k + 1, kill.open_not_in_flight);
      }
    }
    ++f.integrity_checks;
    if (observed.final_integrity != "ok") {
      ++f.integrity_failures;
      problems.add("at the end the integrity check said: {}", observed.final_integrity);
    }
  }
  return f;
}

}  // namespace fairlane::crashtest
