// Retention (Store::prune): finished jobs go with everything of theirs, the longest finished
// first and a budget at a time; running jobs and the newest job stay; a pruned job is not
// found, like one that never was, and frees its idempotency key.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "fairlane/store/store.hpp"
#include "store/pg.hpp"
#include "store/pg_store.hpp"
#include "support/pg.hpp"
#include "support/store.hpp"
#include "support/store_home.hpp"

using namespace std::chrono_literals;
using fairlane::EnqueuedJob;
using fairlane::JobRequest;
using fairlane::JobState;
using fairlane::PageInput;
using fairlane::PageKind;
using fairlane::PageTransition;
using fairlane::StatusCode;
using fairlane::StoreOptions;
using fairlane::Usage;
using fairlane::testing::apply;
using fairlane::testing::enqueue;
using fairlane::testing::job_view;
using fairlane::testing::ManualWallClock;

namespace {

struct Fixture {
  explicit Fixture(fairlane::testing::StoreHome& home)
      : store(home.open(StoreOptions{.wall_clock = wall.function()})),
        alice(store->add_user("alice").value().user.id) {}

  void finish(const EnqueuedJob& job) { fairlane::testing::finish(*store, job); }

  ManualWallClock wall;
  std::unique_ptr<fairlane::Store> store;
  fairlane::UserId alice = 0;
};

}  // namespace

FAIRLANE_STORE_TEST_CASE(
    "A prune deletes the jobs finished before its time, with their pages, and nothing else",
    sqlite_memory) {
  Fixture f(home);
  const auto old = enqueue(*f.store, f.alice, 2, "old.pdf", "key-1");
  f.finish(old);
  f.wall.advance(1h);
  const auto running = enqueue(*f.store, f.alice, 2, "running.pdf");
  apply(*f.store, {PageTransition::dispatched(running.pages[0].page_id, 100)});
  const auto recent = enqueue(*f.store, f.alice, 3, "recent.pdf");
  f.finish(recent);
  const auto newest = enqueue(*f.store, f.alice, 1, "newest.pdf");
  f.finish(newest);
  f.wall.advance(1h);

  // Finished before an hour ago: the first job only.
  const auto due = f.store->prunable(f.wall.now - 1h).value();
  CHECK(due.jobs == 1);
  CHECK(due.pages == 2);
  const auto pruned = f.store->prune(f.wall.now - 1h, 1'000).value();
  CHECK(pruned.jobs == 1);
  CHECK(pruned.pages == 2);
  CHECK_FALSE(pruned.more);

  CHECK(f.store->job(old.job.id).status().code() == StatusCode::not_found);
  CHECK(f.store->job_of(old.job.public_id, f.alice).status().code() == StatusCode::not_found);
  CHECK(f.store->results(old.job.id).value().empty());
  CHECK(f.store->page_call(old.pages[0].page_id).status().code() == StatusCode::not_found);
  CHECK(f.store->job_by_idempotency_key(f.alice, "key-1").status().code() == StatusCode::not_found);
  // The others are whole.
  CHECK(job_view(*f.store, running.job.id).state == JobState::running);
  CHECK(f.store->results(recent.job.id).value().size() == 3);
  CHECK(f.store->page_call(recent.pages[2].page_id).ok());
  CHECK(job_view(*f.store, newest.job.id).state == JobState::done);
  CHECK(f.store->prunable(f.wall.now - 1h).value().jobs == 0);

  // Running jobs stay however old they are; the newest stays too.
  f.wall.advance(24h);
  CHECK(f.store->prune(f.wall.now, 1'000).value().jobs == 1);  // `recent`
  CHECK(f.store->job(running.job.id).ok());
  CHECK(f.store->job(newest.job.id).ok());
  CHECK(f.store->load_lanes().value().size() == 1);
}

FAIRLANE_STORE_TEST_CASE(
    "A pruned job's key makes a new job, its cursor is refused, and ids are never used again",
    sqlite_memory) {
  Fixture f(home);
  const auto first = enqueue(*f.store, f.alice, 1, "first.pdf", "key-1");
  f.finish(first);
  const auto second = enqueue(*f.store, f.alice, 1, "second.pdf");
  f.finish(second);
  // The newest job is kept, however old: the next job's id must not be one pruned.
  f.wall.advance(48h);
  CHECK(f.store->prune(f.wall.now, 1'000).value().jobs == 1);
  CHECK(f.store->prune(f.wall.now, 1'000).value().jobs == 0);
  CHECK(f.store->job(second.job.id).ok());

  const auto again = enqueue(*f.store, f.alice, 1, "again.pdf", "key-1");
  CHECK(again.created);
  CHECK(again.job.id > second.job.id);
  CHECK(again.pages[0].page_id > second.pages[0].page_id);
  CHECK(again.job.public_id != first.job.public_id);

  const auto list = f.store->jobs_of(f.alice, 10, first.job.public_id);
  CHECK(list.status().code() == StatusCode::invalid_argument);
  CHECK(f.store->jobs_of(f.alice, 10).value().jobs.size() == 2);
}

FAIRLANE_STORE_TEST_CASE(
    "A prune takes the longest finished first, a budget of pages at a time, images weighing more",
    sqlite_memory) {
  Fixture f(home);
  std::vector<EnqueuedJob> jobs;
  for (int i = 0; i < 3; ++i) {
    jobs.push_back(enqueue(*f.store, f.alice, 3, "book.pdf"));
    f.wall.advance(1min);
  }
  // Finished in the order 2, 0, 1.
  for (const int i : {2, 0, 1}) {
    f.finish(jobs[static_cast<std::size_t>(i)]);
    f.wall.advance(1min);
  }
  JobRequest scan{.user_id = f.alice, .name = "scan.pdf", .max_tokens = 100};
  scan.pages = {PageInput{"", 1'000, PageKind::image,
                          fairlane::PageImage{"image/png", 10, 10, std::string("\x89PNG", 4)}}};
  const auto image = f.store->enqueue_job(scan).value();
  f.finish(image);
  f.wall.advance(1min);
  enqueue(*f.store, f.alice, 1, "newest.pdf");
  f.wall.advance(1min);

  CHECK(f.store->prunable(f.wall.now).value().jobs == 4);
  // 4 pages: the first job to have finished (3), not the next.
  auto batch = f.store->prune(f.wall.now, 4).value();
  CHECK(batch.jobs == 1);
  CHECK(batch.more);
  CHECK_FALSE(f.store->job(jobs[2].job.id).ok());
  CHECK(f.store->job(jobs[0].job.id).ok());
  // A job larger than the budget goes alone.
  batch = f.store->prune(f.wall.now, 1).value();
  CHECK(batch.jobs == 1);
  CHECK(batch.pages == 3);
  CHECK(batch.more);
  CHECK_FALSE(f.store->job(jobs[0].job.id).ok());
  // 3 + an image page's 50 is more than 52: the image waits for the next batch.
  batch = f.store->prune(f.wall.now, 52).value();
  CHECK(batch.jobs == 1);
  CHECK(batch.more);
  batch = f.store->prune(f.wall.now, 52).value();
  CHECK(batch.jobs == 1);
  CHECK(batch.pages == 1);
  CHECK_FALSE(batch.more);
  CHECK(f.store->page_call(image.pages[0].page_id).status().code() == StatusCode::not_found);
}

FAIRLANE_STORE_TEST_CASE(
    "After a prune the store still knows when its first job came, and the spend of the rest",
    sqlite_memory) {
  Fixture f(home);
  const auto first = enqueue(*f.store, f.alice, 1, "first.pdf");
  const auto first_at = f.wall.now;
  f.finish(first);
  f.wall.advance(2h);
  const auto second = enqueue(*f.store, f.alice, 1, "second.pdf");
  const auto third = enqueue(*f.store, f.alice, 2, "third.pdf");
  apply(*f.store, {PageTransition::dispatched(third.pages[0].page_id, 500)});
  f.finish(second);

  CHECK(f.store->prune(f.wall.now - 1h, 1'000).value().jobs == 1);
  const auto recent = f.store->recent_jobs(f.wall.now - 5min, 100).value();
  REQUIRE(recent.first_job_at.has_value());
  CHECK(*recent.first_job_at == first_at);
  CHECK(recent.jobs.size() == 2);
  // The calls of the jobs kept are all counted.
  const auto spend = f.store->recent_spend(60s).value();
  CHECK(spend.requests == 2);
  CHECK(spend.tokens == 500 + 15);
}

TEST_CASE("PostgreSQL: a prune that would wait for a lock gives up at once, and prunes later") {
  const auto server = fairlane::testing::pg_server_uri();
  if (!server) {
    MESSAGE(fairlane::testing::kNoPgServer);
    return;
  }
  const fairlane::testing::PgTestDatabase database(*server);
  ManualWallClock wall;
  auto opened =
      fairlane::store::PgStore::open(database.uri(), StoreOptions{.wall_clock = wall.function()});
  REQUIRE(opened.ok());
  fairlane::Store& store = *opened.value();
  const auto alice = store.add_user("alice").value().user.id;
  const auto old = enqueue(store, alice, 1, "old.pdf");
  apply(store, {PageTransition::dispatched(old.pages[0].page_id, 100)});
  apply(store, {PageTransition::completed(old.pages[0].page_id, "text", Usage{10, 5})});
  enqueue(store, alice, 1, "newest.pdf");
  wall.advance(2h);

  // Another transaction holds the old call's spend row, as a batch deleting spend an hour old
  // would: the prune does not wait behind it (nor deadlock with it), it fails, naming why.
  auto holder = fairlane::store::pg::Connection::open(database.uri());
  REQUIRE(holder.ok());
  REQUIRE(holder->exec("BEGIN", "beginning").ok());
  REQUIRE(holder->exec("SELECT * FROM spend FOR UPDATE", "locking the spend").ok());
  const auto blocked = store.prune(wall.now - 1h, 1'000);
  CHECK_FALSE(blocked.ok());
  CHECK(store.job(old.job.id).ok());
  REQUIRE(holder->exec("ROLLBACK", "ending").ok());
  const auto pruned = store.prune(wall.now - 1h, 1'000);
  REQUIRE(pruned.ok());
  CHECK(pruned->jobs == 1);
  CHECK_FALSE(store.job(old.job.id).ok());
}
