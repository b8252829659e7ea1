// The lab's report, from records made by hand: its sums, quantiles and chart.
#include <doctest/doctest.h>

#include <string>

#include "lab.hpp"
#include "lab_internal.hpp"

using namespace fairlane::lab;

namespace {

BookRecord book(int user, int users, double uploaded, std::vector<PageRecord> pages) {
  BookRecord b;
  b.user = user;
  b.users_at_upload = users;
  b.uploaded_s = uploaded;
  b.pages = std::move(pages);
  return b;
}

}  // namespace

TEST_CASE("Lab: quantiles by nearest rank, and the ramp's users at a time") {
  CHECK(quantile({}, 0.5) == std::nullopt);
  CHECK(quantile({3, 1, 2}, 0.5) == 2);
  CHECK(quantile({1, 2, 3, 4}, 0.95) == 4);
  CHECK(quantile({1, 2, 3, 4}, 0.25) == 1);
  LabConfig config;
  config.time_scale = 10;  // steps every 0.3 s
  CHECK(users_at(config, 0.0) == 1);
  CHECK(users_at(config, 0.31) == 2);
  CHECK(users_at(config, 1.0) == 5);
  CHECK(users_at(config, 1.21) == 8);
  CHECK(users_at(config, 100.0) == 80);
}

TEST_CASE("Lab: a book is clean when every page is done, refused when the door said busy") {
  const auto whole = book(0, 1, 0, {{Fate::done, 1.0, 10}, {Fate::done, 2.0, 10}});
  CHECK(whole.clean());
  CHECK(whole.finished_s() == 2.0);
  const auto broken = book(1, 2, 0, {{Fate::done, 1.0, 10}, {Fate::provider_503, 1.5, 0}});
  CHECK_FALSE(broken.clean());
  CHECK(broken.finished_s() == 1.5);
  const auto refused = book(2, 3, 0, {{Fate::door_busy, 0.1, 0}});
  CHECK(refused.refused());
  CHECK_FALSE(book(3, 3, 0, {{Fate::pending, 0, 0}}).finished_s().has_value());
}

TEST_CASE("Lab: the report sums deaths, refusals, clean books and wasted spend per case") {
  LabConfig config;
  config.ramp = {1, 2};
  config.pages_per_book = 2;
  CaseResult r;
  r.which = Case::all_at_once;
  // Book 1 whole (waits 1 and 3 s); book 2 lost a page to a 429, so its done page of
  // 1,000,000 tokens ($3) is wasted.
  r.books = {book(0, 1, 0, {{Fate::done, 1.0, 10}, {Fate::done, 3.0, 10}}),
             book(1, 2, 3, {{Fate::done, 4.0, 1'000'000}, {Fate::provider_429_tokens, 3.5, 0}})};
  r.first_failure = FirstFailure{3.5, 2, Fate::provider_429_tokens};
  r.spend_usd = 3.0;
  r.peak_in_flight = 3;
  const std::string md = markdown({r}, config);
  INFO(md);
  CHECK(
      md.find("| 2. all pages at once | provider 429 on tokens at 3.5 s, 2 users | 1 | 0 | 1 / 2 | "
              "$3.00 | $3.00 | 1.0 s / 3.0 s | 3.0 s / 3.0 s | 3 | - / - / - | - |") !=
      std::string::npos);

  const std::string chart = svg_chart({r}, config);
  CHECK(chart.rfind("<svg", 0) == 0);
  CHECK(chart.find("<polyline") != std::string::npos);
  CHECK(chart.find("2. all pages at once") != std::string::npos);
}

TEST_CASE("Lab: fairlane's books against the ETA the door promised them") {
  LabConfig config;
  config.ramp = {1, 2, 3};
  config.pages_per_book = 1;
  CaseResult r;
  r.which = Case::fairlane;
  // Promised 10 s, took 12 s (+20%); promised 20 s, took 18 s (-10%); promised 4 s, took 4 s
  // (0%). A refused book and one still going have no lateness.
  r.books = {book(0, 1, 0, {{Fate::done, 12.0, 10}}), book(1, 2, 5, {{Fate::done, 23.0, 10}}),
             book(2, 3, 1, {{Fate::done, 5.0, 10}}), book(3, 3, 1, {{Fate::door_busy, 1.0, 0}}),
             book(4, 3, 2, {{Fate::pending, 0, 0}})};
  r.books[0].eta_s = 10.0;
  r.books[1].eta_s = 20.0;
  r.books[2].eta_s = 4.0;
  r.books[4].eta_s = 3.0;
  const std::string md = markdown({r}, config);
  INFO(md);
  // Sorted -10%, 0%, +20%: p50 the 2nd, p90 and max the 3rd; one of three more than 10% late.
  CHECK(md.find("| 0.0% / +20.0% / +20.0% | 1 of 3 (33.3%) |") != std::string::npos);
  CHECK(md.find("late against the promise p50 / p90 / max | later than promise + 10% |") !=
        std::string::npos);
}

TEST_CASE("Lab: a book's time as the service measured it wins over the lab's own") {
  LabConfig config;
  config.ramp = {1, 2};
  config.pages_per_book = 1;
  CaseResult r;
  r.which = Case::fairlane;
  // Seen ending 12 s after the upload (+20% of 10 s), but the service says 9 s from its
  // created_at to its finished_at (-10%): the lab's polls and the body's trip do not count.
  // The other book has no time of the service's and is measured here: 4 s of 4 (0%).
  r.books = {book(0, 1, 0, {{Fate::done, 12.0, 10}}), book(1, 2, 1, {{Fate::done, 5.0, 10}})};
  r.books[0].eta_s = 10.0;
  r.books[0].served_s = 9.0;
  r.books[1].eta_s = 4.0;
  CHECK(r.books[0].taken_s() == doctest::Approx(9.0));
  CHECK(r.books[1].taken_s() == doctest::Approx(4.0));
  const std::string md = markdown({r}, config);
  INFO(md);
  CHECK(md.find("| -10.0% / 0.0% / 0.0% | 0 of 2 (0.0%) |") != std::string::npos);
}

TEST_CASE("Lab: a run without a full minute has no busiest minute, shown as -") {
  LabConfig config;  // 300,000 tokens a minute
  CaseResult r;
  r.which = Case::one_at_a_time;
  // The stand-in's first and last minutes are partial: two minutes hold no full one. Until
  // 2026-12-07 the report said "busiest full minute 0.0% of the TPM limit".
  read_stand_in_stats(R"({"requests":2,"per_minute":[{"input_tokens":9000,"output_tokens":1000},)"
                      R"({"input_tokens":5000,"output_tokens":500}]})",
                      config, r);
  CHECK_FALSE(r.busiest_minute_utilisation.has_value());
  const std::string md = markdown({r}, config);
  INFO(md);
  CHECK(md.find("busiest full minute -;") != std::string::npos);
  CHECK(md.find("0.0% of the TPM limit") == std::string::npos);

  // Three minutes: the middle one is full, 150,000 tokens of 300,000.
  read_stand_in_stats(R"({"per_minute":[{"input_tokens":1},)"
                      R"({"input_tokens":100000,"output_tokens":50000},{"input_tokens":1}]})",
                      config, r);
  REQUIRE(r.busiest_minute_utilisation.has_value());
  CHECK(*r.busiest_minute_utilisation == doctest::Approx(0.5));
  CHECK(markdown({r}, config).find("busiest full minute 50.0% of the TPM limit;") !=
        std::string::npos);
}

TEST_CASE("Lab: an upload's answer decides its book's fate, busy only when the door said so") {
  const std::string busy = R"({"error":{"type":"busy","message":"the queue is long"}})";
  const std::string read_only = R"({"error":{"type":"read_only","message":"the disk is full"}})";
  CHECK(upload_fate(202, R"({"id":"job_1"})") == Fate::pending);  // accepted: its pages go on
  CHECK(upload_fate(503, busy) == Fate::door_busy);
  // Until 2026-12-07 every 503 was the door's busy, and every other answer marked the pages
  // failed, counted as dying at the provider although none was sent.
  CHECK(upload_fate(503, read_only) == Fate::upload_error);
  CHECK(upload_fate(503, "<html>proxy</html>") == Fate::upload_error);
  CHECK(upload_fate(502, "") == Fate::upload_error);
  CHECK(upload_fate(0, "") == Fate::upload_error);  // no answer
  CHECK(upload_fate(413, R"({"error":{"type":"payload_too_large"}})") == Fate::upload_refused);
  CHECK(upload_fate(429, R"({"error":{"type":"user_queue_full"}})") == Fate::upload_refused);
  CHECK(upload_fate(400, "") == Fate::upload_refused);
  CHECK(upload_answer(503, read_only) == "503 read_only: the disk is full");
  CHECK(upload_answer(502, "Bad Gateway") == "502: Bad Gateway");
}

TEST_CASE("Lab: fairlane's uploads refused or failed are reported apart from the provider") {
  LabConfig config;
  config.ramp = {1, 2, 4};
  config.pages_per_book = 2;
  CaseResult r;
  r.which = Case::fairlane;
  r.books = {book(0, 1, 0, {{Fate::done, 1.0, 10}, {Fate::done, 2.0, 10}}),
             book(1, 2, 1, {{Fate::door_busy, 1.0, 0}, {Fate::door_busy, 1.0, 0}}),
             book(2, 4, 2, {{Fate::upload_refused, 2.0, 0}, {Fate::upload_refused, 2.0, 0}}),
             book(3, 4, 2, {{Fate::upload_error, 2.1, 0}, {Fate::upload_error, 2.1, 0}})};
  r.books[2].upload_answer = "413 payload_too_large: too large";
  r.books[3].upload_answer = "503 read_only: the disk is full";
  CHECK(r.books[1].refused());
  CHECK_FALSE(r.books[2].refused());
  CHECK(r.books[2].not_uploaded());
  CHECK(r.books[3].not_uploaded());
  CHECK_FALSE(r.books[0].not_uploaded());
  const std::string md = markdown({r}, config);
  INFO(md);
  // No page died at the provider; the door refused 2 pages (the busy book's); 1 of 4 clean.
  CHECK(md.find("| 4. fairlane | none | 0 | 2 | 1 / 4 |") != std::string::npos);
  CHECK(md.find("The door accepted 1 books") != std::string::npos);
  CHECK(md.find("said busy to 1 ") != std::string::npos);
  CHECK(md.find("The service refused the upload of 1 books (the first: 413 payload_too_large: "
                "too large); 1 uploads failed (the first: 503 read_only: the disk is full).") !=
        std::string::npos);
}
