#include <doctest/doctest.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <string>

#include "fairlane/store/store.hpp"
#include "support/store.hpp"
#include "support/store_home.hpp"

using namespace std::chrono_literals;
using fairlane::JobRequest;
using fairlane::JobState;
using fairlane::PageState;
using fairlane::PageTransition;
using fairlane::StatusCode;
using fairlane::StoreOptions;
using fairlane::Usage;
using fairlane::WallTime;
using fairlane::testing::apply;
using fairlane::testing::enqueue;
using fairlane::testing::job_view;
using fairlane::testing::ManualWallClock;
using fairlane::testing::numbered_pages;
using fairlane::testing::open_store;
using fairlane::testing::TempDir;

namespace {

// A store with two users: SQLite in memory, or wherever `home` keeps its stores.
struct Fixture {
  Fixture() : Fixture(nullptr) {}
  explicit Fixture(fairlane::testing::StoreHome& home) : Fixture(&home) {}

  ManualWallClock wall;
  std::unique_ptr<fairlane::Store> store;
  fairlane::UserId alice = 0;
  fairlane::UserId bob = 0;

 private:
  explicit Fixture(fairlane::testing::StoreHome* home) {
    const StoreOptions options{.usd_per_million_tokens = 3.0, .wall_clock = wall.function()};
    store = home != nullptr ? home->open(options) : open_store(":memory:", options);
    alice = store->add_user("alice").value().user.id;
    bob = store->add_user("bob", 2).value().user.id;
  }
};

}  // namespace

TEST_CASE("A new user's key is shown once, finds the user, and only its SHA-256 is stored") {
  TempDir dir;
  const std::string path = dir.file("users.db");
  std::string key;
  {
    auto store = open_store(path);
    auto added = store->add_user("carol", 3);
    REQUIRE(added.ok());
    key = added->key;
    CHECK(key.size() == 67);  // "fl_" + 64 hex digits
    CHECK(key.rfind("fl_", 0) == 0);
    CHECK(added->user.weight == 3);

    auto found = store->find_user_by_key(key);
    REQUIRE(found.ok());
    CHECK(found->name == "carol");
    CHECK(found->id == added->user.id);
    CHECK(store->find_user_by_key(key + "x").status().code() == StatusCode::not_found);
    CHECK(store->add_user("dave")->key != key);
  }
  // The file holds the digest, never the key.
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT hex(key_sha256) FROM users WHERE name = 'carol'", -1,
                             &stmt, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(stmt) == SQLITE_ROW);
  const std::string stored = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
  // SHA-256 of the whole key, computed here with OpenSSL rather than the store's helper.
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int digest_size = 0;
  REQUIRE(EVP_Digest(key.data(), key.size(), digest.data(), &digest_size, EVP_sha256(), nullptr) ==
          1);
  REQUIRE(digest_size == 32);
  std::string expected;
  for (unsigned int i = 0; i < digest_size; ++i) expected += fmt::format("{:02X}", digest[i]);
  CHECK(stored == expected);
  CHECK(stored.find(key.substr(3, 16)) == std::string::npos);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  std::string file_bytes;
  {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    REQUIRE(f != nullptr);
    char buffer[4096];
    std::size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) file_bytes.append(buffer, n);
    std::fclose(f);
  }
  CHECK(file_bytes.find(key) == std::string::npos);
}

FAIRLANE_STORE_TEST_CASE("User names are unique and checked, weights are 1 to 1000",
                         sqlite_memory) {
  Fixture f(home);
  CHECK(f.store->add_user("alice").status().code() == StatusCode::already_exists);
  CHECK(f.store->add_user("").status().code() == StatusCode::invalid_argument);
  CHECK(f.store->add_user("no spaces").status().code() == StatusCode::invalid_argument);
  CHECK(f.store->add_user("erin", 0).status().code() == StatusCode::invalid_argument);
  CHECK(f.store->add_user("erin", 1001).status().code() == StatusCode::invalid_argument);

  CHECK(f.store->set_weight("alice", 5).ok());
  CHECK(f.store->find_user_by_name("alice")->weight == 5);
  CHECK(f.store->set_weight("nobody", 5).code() == StatusCode::not_found);
  CHECK(f.store->set_weight("alice", 0).code() == StatusCode::invalid_argument);
}

FAIRLANE_STORE_TEST_CASE(
    "Enqueue writes the job and its pages: counts, state, ids in lane order, texts",
    sqlite_memory) {
  Fixture f(home);
  const auto job = enqueue(*f.store, f.alice, 3);
  CHECK(job.created);
  CHECK(job.job.public_id.rfind("job_", 0) == 0);
  CHECK(job.job.public_id.size() == 28);
  CHECK(job.job.state == JobState::queued);
  CHECK(job.job.pages.total == 3);
  CHECK(job.job.pages.queued == 3);
  CHECK(job.job.user_name == "alice");
  CHECK(job.job.created_at == f.wall.now);
  REQUIRE(job.pages.size() == 3);
  CHECK(job.pages[0].page_id < job.pages[1].page_id);
  CHECK(job.pages[1].page_id < job.pages[2].page_id);
  CHECK(job.pages[2].estimated_tokens == 100);

  CHECK(f.store->page_call(job.pages[1].page_id)->text == "page 2");
  CHECK(f.store->page_call(job.pages[1].page_id)->max_tokens == 200);
  CHECK(f.store->page_call(999'999).status().code() == fairlane::StatusCode::not_found);
  const auto stored = job_view(*f.store, job.job.id);
  CHECK(stored.public_id == job.job.public_id);
  CHECK(stored.state == JobState::queued);
  CHECK(stored.pages.queued == 3);
  CHECK_FALSE(stored.started_at.has_value());
  CHECK_FALSE(stored.finished_at.has_value());
  CHECK(f.store->job_of(job.job.public_id, f.alice).ok());
}

FAIRLANE_STORE_TEST_CASE("Bad uploads are refused with a reason and leave no job behind",
                         sqlite_memory) {
  Fixture f(home);
  CHECK(f.store->enqueue_job(JobRequest{f.alice, "empty.pdf", {}, 200, {}}).status().code() ==
        StatusCode::invalid_argument);
  CHECK(f.store->enqueue_job(JobRequest{f.alice, "x.pdf", numbered_pages(2), 0, {}})
            .status()
            .code() == StatusCode::invalid_argument);
  CHECK(f.store->enqueue_job(JobRequest{f.alice, "", numbered_pages(2), 200, {}}).status().code() ==
        StatusCode::invalid_argument);
  CHECK(
      f.store->enqueue_job(JobRequest{999, "x.pdf", numbered_pages(2), 200, {}}).status().code() ==
      StatusCode::not_found);
  const auto empty = f.store->enqueue_job(JobRequest{f.alice, "empty.pdf", {}, 200, {}});
  CHECK(empty.status().message().find("at least one page") != std::string::npos);
  CHECK(f.store->jobs_of(f.alice, 10)->jobs.empty());
  CHECK(f.store->load_lanes()->empty());
}

FAIRLANE_STORE_TEST_CASE("A repeated idempotency key returns the first job unchanged",
                         sqlite_memory) {
  Fixture f(home);
  const auto first = enqueue(*f.store, f.alice, 3, "book.pdf", "upload-1");
  const auto again = enqueue(*f.store, f.alice, 5, "other.pdf", "upload-1");
  CHECK_FALSE(again.created);
  CHECK(again.pages.empty());
  CHECK(again.job.public_id == first.job.public_id);
  CHECK(again.job.pages.total == 3);
  CHECK(again.job.name == "book.pdf");

  // The key is per user, and another key is another job.
  CHECK(enqueue(*f.store, f.bob, 2, "bob.pdf", "upload-1").created);
  CHECK(enqueue(*f.store, f.alice, 2, "book2.pdf", "upload-2").created);
  CHECK(f.store->jobs_of(f.alice, 10)->jobs.size() == 2);
}

FAIRLANE_STORE_TEST_CASE("What an upload under a key was comes back with its job", sqlite_memory) {
  Fixture f(home);
  fairlane::JobRequest request{
      f.alice, "book.pdf", {fairlane::PageInput{"page", 10}}, 200, "upload-1"};
  request.upload_head = "application/pdf 48213";
  request.upload_digest = std::string(64, 'a');
  const auto first = f.store->enqueue_job(request);
  REQUIRE(first.ok());
  const auto keyed = f.store->job_by_idempotency_key(f.alice, "upload-1");
  REQUIRE(keyed.ok());
  CHECK(keyed->job.public_id == first->job.public_id);
  CHECK(keyed->upload_head == "application/pdf 48213");
  CHECK(keyed->upload_digest == std::string(64, 'a'));
  // Chunked (no head), or stored without either: std::nullopt, not "".
  request.idempotency_key = "upload-2";
  request.upload_head.reset();
  REQUIRE(f.store->enqueue_job(request).ok());
  const auto chunked = f.store->job_by_idempotency_key(f.alice, "upload-2");
  REQUIRE(chunked.ok());
  CHECK_FALSE(chunked->upload_head);
  CHECK(chunked->upload_digest == std::string(64, 'a'));
  const auto bare = enqueue(*f.store, f.alice, 1, "old.pdf", "upload-3");
  const auto old = f.store->job_by_idempotency_key(f.alice, "upload-3");
  REQUIRE(old.ok());
  CHECK(old->job.public_id == bare.job.public_id);
  CHECK_FALSE(old->upload_head);
  CHECK_FALSE(old->upload_digest);
}

FAIRLANE_STORE_TEST_CASE(
    "A job's promise is written with it, and set again in its place, durably and only its own",
    sqlite_memory) {
  Fixture f(home);
  JobRequest request{f.alice, "book.pdf", fairlane::testing::numbered_pages(3), 100};
  request.promised_eta_s = 30.0;
  const auto first = f.store->enqueue_job(request);
  REQUIRE(first.ok());
  const auto other = f.store->enqueue_job(request);
  REQUIRE(other.ok());
  CHECK(first->job.promised_eta_at == f.wall.now + std::chrono::seconds(30));

  const fairlane::WallTime later = f.wall.now + std::chrono::seconds(95);
  REQUIRE(f.store->set_promise(first->job.id, later).ok());
  const auto view = job_view(*f.store, first->job.id);
  CHECK(view.promised_eta_at == later);
  CHECK_FALSE(view.eta_revised_at.has_value());  // a promise made, not one broken
  CHECK(job_view(*f.store, other->job.id).promised_eta_at == f.wall.now + std::chrono::seconds(30));
}

FAIRLANE_STORE_TEST_CASE(
    "Dispatch and completion: a job's counts, state, usage and cost after every transition",
    sqlite_memory) {
  Fixture f(home);
  const auto job = enqueue(*f.store, f.alice, 2);
  const auto p1 = job.pages[0].page_id;
  const auto p2 = job.pages[1].page_id;

  f.wall.advance(1s);
  CHECK(apply(*f.store, {PageTransition::dispatched(p1, 300)}) == std::vector<std::int64_t>{1});
  auto view = job_view(*f.store, job.job.id);
  CHECK(view.state == JobState::running);
  CHECK(view.pages.queued == 1);
  CHECK(view.pages.in_flight == 1);
  CHECK(view.started_at == f.wall.now);

  f.wall.advance(2s);
  apply(*f.store, {PageTransition::completed(p1, "text one", Usage{120, 80})});
  view = job_view(*f.store, job.job.id);
  CHECK(view.state == JobState::running);
  CHECK(view.pages.in_flight == 0);
  CHECK(view.pages.done == 1);
  CHECK(view.usage.input_tokens == 120);
  CHECK(view.usage.output_tokens == 80);
  CHECK(view.cost_usd == doctest::Approx(200 * 3.0 / 1e6));

  apply(*f.store, {PageTransition::dispatched(p2, 300),
                   PageTransition::completed(p2, "text two", Usage{100, 50})});
  view = job_view(*f.store, job.job.id);
  CHECK(view.state == JobState::done);
  CHECK(view.pages.done == 2);
  CHECK(view.pages.queued + view.pages.in_flight + view.pages.failed + view.pages.cancelled == 0);
  CHECK(view.usage.input_tokens == 220);
  CHECK(view.finished_at == f.wall.now);

  const auto results = f.store->results(job.job.id).value();
  REQUIRE(results.size() == 2);
  CHECK(results[0].seq == 0);
  CHECK(results[0].state == PageState::done);
  CHECK(results[0].output == "text one");
  CHECK(results[1].output == "text two");
  CHECK(results[1].usage.output_tokens == 50);
}

FAIRLANE_STORE_TEST_CASE("A job's results are read a range at a time, in page order",
                         sqlite_memory) {
  Fixture f(home);
  const auto job = enqueue(*f.store, f.alice, 5);
  const auto seqs = [&](std::int64_t from_seq, std::int64_t limit) {
    std::vector<std::int64_t> read;
    for (const fairlane::PageResult& page :
         f.store->results_from(job.job.id, from_seq, limit).value()) {
      read.push_back(page.seq);
    }
    return read;
  };
  CHECK(seqs(0, 2) == std::vector<std::int64_t>{0, 1});
  CHECK(seqs(2, 2) == std::vector<std::int64_t>{2, 3});
  CHECK(seqs(4, 2) == std::vector<std::int64_t>{4});
  CHECK(seqs(5, 2).empty());
  CHECK(seqs(1, 100) == std::vector<std::int64_t>{1, 2, 3, 4});
  CHECK(f.store->results(job.job.id)->size() == 5);
}

FAIRLANE_STORE_TEST_CASE("A page completed twice keeps its first result", sqlite_memory) {
  Fixture f(home);
  const auto job = enqueue(*f.store, f.alice, 1);
  const auto page = job.pages[0].page_id;
  apply(*f.store, {PageTransition::dispatched(page, 300)});
  CHECK(apply(*f.store, {PageTransition::completed(page, "first", Usage{10, 10}),
                         PageTransition::completed(page, "second", Usage{99, 99})}) ==
        std::vector<std::int64_t>{1, 0});
  CHECK(f.store->results(job.job.id)->front().output == "first");
  CHECK(job_view(*f.store, job.job.id).usage.input_tokens == 10);
  // Nor can a finished page be dispatched again.
  CHECK(apply(*f.store, {PageTransition::dispatched(page, 300)}) == std::vector<std::int64_t>{0});
}

FAIRLANE_STORE_TEST_CASE(
    "A failed attempt returns the page to queued with its reason, attempt count and backoff",
    sqlite_memory) {
  Fixture f(home);
  const auto job = enqueue(*f.store, f.alice, 2);
  const auto page = job.pages[0].page_id;
  const WallTime retry_at = f.wall.now + 4s;
  apply(*f.store, {PageTransition::dispatched(page, 300),
                   PageTransition::attempt_failed(page, "provider answered 500", retry_at)});
  auto view = job_view(*f.store, job.job.id);
  CHECK(view.state == JobState::running);
  CHECK(view.pages.queued == 2);
  const auto results = f.store->results(job.job.id).value();
  CHECK(results[0].attempts == 1);
  CHECK(results[0].error == "provider answered 500");
  CHECK(results[0].state == PageState::queued);

  const auto lanes = f.store->load_lanes().value();
  REQUIRE(lanes.size() == 1);
  CHECK(lanes[0].pages[0].page_id == page);
  CHECK(lanes[0].pages[0].not_before == retry_at);
  CHECK_FALSE(lanes[0].pages[1].not_before.has_value());

  // A 429 returns it without spending an attempt.
  apply(*f.store, {PageTransition::dispatched(page, 300), PageTransition::requeued(page)});
  CHECK(f.store->results(job.job.id)->front().attempts == 1);
}

FAIRLANE_STORE_TEST_CASE("A page that fails for good makes its job failed once nothing is left",
                         sqlite_memory) {
  Fixture f(home);
  const auto job = enqueue(*f.store, f.alice, 2);
  const auto p1 = job.pages[0].page_id;
  const auto p2 = job.pages[1].page_id;
  apply(*f.store, {PageTransition::dispatched(p1, 300),
                   PageTransition::failed(p1, "gave up after 5 attempts: provider answered 503")});
  CHECK(job_view(*f.store, job.job.id).state == JobState::running);
  apply(*f.store,
        {PageTransition::dispatched(p2, 300), PageTransition::completed(p2, "ok", Usage{1, 1})});
  const auto view = job_view(*f.store, job.job.id);
  CHECK(view.state == JobState::failed);
  CHECK(view.pages.failed == 1);
  CHECK(view.pages.done == 1);
  CHECK(view.finished_at.has_value());
  const auto results = f.store->results(job.job.id).value();
  CHECK(results[0].state == PageState::failed);
  CHECK(results[0].error == "gave up after 5 attempts: provider answered 503");
  CHECK_FALSE(results[0].output.has_value());
}

FAIRLANE_STORE_TEST_CASE(
    "Cancel takes the queued pages only, in-flight ones finish, then the job is cancelled",
    sqlite_memory) {
  Fixture f(home);
  const auto job = enqueue(*f.store, f.alice, 4);
  const auto p1 = job.pages[0].page_id;
  apply(*f.store, {PageTransition::dispatched(p1, 300)});
  CHECK(f.store->cancel_job(job.job.id).value() == 3);
  auto view = job_view(*f.store, job.job.id);
  CHECK(view.state == JobState::running);
  CHECK(view.pages.cancelled == 3);
  CHECK(view.pages.in_flight == 1);
  CHECK_FALSE(view.finished_at.has_value());

  // A cancelled page cannot be dispatched.
  CHECK(apply(*f.store, {PageTransition::dispatched(job.pages[1].page_id, 300)}) ==
        std::vector<std::int64_t>{0});

  apply(*f.store, {PageTransition::completed(p1, "kept", Usage{1, 1})});
  view = job_view(*f.store, job.job.id);
  CHECK(view.state == JobState::cancelled);
  CHECK(view.pages.done == 1);
  CHECK(view.finished_at.has_value());
  CHECK(f.store->results(job.job.id)->front().output == "kept");
  CHECK(f.store->cancel_job(job.job.id).value() == 0);
}

FAIRLANE_STORE_TEST_CASE(
    "A cancellation after a dispatch in the same batch leaves that page in flight", sqlite_memory) {
  Fixture f(home);
  const auto job = enqueue(*f.store, f.alice, 2);
  CHECK(apply(*f.store, {PageTransition::dispatched(job.pages[0].page_id, 300),
                         PageTransition::job_cancelled(job.job.id)}) ==
        std::vector<std::int64_t>{1, 1});
  const auto view = job_view(*f.store, job.job.id);
  CHECK(view.pages.in_flight == 1);
  CHECK(view.pages.cancelled == 1);
}

FAIRLANE_STORE_TEST_CASE(
    "Restart: pages in flight go back to the head of their lanes with their attempts kept",
    sqlite_file) {
  fairlane::JobId alice_job = 0;
  std::vector<fairlane::PageId> alice_pages;
  {
    auto store = home.open();
    const auto alice = store->add_user("alice").value().user.id;
    const auto bob = store->add_user("bob", 3).value().user.id;
    const auto a = enqueue(*store, alice, 4);
    enqueue(*store, bob, 2);
    const auto a2 = enqueue(*store, alice, 1, "second.pdf");
    alice_job = a.job.id;
    for (const auto& page : a.pages) alice_pages.push_back(page.page_id);
    alice_pages.push_back(a2.pages[0].page_id);
    // The first page failed once and went back; then the first two are in flight.
    apply(*store, {PageTransition::dispatched(alice_pages[0], 300),
                   PageTransition::attempt_failed(alice_pages[0], "timeout", WallTime{}),
                   PageTransition::dispatched(alice_pages[0], 300),
                   PageTransition::dispatched(alice_pages[1], 300)});
    CHECK(job_view(*store, alice_job).pages.in_flight == 2);
  }  // the process ends with two calls in flight

  auto store = home.open();
  const auto lanes = store->load_lanes().value();
  REQUIRE(lanes.size() == 2);
  CHECK(lanes[0].weight == 1);
  CHECK(lanes[1].weight == 3);
  CHECK(lanes[1].pages.size() == 2);
  REQUIRE(lanes[0].pages.size() == 5);
  for (std::size_t i = 0; i < 5; ++i) CHECK(lanes[0].pages[i].page_id == alice_pages[i]);
  CHECK(lanes[0].pages[4].job_id != alice_job);

  const auto view = job_view(*store, alice_job);
  CHECK(view.pages.in_flight == 0);
  CHECK(view.pages.queued == 4);
  CHECK(view.state == JobState::running);
  CHECK(store->results(alice_job)->front().attempts == 1);
  CHECK(lanes[0].pages[0].attempts == 1);
  CHECK(lanes[0].pages[1].attempts == 0);
  // Loading again changes nothing.
  CHECK(store->load_lanes()->at(0).pages.size() == 5);
}

FAIRLANE_STORE_TEST_CASE("recent_spend counts calls of the window, with actual tokens once known",
                         sqlite_memory) {
  Fixture f(home);
  const auto job = enqueue(*f.store, f.alice, 3);
  const auto& pages = job.pages;
  apply(*f.store, {PageTransition::dispatched(pages[0].page_id, 300),
                   PageTransition::dispatched(pages[1].page_id, 300)});
  f.wall.advance(30s);
  apply(*f.store, {PageTransition::completed(pages[0].page_id, "ok", Usage{100, 20}),
                   PageTransition::attempt_failed(pages[1].page_id, "reset", f.wall.now),
                   PageTransition::dispatched(pages[2].page_id, 500)});
  auto spend = f.store->recent_spend(60s).value();
  CHECK(spend.requests == 3);
  CHECK(spend.tokens == 120 + 0 + 500);

  f.wall.advance(31s);  // the first two calls are now 61 s old
  spend = f.store->recent_spend(60s).value();
  CHECK(spend.requests == 1);
  CHECK(spend.tokens == 500);
}

FAIRLANE_STORE_TEST_CASE(
    "recent_calls: the last calls that ended with usage, oldest first, with reservation and time",
    sqlite_memory) {
  Fixture f(home);
  const auto job = enqueue(*f.store, f.alice, 4);
  const auto& pages = job.pages;
  apply(*f.store, {PageTransition::dispatched(pages[0].page_id, pages[0].estimated_tokens),
                   PageTransition::dispatched(pages[1].page_id, pages[1].estimated_tokens)});
  f.wall.advance(500ms);
  apply(*f.store, {PageTransition::dispatched(pages[2].page_id, pages[2].estimated_tokens)});
  f.wall.advance(1s);
  apply(*f.store, {PageTransition::completed(pages[0].page_id, "ok", Usage{100, 20})});
  f.wall.advance(1s);
  // A call that failed used nothing the provider reported, and one still out has not ended:
  // neither says what a call costs.
  apply(*f.store, {PageTransition::attempt_failed(pages[1].page_id, "reset", f.wall.now),
                   PageTransition::dispatched(pages[3].page_id, pages[3].estimated_tokens)});
  f.wall.advance(1s);
  apply(*f.store, {PageTransition::completed(pages[2].page_id, "ok", Usage{200, 40})});

  const auto calls = f.store->recent_calls(10).value();
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].tokens == 120);
  CHECK(calls[0].reserved_tokens == pages[0].estimated_tokens);
  CHECK(calls[0].latency == 1500ms);
  CHECK(calls[1].tokens == 240);
  CHECK(calls[1].reserved_tokens == pages[2].estimated_tokens);
  CHECK(calls[1].latency == 3000ms);
  // At most as many as asked for: the newest.
  const auto newest = f.store->recent_calls(1).value();
  REQUIRE(newest.size() == 1);
  CHECK(newest[0].tokens == 240);
  CHECK(f.store->recent_calls(0)->empty());
}

FAIRLANE_STORE_TEST_CASE(
    "recent_jobs: the jobs created since a time, the newest so many, oldest first, and the first",
    sqlite_memory) {
  Fixture f(home);
  const auto none = f.store->recent_jobs(f.wall.now - 60s, 10).value();
  CHECK(none.jobs.empty());
  CHECK_FALSE(none.first_job_at);

  const fairlane::WallTime start = f.wall.now;
  const auto a = enqueue(*f.store, f.alice, 2);
  f.wall.advance(10s);
  const auto b = enqueue(*f.store, f.bob, 3);
  f.wall.advance(10s);
  apply(*f.store, {PageTransition::dispatched(a.pages[0].page_id, 300),
                   PageTransition::dispatched(a.pages[1].page_id, 300)});
  apply(*f.store, {PageTransition::completed(a.pages[0].page_id, "ok", Usage{100, 20}),
                   PageTransition::completed(a.pages[1].page_id, "ok", Usage{100, 20})});
  const fairlane::WallTime a_done = f.wall.now;
  f.wall.advance(10s);
  enqueue(*f.store, f.alice, 1);

  const auto all = f.store->recent_jobs(start - 1s, 10).value();
  REQUIRE(all.first_job_at);
  CHECK(*all.first_job_at == start);
  REQUIRE(all.jobs.size() == 3);
  CHECK(all.jobs[0].id == a.job.id);
  CHECK(all.jobs[0].user_id == f.alice);
  CHECK(all.jobs[0].pages == 2);
  CHECK(all.jobs[0].created_at == start);
  REQUIRE(all.jobs[0].finished_at);
  CHECK(*all.jobs[0].finished_at == a_done);
  CHECK(all.jobs[1].id == b.job.id);
  CHECK(all.jobs[1].user_id == f.bob);
  CHECK(all.jobs[1].pages == 3);
  CHECK(all.jobs[1].created_at == b.job.created_at);
  CHECK_FALSE(all.jobs[1].finished_at);
  CHECK(all.jobs[2].user_id == f.alice);
  CHECK(all.jobs[2].pages == 1);
  CHECK(all.jobs[2].created_at == start + 30s);
  // Only those created after the time given ...
  const auto later = f.store->recent_jobs(start + 5s, 10).value();
  REQUIRE(later.jobs.size() == 2);
  CHECK(later.jobs[0].pages == 3);
  CHECK(*later.first_job_at == start);
  // ... and of those, the newest so many.
  const auto newest = f.store->recent_jobs(start - 1s, 2).value();
  REQUIRE(newest.jobs.size() == 2);
  CHECK(newest.jobs[0].pages == 3);
  CHECK(newest.jobs[1].pages == 1);
  CHECK(f.store->recent_jobs(start - 1s, 0)->jobs.empty());
}

FAIRLANE_STORE_TEST_CASE(
    "Jobs read by the set come in id order, each once, without the ids that do not exist",
    sqlite_memory) {
  Fixture f(home);
  std::vector<fairlane::JobId> ids;
  for (int i = 0; i < 300; ++i) {
    ids.push_back(enqueue(*f.store, i % 3 == 0 ? f.bob : f.alice, 1 + i % 2).job.id);
  }
  // Asked out of order, one twice, and with an id no job has.
  const std::vector<fairlane::JobId> asked{ids[7], ids[2], 999'999, ids[299], ids[2]};
  const auto read = f.store->jobs(asked);
  REQUIRE_MESSAGE(read.ok(), read.status().message());
  REQUIRE(read->size() == 3);
  CHECK(read->at(0).id == ids[2]);
  CHECK(read->at(1).id == ids[7]);
  CHECK(read->at(2).id == ids[299]);
  // Each the view job() reads.
  for (const fairlane::JobView& view : read.value()) {
    const auto one = job_view(*f.store, view.id);
    CHECK(view.public_id == one.public_id);
    CHECK(view.user_name == one.user_name);
    CHECK(view.pages.total == one.pages.total);
    CHECK(view.created_at == one.created_at);
  }
  // All at once, and none.
  const auto all = f.store->jobs(ids);
  REQUIRE(all.ok());
  REQUIRE(all->size() == ids.size());
  CHECK(all->back().id == ids.back());
  const auto none = f.store->jobs({});
  REQUIRE(none.ok());
  CHECK(none->empty());
}

FAIRLANE_STORE_TEST_CASE("A user's jobs come newest first, a page at a time, and only their own",
                         sqlite_memory) {
  Fixture f(home);
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(enqueue(*f.store, f.alice, 1).job.public_id);
  enqueue(*f.store, f.bob, 1);

  auto page = f.store->jobs_of(f.alice, 2).value();
  REQUIRE(page.jobs.size() == 2);
  CHECK(page.jobs[0].public_id == ids[4]);
  CHECK(page.jobs[1].public_id == ids[3]);
  REQUIRE(page.next_cursor);
  page = f.store->jobs_of(f.alice, 2, *page.next_cursor).value();
  CHECK(page.jobs[0].public_id == ids[2]);
  CHECK(page.jobs[1].public_id == ids[1]);
  page = f.store->jobs_of(f.alice, 2, *page.next_cursor).value();
  REQUIRE(page.jobs.size() == 1);
  CHECK(page.jobs[0].public_id == ids[0]);
  CHECK_FALSE(page.next_cursor);

  CHECK(f.store->jobs_of(f.alice, 2, "job_nope").status().code() == StatusCode::invalid_argument);
  CHECK(f.store->jobs_of(f.bob, 10)->jobs.size() == 1);
  CHECK(f.store->job_of(ids[0], f.bob).status().code() == StatusCode::not_found);
}

FAIRLANE_STORE_TEST_CASE(
    "A cancelled job's page that comes back unanswered is cancelled, not queued again",
    sqlite_memory) {
  Fixture f(home);
  const auto job = enqueue(*f.store, f.alice, 4);
  const auto& p = job.pages;
  apply(*f.store, {PageTransition::dispatched(p[0].page_id, 300),
                   PageTransition::dispatched(p[1].page_id, 300),
                   PageTransition::dispatched(p[2].page_id, 300)});
  CHECK(f.store->cancel_job(job.job.id).value() == 1);
  // A 429 and a failed attempt return their pages: to cancelled, since the job was.
  CHECK(apply(*f.store, {PageTransition::requeued(p[0].page_id),
                         PageTransition::attempt_failed(p[1].page_id, "timeout", f.wall.now)}) ==
        std::vector<std::int64_t>{1, 1});
  auto view = job_view(*f.store, job.job.id);
  CHECK(view.pages.cancelled == 3);
  CHECK(view.pages.queued == 0);
  CHECK(view.pages.in_flight == 1);
  CHECK(f.store->load_lanes()->empty());  // and a restart turns the last one to cancelled too
  view = job_view(*f.store, job.job.id);
  CHECK(view.pages.cancelled == 4);
  CHECK(view.state == JobState::cancelled);
  CHECK(view.finished_at == f.wall.now);
  CHECK(f.store->cancel_job(987'654).status().code() == StatusCode::not_found);
}

FAIRLANE_STORE_TEST_CASE("A job cancelled before any dispatch is cancelled and finished at once",
                         sqlite_memory) {
  Fixture f(home);
  const auto job = enqueue(*f.store, f.alice, 3);
  f.wall.advance(7s);
  CHECK(f.store->cancel_job(job.job.id).value() == 3);
  const auto view = job_view(*f.store, job.job.id);
  CHECK(view.state == JobState::cancelled);
  CHECK(view.finished_at == f.wall.now);
  CHECK_FALSE(view.started_at.has_value());
}

FAIRLANE_STORE_TEST_CASE(
    "A job with a failed page and cancelled ones ends cancelled: the owner's choice wins",
    sqlite_memory) {
  Fixture f(home);
  const auto job = enqueue(*f.store, f.alice, 3);
  apply(*f.store, {PageTransition::dispatched(job.pages[0].page_id, 300),
                   PageTransition::failed(job.pages[0].page_id, "gave up")});
  CHECK(f.store->cancel_job(job.job.id).value() == 2);
  CHECK(job_view(*f.store, job.job.id).state == JobState::cancelled);
}

FAIRLANE_STORE_TEST_CASE(
    "Each call of a page has its number: a late answer of an older call changes nothing",
    sqlite_memory) {
  Fixture f(home);
  const auto job = enqueue(*f.store, f.alice, 1);
  const auto page = job.pages[0].page_id;
  const auto first = apply(*f.store, {PageTransition::dispatched(page, 300)});
  CHECK(first == std::vector<std::int64_t>{1});
  const auto started = job_view(*f.store, job.job.id).started_at;
  f.wall.advance(30s);
  apply(*f.store, {PageTransition::attempt_failed(page, "timeout", f.wall.now, 1)});
  CHECK(apply(*f.store, {PageTransition::dispatched(page, 300)}) == std::vector<std::int64_t>{2});
  CHECK(job_view(*f.store, job.job.id).started_at == started);  // the first dispatch stays

  // Call 1's answer arrives late: it is not call 2's.
  CHECK(apply(*f.store, {PageTransition::completed(page, "late", Usage{7, 7}, 1)}) ==
        std::vector<std::int64_t>{0});
  CHECK(apply(*f.store, {PageTransition::completed(page, "current", Usage{100, 20}, 2)}) ==
        std::vector<std::int64_t>{1});
  CHECK(f.store->results(job.job.id)->front().output == "current");
  // Spend: call 1 failed before usage (0), call 2 used 120.
  CHECK(f.store->recent_spend(60s)->requests == 2);
  CHECK(f.store->recent_spend(60s)->tokens == 120);
}

FAIRLANE_STORE_TEST_CASE(
    "Spend: a second completion does not rewrite it, failures and 429s zero it but count the "
    "call",
    sqlite_memory) {
  Fixture f(home);
  const auto job = enqueue(*f.store, f.alice, 3);
  const auto& p = job.pages;
  apply(*f.store,
        {PageTransition::dispatched(p[0].page_id, 300),
         PageTransition::completed(p[0].page_id, "one", Usage{50, 50}),
         PageTransition::completed(p[0].page_id, "two", Usage{900, 900}),
         PageTransition::dispatched(p[1].page_id, 300), PageTransition::requeued(p[1].page_id),
         PageTransition::dispatched(p[2].page_id, 300),
         PageTransition::failed(p[2].page_id, "gave up")});
  const auto spend = f.store->recent_spend(60s).value();
  CHECK(spend.requests == 3);
  CHECK(spend.tokens == 100);
}

FAIRLANE_STORE_TEST_CASE("A page that is done cannot fail afterwards", sqlite_memory) {
  Fixture f(home);
  const auto job = enqueue(*f.store, f.alice, 1);
  const auto page = job.pages[0].page_id;
  apply(*f.store, {PageTransition::dispatched(page, 300),
                   PageTransition::completed(page, "ok", Usage{1, 1})});
  CHECK(apply(*f.store, {PageTransition::failed(page, "too late")}) ==
        std::vector<std::int64_t>{0});
  CHECK(job_view(*f.store, job.job.id).state == JobState::done);
  CHECK(f.store->results(job.job.id)->front().state == PageState::done);
}

FAIRLANE_STORE_TEST_CASE("A list of jobs takes a limit of 1 to 1,000", sqlite_memory) {
  Fixture f(home);
  CHECK(f.store->jobs_of(f.alice, 0).status().code() == StatusCode::invalid_argument);
  CHECK(f.store->jobs_of(f.alice, 1'001).status().code() == StatusCode::invalid_argument);
  CHECK(f.store->jobs_of(f.alice, std::numeric_limits<std::size_t>::max()).status().code() ==
        StatusCode::invalid_argument);
  CHECK(f.store->jobs_of(f.alice, 1'000).ok());
}
