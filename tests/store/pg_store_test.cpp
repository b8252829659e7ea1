// PgStore (src/store/pg_store.*), what it does so far, on a database of its own on the tests'
// server (CTest fixture `postgres`).
#include "store/pg_store.hpp"

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "store/pg.hpp"
#include "support/pg.hpp"
#include "support/store.hpp"

using fairlane::JobRequest;
using fairlane::JobState;
using fairlane::PageImage;
using fairlane::PageInput;
using fairlane::PageKind;
using fairlane::PageTransition;
using fairlane::StatusCode;
using fairlane::StoreOptions;
using fairlane::store::PgStore;
using fairlane::store::pg::Connection;
using fairlane::testing::kNoPgServer;
using fairlane::testing::ManualWallClock;
using fairlane::testing::numbered_pages;
using fairlane::testing::pg_server_uri;
using fairlane::testing::PgTestDatabase;

namespace {

// A migrated database of its own, a store on it, and a second connection to look beneath.
struct Fixture {
  explicit Fixture(const std::string& server) : database(server) {
    StoreOptions options;
    options.wall_clock = clock.function();
    auto opened = PgStore::open(database.uri(), options);
    REQUIRE_MESSAGE(opened.ok(), opened.status().message());
    store = std::move(opened).value();
    auto raw_connection = Connection::open(database.uri());
    REQUIRE_MESSAGE(raw_connection.ok(), raw_connection.status().message());
    raw = std::make_unique<Connection>(std::move(raw_connection).value());
  }
  std::int64_t number(const std::string& sql) const {
    auto rows = raw->query(sql, {}, "reading beneath the store");
    REQUIRE_MESSAGE(rows.ok(), rows.status().message());
    REQUIRE(rows->size() == 1);
    return rows->int64(0, 0);
  }
  void run(const std::string& sql) const {
    const auto status = raw->exec(sql, "changing beneath the store");
    REQUIRE_MESSAGE(status.ok(), status.message());
  }

  ManualWallClock clock;
  PgTestDatabase database;
  std::unique_ptr<PgStore> store;
  std::unique_ptr<Connection> raw;
};

JobRequest job_of(fairlane::UserId user, std::vector<PageInput> pages) {
  JobRequest request;
  request.user_id = user;
  request.name = "book.pdf";
  request.pages = std::move(pages);
  request.max_tokens = 500;
  return request;
}

}  // namespace

TEST_CASE("PostgreSQL: PgStore adds users and finds them by key and by name") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Fixture f(*server);
  auto ann = f.store->add_user("ann", 3);
  REQUIRE_MESSAGE(ann.ok(), ann.status().message());
  CHECK(ann->key.starts_with("fl_"));
  CHECK(ann->key.size() == 3 + 64);
  auto bo = f.store->add_user("bo", 1);
  REQUIRE(bo.ok());
  CHECK(bo->user.id > ann->user.id);

  auto by_key = f.store->find_user_by_key(ann->key);
  REQUIRE(by_key.ok());
  CHECK(by_key->id == ann->user.id);
  CHECK(by_key->name == "ann");
  CHECK(by_key->weight == 3);
  CHECK(f.store->find_user_by_name("bo")->id == bo->user.id);
  CHECK(f.store->find_user_by_key("fl_nope").status().code() == StatusCode::not_found);
  CHECK(f.store->find_user_by_name("cy").status().code() == StatusCode::not_found);
  CHECK(f.store->users()->size() == 2);
  // The key itself is not stored: only its 32-byte SHA-256.
  CHECK(f.number("SELECT octet_length(key_sha256) FROM users WHERE name = 'ann'") == 32);
  CHECK(f.number("SELECT created_at FROM users WHERE name = 'ann'") == 1'800'000'000'000);

  auto again = f.store->add_user("ann", 1);
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().code() == StatusCode::already_exists);
  CHECK(again.status().message() == "a user named 'ann' exists already: pick another name");
  CHECK(f.store->add_user("a b", 1).status().code() == StatusCode::invalid_argument);
  CHECK(f.store->add_user("cy", 1001).status().code() == StatusCode::invalid_argument);
}

TEST_CASE(
    "PostgreSQL: PgStore enqueues a 100-page job in one round trip, its pages in lane order") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Fixture f(*server);
  const auto ann = f.store->add_user("ann", 2).value();
  const auto before = f.store->round_trips();
  auto enqueued = f.store->enqueue_job(job_of(ann.user.id, numbered_pages(100, 70)));
  REQUIRE_MESSAGE(enqueued.ok(), enqueued.status().message());
  CHECK(f.store->round_trips() - before == 1);

  CHECK(enqueued->created);
  CHECK(enqueued->job.public_id.starts_with("job_"));
  CHECK(enqueued->job.user_name == "ann");
  CHECK(enqueued->job.pages.total == 100);
  CHECK(enqueued->job.pages.queued == 100);
  CHECK(enqueued->job.state == JobState::queued);
  REQUIRE(enqueued->pages.size() == 100);
  for (std::size_t i = 1; i < enqueued->pages.size(); ++i) {
    CHECK(enqueued->pages[i].page_id > enqueued->pages[i - 1].page_id);
  }
  CHECK(enqueued->pages[0].estimated_tokens == 70);
  CHECK(enqueued->pages[0].job_id == enqueued->job.id);
  // Page ids follow page order, and each page's text is its own.
  CHECK(f.number("SELECT count(*) FROM pages p JOIN page_texts t ON t.page_id = p.id "
                 "WHERE t.text = 'page ' || (p.seq + 1)") == 100);
  CHECK(f.number("SELECT count(*) FROM pages a JOIN pages b ON a.seq < b.seq AND a.id > b.id") ==
        0);

  auto view = f.store->job(enqueued->job.id);
  REQUIRE_MESSAGE(view.ok(), view.status().message());
  CHECK(view->public_id == enqueued->job.public_id);
  CHECK(view->pages.queued == 100);
  CHECK(view->max_tokens == 500);
  CHECK(view->created_at == f.clock.now);

  auto lanes = f.store->load_lanes();
  REQUIRE_MESSAGE(lanes.ok(), lanes.status().message());
  REQUIRE(lanes->size() == 1);
  CHECK((*lanes)[0].user_id == ann.user.id);
  CHECK((*lanes)[0].weight == 2);
  REQUIRE((*lanes)[0].pages.size() == 100);
  for (std::size_t i = 0; i < 100; ++i) {
    CHECK((*lanes)[0].pages[i].page_id == enqueued->pages[i].page_id);
  }
}

TEST_CASE("PostgreSQL: PgStore keeps text, image and blank pages as the SQLite store does") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Fixture f(*server);
  const auto ann = f.store->add_user("ann", 1).value();
  const std::string png("\x89PNG\r\n\x1a\n\0\x01\"\\'", 13);
  std::vector<PageInput> pages(3);
  pages[0] = PageInput{R"(a "quoted" \ text, {with} braces)", 10, PageKind::text, std::nullopt};
  pages[1] = PageInput{"", 20, PageKind::image, PageImage{"image/png", 640, 480, png}};
  pages[2] = PageInput{"", 0, PageKind::blank, std::nullopt};
  auto enqueued = f.store->enqueue_job(job_of(ann.user.id, pages));
  REQUIRE_MESSAGE(enqueued.ok(), enqueued.status().message());
  CHECK(enqueued->job.pages.queued == 2);
  CHECK(enqueued->job.pages.done == 1);
  CHECK(enqueued->job.pages.blank == 1);
  CHECK(enqueued->job.pages.images == 1);
  REQUIRE(enqueued->pages.size() == 2);
  CHECK(enqueued->pages[1].estimated_tokens == 20);

  auto text = f.raw->query("SELECT text FROM page_texts", {}, "reading");
  REQUIRE(text.ok());
  REQUIRE(text->size() == 1);
  CHECK(text->text(0, 0) == pages[0].text);
  auto image =
      f.raw->query("SELECT media_type, width, height, bytes FROM page_images", {}, "reading");
  REQUIRE(image.ok());
  REQUIRE(image->size() == 1);
  CHECK(image->text(0, 0) == "image/png");
  CHECK(image->int64(0, 1) == 640);
  CHECK(image->int64(0, 2) == 480);
  CHECK(image->bytes(0, 3) == png);
  CHECK(f.number("SELECT count(*) FROM pages WHERE kind = 'blank' AND state = 'done' AND "
                 "output = '' AND finished_at IS NOT NULL") == 1);

  auto view = f.store->job(enqueued->job.id);
  REQUIRE(view.ok());
  CHECK(view->pages.images == 1);
  CHECK(view->pages.blank == 1);
  CHECK(view->pages.done == 1);

  std::vector<PageInput> blank(2, PageInput{"", 0, PageKind::blank, std::nullopt});
  auto all_blank = f.store->enqueue_job(job_of(ann.user.id, blank));
  REQUIRE_MESSAGE(all_blank.ok(), all_blank.status().message());
  CHECK(all_blank->pages.empty());
  CHECK(all_blank->job.state == JobState::done);
  CHECK(f.store->job(all_blank->job.id)->state == JobState::done);
}

TEST_CASE("PostgreSQL: PgStore returns the first job for a repeated idempotency key") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Fixture f(*server);
  const auto ann = f.store->add_user("ann", 1).value();
  auto request = job_of(ann.user.id, numbered_pages(3));
  request.idempotency_key = "upload-1";
  request.promised_eta_s = 30.0;
  auto first = f.store->enqueue_job(request);
  REQUIRE_MESSAGE(first.ok(), first.status().message());
  CHECK(first->created);
  CHECK(first->job.promised_eta_at == f.clock.now + std::chrono::seconds(30));
  request.pages = numbered_pages(5);
  auto second = f.store->enqueue_job(request);
  REQUIRE_MESSAGE(second.ok(), second.status().message());
  CHECK_FALSE(second->created);
  CHECK(second->pages.empty());
  CHECK(second->job.id == first->job.id);
  CHECK(second->job.pages.total == 3);
  CHECK(second->job.promised_eta_at == f.clock.now + std::chrono::seconds(30));
  CHECK(f.number("SELECT count(*) FROM pages") == 3);
}

TEST_CASE(
    "PostgreSQL: PgStore refuses a job of an unknown user or a bad request, writing nothing") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Fixture f(*server);
  auto unknown = f.store->enqueue_job(job_of(42, numbered_pages(2)));
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().code() == StatusCode::not_found);
  CHECK(unknown.status().message() == "no user with id 42");
  const auto ann = f.store->add_user("ann", 1).value();
  CHECK(f.store->enqueue_job(job_of(ann.user.id, {})).status().code() ==
        StatusCode::invalid_argument);
  auto pages = numbered_pages(2);
  pages[1].text = std::string("a NUL\0 inside", 13);
  auto nul = f.store->enqueue_job(job_of(ann.user.id, pages));
  REQUIRE_FALSE(nul.ok());
  CHECK(nul.status().code() == StatusCode::invalid_argument);
  CHECK(nul.status().message().find("NUL byte") != std::string::npos);
  CHECK(f.number("SELECT count(*) FROM jobs") == 0);
  CHECK(f.number("SELECT count(*) FROM pages") == 0);
}

TEST_CASE("PostgreSQL: PgStore's load_lanes puts pages in flight back at the head of their lanes") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Fixture f(*server);
  const auto ann = f.store->add_user("ann", 1).value();
  const auto bo = f.store->add_user("bo", 5).value();
  const auto a = f.store->enqueue_job(job_of(ann.user.id, numbered_pages(3))).value();
  const auto b = f.store->enqueue_job(job_of(bo.user.id, numbered_pages(2))).value();
  const auto c = f.store->enqueue_job(job_of(bo.user.id, numbered_pages(1))).value();
  f.run("UPDATE pages SET state = 'in_flight', dispatched_at = 5, attempts = 1 WHERE id = " +
        std::to_string(a.pages[0].page_id));
  f.run("UPDATE pages SET state = 'in_flight', dispatched_at = 5 WHERE id = " +
        std::to_string(c.pages[0].page_id));
  f.run("UPDATE jobs SET cancelled_at = 6 WHERE id = " + std::to_string(c.job.id));
  auto lanes = f.store->load_lanes();
  REQUIRE_MESSAGE(lanes.ok(), lanes.status().message());
  REQUIRE(lanes->size() == 2);
  CHECK((*lanes)[0].user_id == ann.user.id);
  REQUIRE((*lanes)[0].pages.size() == 3);
  CHECK((*lanes)[0].pages[0].page_id == a.pages[0].page_id);
  CHECK((*lanes)[0].pages[0].attempts == 1);
  CHECK((*lanes)[1].user_id == bo.user.id);
  CHECK((*lanes)[1].weight == 5);
  REQUIRE((*lanes)[1].pages.size() == 2);  // the cancelled job's page is not in its lane
  CHECK((*lanes)[1].pages[0].page_id == b.pages[0].page_id);
  CHECK(f.number("SELECT count(*) FROM pages WHERE state = 'in_flight'") == 0);
  CHECK(f.store->job(c.job.id)->state == JobState::cancelled);
  CHECK(f.store->job(a.job.id)->pages.queued == 3);
}

TEST_CASE("PostgreSQL: PgStore reads jobs by public id, lists them newest first, and finds keys") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Fixture f(*server);
  const auto ann = f.store->add_user("ann", 1).value();
  const auto bo = f.store->add_user("bo", 1).value();
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    auto request = job_of(ann.user.id, numbered_pages(1));
    // (Appended, not "k" + ...: GCC 12 at -O3 warns about that concatenation, -Wrestrict.)
    request.idempotency_key = std::string("k").append(std::to_string(i));
    ids.push_back(f.store->enqueue_job(request).value().job.public_id);
  }
  CHECK(f.store->job_of(ids[2], ann.user.id)->public_id == ids[2]);
  // Another user's job is not found, as one that does not exist.
  CHECK(f.store->job_of(ids[2], bo.user.id).status().code() == StatusCode::not_found);
  CHECK(f.store->job_of("job_nope", ann.user.id).status().code() == StatusCode::not_found);

  auto first = f.store->jobs_of(ann.user.id, 2, std::nullopt);
  REQUIRE_MESSAGE(first.ok(), first.status().message());
  REQUIRE(first->jobs.size() == 2);
  CHECK(first->jobs[0].public_id == ids[4]);
  CHECK(first->jobs[1].public_id == ids[3]);
  REQUIRE(first->next_cursor == ids[3]);
  auto rest = f.store->jobs_of(ann.user.id, 10, *first->next_cursor);
  REQUIRE(rest.ok());
  REQUIRE(rest->jobs.size() == 3);
  CHECK(rest->jobs[0].public_id == ids[2]);
  CHECK(rest->jobs[2].public_id == ids[0]);
  CHECK_FALSE(rest->next_cursor.has_value());
  CHECK(f.store->jobs_of(bo.user.id, 10, std::nullopt)->jobs.empty());
  CHECK(f.store->jobs_of(ann.user.id, 0, std::nullopt).status().code() ==
        StatusCode::invalid_argument);
  CHECK(f.store->jobs_of(ann.user.id, 10, "job_nope").status().code() ==
        StatusCode::invalid_argument);

  CHECK(f.store->job_by_idempotency_key(ann.user.id, "k1")->job.public_id == ids[1]);
  CHECK(f.store->job_by_idempotency_key(bo.user.id, "k1").status().code() == StatusCode::not_found);
}

TEST_CASE("PostgreSQL: PgStore reads results, a page's call, weights and revised ETAs") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Fixture f(*server);
  const auto ann = f.store->add_user("ann", 1).value();
  std::vector<PageInput> pages = numbered_pages(2, 10);
  pages.push_back(PageInput{"", 20, PageKind::image, PageImage{"image/jpeg", 3, 4, "\xff\xd8"}});
  pages.push_back(PageInput{"", 0, PageKind::blank, std::nullopt});
  const auto job = f.store->enqueue_job(job_of(ann.user.id, pages)).value();
  f.run(
      "UPDATE pages SET state = 'done', output = 'one', input_tokens = 7, output_tokens = 9, "
      "finished_at = 1 WHERE seq = 0");
  f.run("UPDATE pages SET attempts = 2, error = 'timed out' WHERE seq = 1");

  auto results = f.store->results(job.job.id);
  REQUIRE_MESSAGE(results.ok(), results.status().message());
  REQUIRE(results->size() == 4);
  CHECK((*results)[0].state == fairlane::PageState::done);
  CHECK((*results)[0].output == "one");
  CHECK((*results)[0].usage.input_tokens == 7);
  CHECK((*results)[0].usage.output_tokens == 9);
  CHECK((*results)[1].state == fairlane::PageState::queued);
  CHECK((*results)[1].error == "timed out");
  CHECK((*results)[1].attempts == 2);
  CHECK_FALSE((*results)[1].output.has_value());
  CHECK((*results)[2].kind == PageKind::image);
  CHECK((*results)[3].kind == PageKind::blank);
  CHECK((*results)[3].output == "");
  CHECK(f.store->job(job.job.id)->usage.output_tokens == 9);

  auto text_call = f.store->page_call(job.pages[1].page_id);
  REQUIRE(text_call.ok());
  CHECK(text_call->text == "page 2");
  CHECK(text_call->max_tokens == 500);
  CHECK_FALSE(text_call->image.has_value());
  auto image_call = f.store->page_call(job.pages[2].page_id);
  REQUIRE(image_call.ok());
  REQUIRE(image_call->image.has_value());
  CHECK(image_call->image->media_type == "image/jpeg");
  CHECK(image_call->image->width == 3);
  CHECK(image_call->image->bytes == "\xff\xd8");
  CHECK(f.store->page_call(999'999).status().code() == StatusCode::not_found);

  CHECK(f.store->set_weight("ann", 7).ok());
  CHECK(f.store->find_user_by_name("ann")->weight == 7);
  CHECK(f.store->set_weight("nobody", 2).code() == StatusCode::not_found);
  CHECK(f.store->set_weight("ann", 0).code() == StatusCode::invalid_argument);

  REQUIRE(f.store->revise_eta(job.job.id, f.clock.now + std::chrono::minutes(5), "slower").ok());
  auto revised = f.store->job(job.job.id);
  REQUIRE(revised.ok());
  CHECK(revised->eta_revised_at == f.clock.now + std::chrono::minutes(5));
  CHECK(revised->eta_revised_reason == "slower");
}

TEST_CASE("PostgreSQL: PgStore reads the pages in flight, the recent spend and the calls out") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Fixture f(*server);
  const auto ann = f.store->add_user("ann", 1).value();
  const auto bo = f.store->add_user("bo", 1).value();
  const auto a = f.store->enqueue_job(job_of(ann.user.id, numbered_pages(3))).value();
  const auto b = f.store->enqueue_job(job_of(bo.user.id, numbered_pages(1))).value();
  const std::int64_t now_ms = 1'800'000'000'000;
  const auto page = [](const fairlane::EnqueuedJob& job, std::size_t i) {
    return std::to_string(job.pages[i].page_id);
  };
  f.run("UPDATE pages SET state = 'in_flight', dispatched_at = " + std::to_string(now_ms - 2000) +
        " WHERE id IN (" + page(a, 0) + ", " + page(a, 1) + ", " + page(b, 0) + ")");
  // Three calls in the last minute (one ended after 1.5 s), one two minutes ago.
  f.run("INSERT INTO spend (page_id, dispatch, at, tokens, ended_at) VALUES (" + page(a, 0) +
        ", 1, " + std::to_string(now_ms - 2000) + ", 100, NULL), (" + page(a, 1) + ", 1, " +
        std::to_string(now_ms - 3000) + ", 200, " + std::to_string(now_ms - 1500) + "), (" +
        page(b, 0) + ", 1, " + std::to_string(now_ms - 2000) + ", 300, NULL), (" + page(a, 2) +
        ", 1, " + std::to_string(now_ms - 120'000) + ", 400, " + std::to_string(now_ms - 110'000) +
        ")");

  auto in_flight = f.store->in_flight_by_user();
  REQUIRE_MESSAGE(in_flight.ok(), in_flight.status().message());
  REQUIRE(in_flight->size() == 2);
  CHECK((*in_flight)[0] == std::pair<fairlane::UserId, std::int64_t>{ann.user.id, 2});
  CHECK((*in_flight)[1] == std::pair<fairlane::UserId, std::int64_t>{bo.user.id, 1});

  auto spend = f.store->recent_spend(std::chrono::seconds(60));
  REQUIRE(spend.ok());
  CHECK(spend->requests == 3);
  CHECK(spend->tokens == 600);

  // The calls that have not ended, by their spend: a0's and b0's (a1's ended, though its
  // page is still in flight here).
  auto out = f.store->calls_out(std::chrono::minutes(10));
  REQUIRE(out.ok());
  CHECK(out->dispatched_at.size() == 2);
  REQUIRE(out->longest_recent_call.has_value());
  CHECK(*out->longest_recent_call == std::chrono::milliseconds(10'000));
  auto recent = f.store->calls_out(std::chrono::seconds(60));
  REQUIRE(recent.ok());
  CHECK(*recent->longest_recent_call == std::chrono::milliseconds(1'500));
}

TEST_CASE("PostgreSQL: PgStore applies a batch of page transitions in one round trip") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Fixture f(*server);
  const auto ann = f.store->add_user("ann", 1).value();
  const auto job = f.store->enqueue_job(job_of(ann.user.id, numbered_pages(3))).value();
  const auto p = [&](std::size_t i) { return job.pages[i].page_id; };
  const std::int64_t before = f.store->round_trips();
  const std::vector<PageTransition> batch{
      PageTransition::dispatched(p(0), 300),
      PageTransition::dispatched(p(1), 300),
      PageTransition::completed(p(0), "one", fairlane::Usage{10, 5}, 1),
      PageTransition::attempt_failed(p(1), "timeout", f.clock.now, 1),
      PageTransition::dispatched(p(1), 300),
      PageTransition::job_cancelled(job.job.id),
  };
  const auto applied = f.store->apply(batch);
  REQUIRE_MESSAGE(applied.ok(), applied.status().message());
  CHECK(*applied == std::vector<std::int64_t>{1, 1, 1, 1, 2, 1});
  CHECK(f.store->round_trips() == before + 1);
  CHECK(f.number("SELECT count(*) FROM spend") == 3);
  CHECK(f.number("SELECT tokens FROM spend WHERE dispatch = 1 AND page_id = " +
                 std::to_string(p(0))) == 15);
  CHECK(f.number("SELECT cancelled FROM jobs") == 1);
  CHECK(f.number("SELECT in_flight FROM jobs") == 1);
  // An empty batch is one round trip too, and changes nothing.
  CHECK(f.store->apply({}).value().empty());
  CHECK(f.store->write_health().ok());
  CHECK(f.store->probe_write().ok());
  CHECK(f.store->path() == f.database.uri());
}

TEST_CASE("PostgreSQL: PgStore refuses a page output holding a NUL byte and applies nothing") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Fixture f(*server);
  const auto ann = f.store->add_user("ann", 1).value();
  const auto job = f.store->enqueue_job(job_of(ann.user.id, numbered_pages(1))).value();
  const auto page = job.pages[0].page_id;
  REQUIRE(f.store->apply(std::vector{PageTransition::dispatched(page, 300)}).ok());
  const auto refused = f.store->apply(
      std::vector{PageTransition::completed(page, std::string("a\0b", 3), fairlane::Usage{1, 1})});
  CHECK(refused.status().code() == StatusCode::invalid_argument);
  CHECK(f.number("SELECT in_flight FROM jobs") == 1);
  CHECK(f.store->write_health().ok());
}
