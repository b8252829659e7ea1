#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <chrono>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "service/api_json.hpp"

using namespace std::chrono_literals;
using fairlane::JobState;
using fairlane::JobView;
using fairlane::Status;
using fairlane::StatusCode;
using fairlane::WallTime;
using fairlane::service::answer_for;
using fairlane::service::iso_time;
using fairlane::service::job_json;
namespace json = boost::json;

namespace {

JobView sample_job() {
  JobView job;
  job.public_id = "job_0123456789abcdef01234567";
  job.name = "book.pdf";
  job.user_name = "alice";
  job.state = JobState::running;
  job.pages = {100, 60, 10, 29, 1, 0};
  job.usage = {12'000, 3'000};
  job.cost_usd = 0.045;
  job.created_at = WallTime(std::chrono::milliseconds(1'724'259'600'250));
  return job;
}

}  // namespace

TEST_CASE("Times are UTC with milliseconds") {
  CHECK(iso_time(WallTime(std::chrono::milliseconds(1'724'259'600'250))) ==
        "2024-08-21T17:00:00.250Z");
  CHECK(iso_time(WallTime{}) == "1970-01-01T00:00:00.000Z");
}

TEST_CASE("The job object has DESIGN's fields, with position and ETA while it waits") {
  const json::object o = job_json(sample_job(), fairlane::JobEstimate{412, 37.46}, 2.0);
  CHECK(o.at("id") == "job_0123456789abcdef01234567");
  CHECK(o.at("name") == "book.pdf");
  CHECK(o.at("user") == "alice");
  CHECK(o.at("state") == "running");
  const auto& pages = o.at("pages").as_object();
  CHECK(pages.at("total") == 100);
  CHECK(pages.at("queued") == 60);
  CHECK(pages.at("in_flight") == 10);
  CHECK(pages.at("done") == 29);
  CHECK(pages.at("failed") == 1);
  CHECK(o.at("position") == 412);
  CHECK(o.at("eta_seconds").as_double() == doctest::Approx(37.5));
  CHECK(o.at("usage").at("input_tokens") == 12'000);
  CHECK(o.at("usage").at("cost_usd").as_double() == doctest::Approx(0.045));
  CHECK(o.at("created_at") == "2024-08-21T17:00:00.250Z");
  CHECK(o.at("finished_at").is_null());
}

TEST_CASE("A job with only calls in flight is at position 0, and an ended job has neither") {
  JobView job = sample_job();
  job.pages = {10, 0, 2, 8, 0, 0};
  const json::object flying = job_json(job, std::nullopt, 2.0);
  CHECK(flying.at("position") == 0);
  CHECK(flying.at("eta_seconds").as_double() == 2.0);

  job.state = JobState::done;
  job.finished_at = job.created_at + 90s;
  const json::object done = job_json(job, std::nullopt, 2.0);
  CHECK(done.at("position").is_null());
  CHECK(done.at("eta_seconds").is_null());
  CHECK(done.at("finished_at") == "2024-08-21T17:01:30.250Z");
}

TEST_CASE("One table maps a Status to an HTTP answer naming the problem") {
  CHECK(answer_for(Status(StatusCode::invalid_argument, "x")).status == 400);
  CHECK(answer_for(Status(StatusCode::not_found, "x")).status == 404);
  CHECK(answer_for(Status(StatusCode::already_exists, "x")).status == 409);
  CHECK(answer_for(Status(StatusCode::disk_full, "x")).status == 507);
  CHECK(answer_for(Status(StatusCode::io_error, "x")).status == 503);
  CHECK(answer_for(Status(StatusCode::internal, "x")).status == 500);
  const auto busy = answer_for(Status(StatusCode::busy, "the database is locked"));
  CHECK(busy.status == 503);
  CHECK(busy.retry_after_s == 1);
  CHECK(busy.body.at("error").at("type") == "busy");
  CHECK(std::string(busy.body.at("error").at("message").as_string()).find("Retry") !=
        std::string::npos);
}

TEST_CASE(
    "A failure on the service's side is answered in the caller's terms, and where the store is "
    "goes only to the operator's log") {
  // What the stores say names the server or the file, and the operator's remedy.
  const std::string server = "postgresql://fairlane@db.internal:5432/fairlane";
  for (const StatusCode code :
       {StatusCode::busy, StatusCode::disk_full, StatusCode::read_only, StatusCode::io_error,
        StatusCode::outcome_unknown, StatusCode::fenced, StatusCode::corrupt,
        StatusCode::version_too_new, StatusCode::unavailable, StatusCode::internal}) {
    CAPTURE(fairlane::to_string(code));
    const std::string detail = "committing job 12: the PostgreSQL server at " + server +
                               " failed (could not write to file \"/var/lib/pg/base/16384\")";
    const auto answer = answer_for(Status(code, detail));
    CHECK(answer.status >= 500);
    const auto& error = answer.body.at("error").as_object();
    CHECK(std::string_view(error.at("type").as_string()) == fairlane::to_string(code));
    const std::string message(error.at("message").as_string());
    CHECK(message.find("db.internal") == std::string::npos);
    CHECK(message.find("/var/lib") == std::string::npos);
    CHECK(message.find("PostgreSQL") == std::string::npos);
    // The caller's remedy: retry, or tell the operator, whose log has the detail.
    CHECK((message.find("Retry") != std::string::npos ||
           message.find("operator") != std::string::npos));
    CHECK(answer.detail == detail);
  }
  // What the caller can mend is said as the store said it, and nothing goes to the log.
  const auto gone = answer_for(Status(StatusCode::not_found, "job 12 does not exist"));
  CHECK(gone.body.at("error").at("message") == "job 12 does not exist");
  CHECK(gone.detail.empty());
}

TEST_CASE("The door's refusals: 503 busy with its numbers, 429 and 422 naming their limits") {
  const auto busy = answer_for(fairlane::DoorDecision{fairlane::DoorBusy{412, 95.04, 60.0, 36}});
  REQUIRE(busy);
  CHECK(busy->status == 503);
  CHECK(busy->retry_after_s == 36);
  const auto& error = busy->body.at("error").as_object();
  CHECK(error.at("type") == "busy");
  CHECK(error.at("position") == 412);
  CHECK(error.at("estimated_wait_seconds").as_double() == doctest::Approx(95.0));
  CHECK(error.at("max_wait_seconds").as_double() == 60.0);
  CHECK(error.at("retry_after_seconds") == 36);
  CHECK(std::string(error.at("message").as_string()).find("Retry in 36 s") != std::string::npos);

  const auto full =
      answer_for(fairlane::DoorDecision{fairlane::DoorUserQueueFull{9'990, 100, 10'000}});
  REQUIRE(full);
  CHECK(full->status == 429);
  CHECK(full->body.at("error").at("limit") == 10'000);

  const auto large =
      answer_for(fairlane::DoorDecision{fairlane::DoorRequestTooLarge{7, 400'000, 300'000}});
  REQUIRE(large);
  CHECK(large->status == 422);
  CHECK(large->body.at("error").at("page") == 7);
  CHECK(large->body.at("error").at("tokens") == 400'000);
  CHECK(large->body.at("error").at("ceiling") == 300'000);

  CHECK_FALSE(answer_for(fairlane::DoorDecision{fairlane::DoorAccepted{}}));

  // job_too_large names the parts that fit, or says that none does.
  const auto split =
      answer_for(fairlane::DoorDecision{fairlane::DoorJobTooLarge{1'000, 160.0, 100.0, 600, 2}});
  REQUIRE(split);
  CHECK(split->status == 422);
  CHECK(std::string(split->body.at("error").at("message").as_string())
            .find("split it into 2 jobs of at most 600 pages") != std::string::npos);
  const auto none =
      answer_for(fairlane::DoorDecision{fairlane::DoorJobTooLarge{10, 3.6, 1.0, 0, 0}});
  REQUIRE(none);
  const std::string message(none->body.at("error").at("message").as_string());
  CHECK(message.find("0 jobs") == std::string::npos);
  CHECK(message.find("no split helps") != std::string::npos);
  CHECK(message.find("--max-job-seconds") != std::string::npos);
}

TEST_CASE(
    "A refusal from an upload's headers, where even one page would be refused, says so and "
    "not what a one-page job would be told") {
  // Before, the door's answer for the one page it was asked about went out as it is for a
  // job: "this job adds 1" and "send fewer pages", to an upload of any size.
  using fairlane::service::Refused;
  const auto busy = answer_for(fairlane::DoorDecision{fairlane::DoorBusy{412, 95.04, 60.0, 36}},
                               Refused::any_page);
  REQUIRE(busy);
  CHECK(busy->status == 503);
  CHECK(busy->retry_after_s == 36);
  const std::string waits(busy->body.at("error").at("message").as_string());
  CHECK(waits.find("even one page") != std::string::npos);
  CHECK(waits.find("Retry in 36 s at the earliest") != std::string::npos);
  CHECK(waits.find("fewer pages") == std::string::npos);
  CHECK(busy->body.at("error").at("position") == 412);

  const auto full = answer_for(
      fairlane::DoorDecision{fairlane::DoorUserQueueFull{10'000, 1, 10'000}}, Refused::any_page);
  REQUIRE(full);
  CHECK(full->status == 429);
  const std::string queued(full->body.at("error").at("message").as_string());
  CHECK(queued.find("adds 1") == std::string::npos);
  CHECK(queued.find("no page more is taken") != std::string::npos);
  CHECK(full->body.at("error").at("limit") == 10'000);
}

TEST_CASE("A JSON upload gives its pages, name and max_tokens, in order") {
  using fairlane::service::JsonUpload;
  auto parsed = fairlane::service::parse_json_upload(
      R"({"name": "notes", "pages": ["one\n", "", "caf\u00e9"], "max_tokens": 250})", 1'000);
  REQUIRE(std::holds_alternative<JsonUpload>(parsed));
  const JsonUpload& upload = std::get<JsonUpload>(parsed);
  CHECK(upload.name == "notes");
  CHECK(upload.max_tokens == 250);
  CHECK(upload.pages == std::vector<std::string>{"one\n", "", "caf\xC3\xA9"});

  // A name that is not text is ignored; no max_tokens leaves the service's.
  auto plain = fairlane::service::parse_json_upload(R"({"name": 7, "pages": []})", 1'000);
  REQUIRE(std::holds_alternative<JsonUpload>(plain));
  CHECK_FALSE(std::get<JsonUpload>(plain).name.has_value());
  CHECK_FALSE(std::get<JsonUpload>(plain).max_tokens.has_value());
  CHECK(std::get<JsonUpload>(plain).pages.empty());
}

TEST_CASE(
    "A JSON upload over --max-pages is refused as it is parsed, before its pages are copied") {
  using fairlane::service::ApiAnswer;
  auto parsed =
      fairlane::service::parse_json_upload(R"({"pages": ["", "", "", "", ""]})", 1'000, 3);
  REQUIRE(std::holds_alternative<ApiAnswer>(parsed));
  const ApiAnswer& answer = std::get<ApiAnswer>(parsed);
  CHECK(answer.status == 413);
  CHECK(answer.body.at("error").at("type") == "payload_too_large");
  const std::string message(answer.body.at("error").at("message").as_string());
  CHECK(message.find("5 pages") != std::string::npos);
  CHECK(message.find("at most 3") != std::string::npos);
  CHECK(std::holds_alternative<fairlane::service::JsonUpload>(
      fairlane::service::parse_json_upload(R"({"pages": ["", "", ""]})", 1'000, 3)));
}

TEST_CASE("A bad JSON upload gets a 400 naming what is wrong") {
  using fairlane::service::ApiAnswer;
  const auto refusal = [](std::string_view body) {
    auto parsed = fairlane::service::parse_json_upload(body, 1'000);
    REQUIRE(std::holds_alternative<ApiAnswer>(parsed));
    const ApiAnswer answer = std::get<ApiAnswer>(parsed);
    CHECK(answer.status == 400);
    const json::object& error = answer.body.at("error").as_object();
    return std::pair(std::string(error.at("type").as_string()),
                     std::string(error.at("message").as_string()));
  };
  CHECK(refusal("{\"pages\": [").first == "invalid_document");
  CHECK(refusal("{\"pages\": [").second.find("not valid JSON") != std::string::npos);
  CHECK(refusal(R"(["a"])").second.find("\"pages\"") != std::string::npos);
  CHECK(refusal(R"({"pages": "a"})").second.find("\"pages\"") != std::string::npos);
  CHECK(refusal(R"({"pages": ["a", 2]})").second ==
        "page 2 is not text: \"pages\" is a list of the pages' texts, as strings: "
        "{\"pages\": [\"page one\", \"page two\"]}");
  // Where the JSON breaks, and in which page: text that is not UTF-8 (Latin-1 here), and a
  // lone UTF-16 surrogate (JavaScript's half of an emoji, cut where a page was cut).
  CHECK(refusal("{\"pages\": [\"ok\", \"caf\xe9\"]}").second ==
        "page 2's text is not UTF-8 (byte 22 of the body): send the text as UTF-8");
  CHECK(refusal(R"({"pages": ["ok", "smile \ud83d"]})").second ==
        "page 2's text holds half of a UTF-16 surrogate pair (\\ud800 to \\udfff alone, "
        "byte 31 of the body): an emoji or other character cut in two; send whole characters");
  // UTF-8 out of place is named for what it is, not as text that is not UTF-8.
  CHECK(refusal("\xef\xbb\xbf{\"pages\": [\"a\"]}").second ==
        "the body is not valid JSON: an unexpected U+FEFF at byte 1 (a byte order mark, which "
        "JSON does not take: send the body without one)");
  CHECK(refusal("{\"pages\": [\"a\", \xe2\x80\x9c"
                "b\xe2\x80\x9d]}")
            .second ==
        "the body is not valid JSON: an unexpected U+201C at byte 17, after page 1 (a "
        "typographic quote: JSON's strings are in straight quotes, \")");
  CHECK(refusal(R"({"pages": ["ok" "b"]})").second ==
        "the body is not valid JSON (syntax error at byte 17, after page 1)");
  // Nesting deeper than fairlane reads is a limit, said as one.
  std::string deep =
      R"({"pages": ["a"], "meta": )" + std::string(40, '[') + std::string(40, ']') + "}";
  CHECK(refusal(deep).second ==
        "the body nests its lists and objects deeper than 32 levels (byte 57), more than "
        "fairlane reads: an upload is {\"pages\": [...]} with a few fields beside it");
  // A NUL no store keeps as text (PostgreSQL's cannot): refused on every store alike.
  CHECK(refusal(R"({"pages": ["a", "b\u0000c"]})").second ==
        "page 2 holds a NUL character (\\u0000), which a page's text may not: remove it");
  // max_tokens is checked before the pages, and names the service's default.
  for (const char* body :
       {R"({"pages": [2], "max_tokens": 0})", R"({"pages": ["a"], "max_tokens": 1000001})",
        R"({"pages": ["a"], "max_tokens": 2.5})", R"({"pages": ["a"], "max_tokens": "9"})"}) {
    CAPTURE(body);
    const auto [type, message] = refusal(body);
    CHECK(type == "invalid_request");
    CHECK(message.find("leave it out for the service's 1000") != std::string::npos);
  }
}

TEST_CASE(
    "A JSON upload is read as an object would be: the last of a field counts, nested ones "
    "are not the upload's, escapes are decoded") {
  using fairlane::service::ApiAnswer;
  using fairlane::service::JsonUpload;
  using fairlane::service::parse_json_upload;
  const auto pages = [](std::string_view body) {
    auto parsed = parse_json_upload(body, 1'000, 3);
    REQUIRE(std::holds_alternative<JsonUpload>(parsed));
    return std::get<JsonUpload>(std::move(parsed));
  };
  CHECK(pages(R"({"pages": ["a"], "pages": ["b", "c"]})").pages ==
        std::vector<std::string>{"b", "c"});
  CHECK(pages(R"({"x": {"pages": ["q"], "name": "no"}, "pages": [], "name": "yes"})").name ==
        "yes");
  const auto decoded = pages(R"({"pa\u0067es": ["\u00e9\n\"", ""], "name": 7})");
  CHECK(decoded.pages == std::vector<std::string>{"\xc3\xa9\n\"", ""});
  CHECK_FALSE(decoded.name.has_value());
  // The last "pages" decides, list or not; a page's own lists are not pages.
  CHECK(std::holds_alternative<ApiAnswer>(
      parse_json_upload(R"({"pages": ["a"], "pages": 1})", 1'000, 3)));
  const auto nested = parse_json_upload(R"({"pages": ["a", ["b", "c"]]})", 1'000, 3);
  REQUIRE(std::holds_alternative<ApiAnswer>(nested));
  CHECK(std::string(std::get<ApiAnswer>(nested).body.at("error").at("message").as_string())
            .starts_with("page 2 is not text"));
  // Past the limit pages are only counted, whatever they hold.
  std::string many = R"({"pages": [)";
  for (int i = 0; i < 100'000; ++i) many += i == 0 ? R"("")" : R"(,"",1,[])";
  many += "]}";
  const auto refused = parse_json_upload(many, 1'000, 3);
  REQUIRE(std::holds_alternative<ApiAnswer>(refused));
  CHECK(std::get<ApiAnswer>(refused).status == 413);
  CHECK(std::string(std::get<ApiAnswer>(refused).body.at("error").at("message").as_string())
            .find("299998 pages") != std::string::npos);
}
