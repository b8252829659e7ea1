#include "cli/display.hpp"

#include <doctest/doctest.h>

#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdlib>
#include <optional>
#include <string>

using namespace fairlane::cli;

namespace {

const char* kRunning =
    R"({"id":"job_1","name":"book.pdf","user":"alice","state":"running",)"
    R"("pages":{"total":100,"queued":60,"in_flight":10,"done":29,"failed":1,"cancelled":0},)"
    R"("position":412,"eta_seconds":37.5,"usage":{"input_tokens":1000,"output_tokens":500,)"
    R"("cost_usd":0.0045},"created_at":"2026-11-29T14:03:07.250Z","finished_at":null})";

// Sets the process's time zone (TZ) for a test's life, then puts the one it found back.
class Zone {
 public:
  explicit Zone(const char* zone) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): tests run on one thread
    if (const char* was = std::getenv("TZ")) was_ = was;
    set(zone);
  }
  Zone(const Zone&) = delete;
  Zone& operator=(const Zone&) = delete;
  ~Zone() { set(was_ ? was_->c_str() : nullptr); }

 private:
  static void set(const char* zone) {
    // NOLINTBEGIN(concurrency-mt-unsafe): tests run on one thread
    if (zone != nullptr) {
      setenv("TZ", zone, 1);
    } else {
      unsetenv("TZ");
    }
    tzset();
    // NOLINTEND(concurrency-mt-unsafe)
  }
  std::optional<std::string> was_;
};

}  // namespace

TEST_CASE("A job object is read with its counts, position, ETA and usage") {
  const auto job = parse_job(kRunning);
  REQUIRE(job.ok());
  CHECK(job->id == "job_1");
  CHECK(job->total == 100);
  CHECK(job->done == 29);
  CHECK(job->failed == 1);
  CHECK(job->position == 412);
  CHECK(job->eta_s == doctest::Approx(37.5));
  CHECK(job->input_tokens == 1000);
  CHECK(job->cost_usd == doctest::Approx(0.0045));
  CHECK_FALSE(job->finished_at.has_value());
  CHECK_FALSE(job->ended());
  CHECK_FALSE(parse_job("{\"error\":{}}").ok());
  CHECK_FALSE(parse_job("not json").ok());
}

TEST_CASE("Durations read as people say them") {
  CHECK(format_duration(0.44) == "0.4 s");
  CHECK(format_duration(42.4) == "42 s");
  CHECK(format_duration(200) == "3m 20s");
  CHECK(format_duration(7'500) == "2h 05m");
  CHECK(format_duration(-3) == "0.0 s");
}

TEST_CASE("The progress bar fills with the pages ended") {
  CHECK(progress_bar(0, 100, 10) == "[..........]");
  CHECK(progress_bar(30, 100, 10) == "[###.......]");
  CHECK(progress_bar(100, 100, 10) == "[##########]");
  CHECK(progress_bar(5, 0, 4) == "[....]");
}

TEST_CASE("A progress line: plain for logs, with a bar on a terminal") {
  const auto job = parse_job(kRunning).value();
  CHECK(progress_line(job, 30.0, 12.5, false) ==
        "job_1 book.pdf: 29/100 done, 1 failed, position 412, eta 30 s, 12.5 pages/min");
  const std::string tty = progress_line(job, 30.0, 12.5, true);
  CHECK(tty.find("[######") != std::string::npos);
  CHECK(tty.find("29/100") != std::string::npos);
  CHECK(tty.find("eta 30 s") != std::string::npos);
  auto done = job;
  done.state = "done";
  CHECK(progress_line(done, std::nullopt, 0, false).find(", done,") != std::string::npos);
}

TEST_CASE("The jobs table and the summary show each job and the failures with reasons") {
  const auto job = parse_job(kRunning).value();
  const std::string table = jobs_table({job});
  CHECK(table.find("DONE/TOTAL") != std::string::npos);
  CHECK(table.find("29/100") != std::string::npos);
  CHECK(table.find("412") != std::string::npos);
  CHECK(jobs_table({}) == "no jobs\n");

  const std::string s = summary({JobSummary{job, 75.0, {"page 7: the provider answered 500"}}});
  CHECK(s.find("1m 15s") != std::string::npos);
  CHECK(s.find("1500") != std::string::npos);
  CHECK(s.find("$0.0045") != std::string::npos);
  CHECK(s.find("page 7: the provider answered 500") != std::string::npos);
}

TEST_CASE("Names and failures from the service are shown on one line, without escapes") {
  // A job's name comes from whoever uploaded it, a failure's text from the provider: an
  // escape sequence would act on the terminal (a title set, lines rewritten), a newline
  // would break the line that watch redraws in place.
  auto job = parse_job(kRunning).value();
  job.name = "evil\x1b]0;pwned\x07\nname\x1b[2A";
  const std::string bad = "page 7: \x1b[31mred\x1b[0m\nsecond line";
  for (const bool terminal : {true, false}) {
    const std::string line = progress_line(job, 30.0, 12.5, terminal);
    CHECK_MESSAGE(line.find("evil name") != std::string::npos, line);
    CHECK(line.find('\x1b') == std::string::npos);
    CHECK(line.find('\n') == std::string::npos);
  }
  const std::string table = jobs_table({job});
  CHECK(table.find("evil name") != std::string::npos);
  CHECK(table.find('\x1b') == std::string::npos);
  CHECK(std::count(table.begin(), table.end(), '\n') == 2);  // the header and one row
  const std::string s = summary({JobSummary{job, 75.0, {bad}}});
  CHECK(s.find('\x1b') == std::string::npos);
  CHECK(s.find("page 7: red second line") != std::string::npos);
  CHECK(s.find("evil name (job_1)") != std::string::npos);
}

TEST_CASE("The summary counts each job's image and blank pages") {
  fairlane::cli::JobStatus job;
  job.name = "scan.pdf";
  job.state = "done";
  job.total = job.done = 12;
  job.images = 9;
  job.blank = 2;
  const std::string s = summary({JobSummary{job, 10.0, {}}});
  CHECK(s.find("IMAGES/BLANK") != std::string::npos);
  CHECK(s.find("  9/2  ") != std::string::npos);
}

TEST_CASE("A blank page reads as one in the Markdown, whatever its empty output") {
  const auto result = boost::json::parse(
      R"({"id":"job_1","state":"done","pages":[{"page":1,"state":"done","kind":"blank",)"
      R"("output":""},{"page":2,"state":"done","kind":"image","output":"Scanned."}]})");
  CHECK(result_markdown(result, "scan.pdf") ==
        "# scan.pdf\n\n## Page 1\n\n_blank page: no text and no ink, nothing was sent_\n\n"
        "## Page 2\n\nScanned.\n");
}

TEST_CASE("A result reads as Markdown, pages in order, failures marked") {
  const auto result = boost::json::parse(
      R"({"id":"job_1","state":"failed","pages":[{"page":1,"state":"done","output":"Hello.\n"},)"
      R"({"page":2,"state":"failed","error":"timed out"}]})");
  CHECK(result_markdown(result, "book.pdf") ==
        "# book.pdf\n\n## Page 1\n\nHello.\n\n## Page 2\n\n_failed: timed out_\n");
}

TEST_CASE("The failed pages of a result are read whatever its shape") {
  const auto result = boost::json::parse(
      R"({"pages":[{"page":1,"state":"done"},{"page":2,"state":"failed","error":"timed out"},)"
      R"(7,"text",null,{"state":"failed"},{"page":"4","state":"failed","error":17},)"
      R"({"page":5,"state":["failed"]}]})");
  // Until 2026-12-07 an entry that was not an object, or a page without a number, threw out
  // of the summary at the end of a watch.
  CHECK(failed_pages(result) == std::vector<std::string>{"page 2: timed out",
                                                         "page ?: (no reason given)",
                                                         "page ?: (no reason given)"});
  CHECK(failed_pages(boost::json::parse(R"({"pages":{"page":1}})")).empty());
  CHECK(failed_pages(boost::json::parse("[1,2]")).empty());
  CHECK(failed_pages(nullptr).empty());
}

TEST_CASE("Seconds between two of the API's times") {
  CHECK(seconds_between("2026-11-29T14:03:07.250Z", "2026-11-29T14:04:08.750Z") ==
        doctest::Approx(61.5));
  CHECK_FALSE(seconds_between("yesterday", "2026-11-29T14:04:08.750Z").has_value());
}

TEST_CASE("The rate is the pages done over the time since the upload") {
  auto job = parse_job(kRunning).value();  // created 14:03:07.250, 29 done
  const double created = epoch_seconds(job.created_at).value();
  CHECK(pages_per_minute(job, created + 60.0) == doctest::Approx(29.0));
  CHECK(pages_per_minute(job, created + 30.0) == doctest::Approx(58.0));
  // A clock behind the service's, or no time passed: no rate rather than a wrong one.
  CHECK_FALSE(pages_per_minute(job, created - 5.0).has_value());
  CHECK_FALSE(pages_per_minute(job, created).has_value());
  job.created_at = "not a time";
  CHECK_FALSE(pages_per_minute(job, created + 60.0).has_value());
}

TEST_CASE("A job that ended between two updates shows the rate it had, not 0.0") {
  // 8 pages, done 1.6 s after the upload; the watch's first event already says done, and the
  // line is drawn long after.
  auto job = parse_job(kRunning).value();
  job.state = "done";
  job.total = 8;
  job.done = 8;
  job.queued = job.in_flight = job.failed = 0;
  job.position.reset();
  job.eta_s.reset();
  job.created_at = "2026-11-29T14:03:07.250Z";
  job.finished_at = "2026-11-29T14:03:08.850Z";
  const double much_later = epoch_seconds("2026-11-29T15:00:00Z").value();
  const auto rate = pages_per_minute(job, much_later);
  REQUIRE(rate.has_value());
  CHECK(*rate == doctest::Approx(300.0));
  CHECK(progress_line(job, std::nullopt, rate, false) ==
        "job_1 book.pdf: 8/8 done, 0 failed, done, 300.0 pages/min");
  CHECK(progress_line(job, std::nullopt, std::nullopt, false) ==
        "job_1 book.pdf: 8/8 done, 0 failed, done, - pages/min");
}

TEST_CASE("Output for a terminal loses escape sequences and control characters") {
  // Colours (CSI), a window title (OSC ended by BEL, and by ESC \), a bell, DEL, a carriage
  // return, a cursor move, and the 8-bit C1 forms (U+009B CSI, U+009D OSC, U+0085 NEL).
  CHECK(for_terminal("red \x1b[31mRED\x1b[0m end") == "red RED end");
  CHECK(for_terminal("a\x1b]0;pwned\x07z") == "az");
  CHECK(for_terminal("a\x1b]2;title\x1b\\z") == "az");
  CHECK(for_terminal("a\x1bPdevice\x1b\\z") == "az");
  CHECK(for_terminal("bell\x07 del\x7f cr\r back\b nul") == "bell del cr back nul");
  CHECK(for_terminal(std::string("nul\0here", 8)) == "nulhere");
  CHECK(for_terminal("up\x1b[2A\x1b[2Kgone") == "upgone");
  CHECK(for_terminal("reset\x1b"
                     "c done") == "reset done");
  CHECK(for_terminal("c1 \xc2\x9b"
                     "31mred \xc2\x9d"
                     "0;t\xc2\x9c next\xc2\x85 end") == "c1 red  next end");
  // Newlines, tabs and UTF-8 text stay; a lone ESC at the end goes.
  CHECK(for_terminal("line 1\n\tline 2 \xc3\xa9t\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x93\x96\n") ==
        "line 1\n\tline 2 \xc3\xa9t\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x93\x96\n");
  CHECK(for_terminal("ESC before a newline\x1b\nstays") == "ESC before a newline\nstays");
  CHECK(for_terminal("trailing\x1b") == "trailing");
  CHECK(for_terminal("unended \x1b]0;title") == "unended ");
}

TEST_CASE("A progress line shows what the door promised and, once revised, the later finish") {
  const Zone utc("UTC0");
  auto job = parse_job(kRunning).value();
  job.promised_eta_at = "2026-12-01T12:03:04Z";
  CHECK(progress_line(job, 30.0, 12.5, false) ==
        "job_1 book.pdf: 29/100 done, 1 failed, position 412, eta 30 s, promised by 12:03:04 UTC, "
        "12.5 pages/min");
  job.eta_revised_at = "2026-12-01T12:05:00Z";
  job.eta_revised_reason = "more work arrived ahead of this job than expected";
  CHECK(
      progress_line(job, 30.0, 12.5, false)
          .find(
              "promised by 12:03:04 UTC (revised to 12:05:00 UTC: more work arrived ahead of this "
              "job than "
              "expected)") != std::string::npos);
}

TEST_CASE("The promised and revised times are the reader's clock, with its zone") {
  // The service's times are UTC; a user two hours east reads the promise on their own clock.
  const Zone east("XST-2");
  auto job = parse_job(kRunning).value();
  job.promised_eta_at = "2026-12-01T23:03:04.250Z";
  job.eta_revised_at = "2026-12-01T23:05:00Z";
  job.eta_revised_reason = "the provider slowed";
  const std::string line = progress_line(job, 30.0, 12.5, false);
  CHECK_MESSAGE(line.find("promised by 01:03:04 XST (revised to 01:05:00 XST") != std::string::npos,
                line);
  job.promised_eta_at = "not a time";
  CHECK(progress_line(job, 30.0, 12.5, false).find("promised by not a time") != std::string::npos);
}

TEST_CASE("A line watch redraws is cut to the terminal's width, never inside a character") {
  CHECK(cut_to_columns("0123456789", 0) == "0123456789");   // width unknown
  CHECK(cut_to_columns("0123456789", 11) == "0123456789");  // fits
  CHECK(cut_to_columns("0123456789", 10) == "012345678");   // the last cell left free
  CHECK(cut_to_columns("0123456789", 5) == "0123");
  // "caf\xc3\xa9s" is c a f e-acute s: a cut that would split the e-acute leaves it out.
  CHECK(cut_to_columns("caf\xc3\xa9s", 5) == "caf");
  CHECK(cut_to_columns("caf\xc3\xa9s", 6) == "caf\xc3\xa9");
  // On an 80-cell terminal a progress line, 118 cells and more, is cut to 79.
  auto job = parse_job(kRunning).value();
  job.promised_eta_at = "2026-12-01T12:03:04Z";
  const std::string line = progress_line(job, 30.0, 12.5, true);
  CHECK(line.size() > 80);
  CHECK(cut_to_columns(line, 80).size() == 79);
}
