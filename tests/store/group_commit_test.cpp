#include <doctest/doctest.h>

#include <chrono>
#include <vector>

#include "core/fake_clock.hpp"
#include "fairlane/store/group_commit.hpp"
#include "support/store.hpp"

using namespace std::chrono_literals;
using fairlane::FakeClock;
using fairlane::GroupCommit;
using fairlane::GroupCommitOptions;
using fairlane::PageTransition;
using fairlane::Usage;
using fairlane::testing::enqueue;
using fairlane::testing::job_view;
using fairlane::testing::open_store;

namespace {

struct Fixture {
  FakeClock clock;
  std::unique_ptr<fairlane::Store> store = open_store(":memory:");
  fairlane::UserId alice = store->add_user("alice")->user.id;
  fairlane::EnqueuedJob job = enqueue(*store, alice, 4);
  fairlane::PageId page(std::size_t i) const { return job.pages[i].page_id; }
};

}  // namespace

TEST_CASE("A batch is due when its oldest transition has waited max_delay") {
  Fixture f;
  GroupCommit commits(*f.store, f.clock, GroupCommitOptions{.max_batch = 100, .max_delay = 5ms});
  CHECK_FALSE(commits.due());
  CHECK_FALSE(commits.deadline().has_value());

  const auto start = f.clock.now();
  commits.submit(PageTransition::dispatched(f.page(0), 100));
  CHECK(commits.deadline() == start + 5ms);
  f.clock.advance(3ms);
  commits.submit(PageTransition::dispatched(f.page(1), 100));
  CHECK(commits.deadline() == start + 5ms);  // the oldest sets it
  CHECK_FALSE(commits.due());
  f.clock.advance(2ms);
  CHECK(commits.due());
}

TEST_CASE("A batch is due at once when it is full") {
  Fixture f;
  GroupCommit commits(*f.store, f.clock, GroupCommitOptions{.max_batch = 3, .max_delay = 1s});
  commits.submit(PageTransition::dispatched(f.page(0), 100));
  commits.submit(PageTransition::dispatched(f.page(1), 100));
  CHECK_FALSE(commits.due());
  commits.submit(PageTransition::dispatched(f.page(2), 100));
  CHECK(commits.due());
}

TEST_CASE("Nobody hears of a transition before its batch commits, then all hear in order") {
  Fixture f;
  GroupCommit commits(*f.store, f.clock);
  std::vector<std::int64_t> heard;
  const auto record = [&heard](std::int64_t changed) { heard.push_back(changed); };
  commits.submit(PageTransition::dispatched(f.page(0), 100), record);
  commits.submit(PageTransition::completed(f.page(0), "out", Usage{1, 2}), record);
  commits.submit(PageTransition::completed(f.page(0), "again", Usage{1, 2}), record);
  commits.submit(PageTransition::dispatched(f.page(1), 100));  // nobody waiting on this one
  CHECK(heard.empty());
  CHECK(job_view(*f.store, f.job.job.id).pages.done == 0);  // nothing committed yet

  REQUIRE(commits.flush().ok());
  CHECK(heard == std::vector<std::int64_t>{1, 1, 0});
  CHECK(commits.pending() == 0);
  CHECK_FALSE(commits.deadline().has_value());
  const auto view = job_view(*f.store, f.job.job.id);
  CHECK(view.pages.done == 1);
  CHECK(view.pages.in_flight == 1);
}

TEST_CASE("A transition submitted from a callback waits for the next batch") {
  Fixture f;
  GroupCommit commits(*f.store, f.clock);
  bool second_heard = false;
  commits.submit(PageTransition::dispatched(f.page(0), 100), [&](std::int64_t) {
    commits.submit(PageTransition::completed(f.page(0), "out", Usage{}),
                   [&](std::int64_t changed) { second_heard = changed == 1; });
  });
  REQUIRE(commits.flush().ok());
  CHECK(commits.pending() == 1);
  CHECK_FALSE(second_heard);
  REQUIRE(commits.flush().ok());
  CHECK(second_heard);
}

TEST_CASE("Abandoning drops the queued transitions without committing or telling anyone") {
  Fixture f;
  GroupCommit commits(*f.store, f.clock);
  bool told = false;
  commits.submit(PageTransition::dispatched(f.page(0), 100), [&](std::int64_t) { told = true; });
  commits.submit(PageTransition::dispatched(f.page(1), 100));
  CHECK(commits.abandon() == 2);
  CHECK(commits.pending() == 0);
  CHECK(commits.flush().ok());
  CHECK_FALSE(told);
  CHECK(job_view(*f.store, f.job.job.id).pages.in_flight == 0);
}

TEST_CASE("A batch out is not due again, and what comes meanwhile waits for the next one") {
  Fixture f;
  GroupCommit commits(*f.store, f.clock, GroupCommitOptions{.max_batch = 100, .max_delay = 5ms});
  std::vector<std::int64_t> heard;
  commits.submit(PageTransition::dispatched(f.page(0), 100),
                 [&](std::int64_t changed) { heard.push_back(changed); });
  f.clock.advance(5ms);
  REQUIRE(commits.due());
  std::vector<PageTransition> batch = commits.begin_flush();
  REQUIRE(batch.size() == 1);
  CHECK(commits.flushing());
  CHECK(commits.pending() == 0);
  CHECK_FALSE(commits.due());

  commits.submit(PageTransition::dispatched(f.page(1), 100),
                 [&](std::int64_t changed) { heard.push_back(changed + 10); });
  f.clock.advance(5ms);
  CHECK_FALSE(commits.due());  // one batch out at a time
  CHECK_FALSE(commits.deadline().has_value());
  auto changed = f.store->apply(batch);
  REQUIRE(commits.end_flush(std::move(batch), std::move(changed)).ok());
  CHECK(heard == std::vector<std::int64_t>{1});
  CHECK_FALSE(commits.flushing());
  CHECK(commits.pending() == 1);
  CHECK(commits.due());
  CHECK(commits.deadline() == f.clock.now());  // submitted 5 ms ago
  REQUIRE(commits.flush().ok());
  CHECK(heard == std::vector<std::int64_t>{1, 11});
  CHECK(job_view(*f.store, f.job.job.id).pages.in_flight == 2);
}

TEST_CASE("A batch out that failed goes back in front of what came meanwhile, in order") {
  Fixture f;
  GroupCommit commits(*f.store, f.clock,
                      GroupCommitOptions{.max_batch = 100, .max_delay = 5ms, .retry_delay = 100ms});
  std::vector<std::int64_t> heard;
  const auto record = [&heard](std::int64_t tag) {
    return [&heard, tag](std::int64_t changed) { heard.push_back(tag * 10 + changed); };
  };
  commits.submit(PageTransition::dispatched(f.page(0), 100), record(1));
  commits.submit(PageTransition::dispatched(f.page(1), 100), record(2));
  std::vector<PageTransition> batch = commits.begin_flush();
  commits.submit(PageTransition::completed(f.page(0), "out", Usage{1, 2}), record(3));

  const fairlane::Status broken{fairlane::StatusCode::io_error, "the disk is gone"};
  CHECK(commits.end_flush(std::move(batch), broken).message() == "the disk is gone");
  CHECK(heard.empty());
  CHECK(commits.pending() == 3);
  CHECK_FALSE(commits.due());  // the retry waits its backoff
  f.clock.advance(100ms);
  REQUIRE(commits.due());
  REQUIRE(commits.flush().ok());
  // Dispatched first, then the completion that needs it: as submitted.
  CHECK(heard == std::vector<std::int64_t>{11, 21, 31});
  const auto view = job_view(*f.store, f.job.job.id);
  CHECK(view.pages.done == 1);
  CHECK(view.pages.in_flight == 1);
}

namespace {

// A store that refuses any batch holding page `poisoned`'s completion, for what it holds
// (PostgreSQL refusing a NUL in text was one), and takes everything else.
struct Refusing {
  fairlane::Store& store;
  fairlane::PageId poisoned;
  fairlane::StatusCode code = fairlane::StatusCode::invalid_argument;
  int refused = 0;

  fairlane::Result<std::vector<std::int64_t>> apply(const std::vector<PageTransition>& batch) {
    for (const PageTransition& t : batch) {
      if (t.page_id == poisoned && (t.kind == PageTransition::Kind::completed || failing_too)) {
        ++refused;
        return fairlane::Status{code, "parameter $5 holds a NUL byte"};
      }
    }
    return store.apply(batch);
  }
  bool failing_too = false;  // its failure is refused as well

  // Flushes as an owner committing elsewhere does, until nothing is queued or `rounds` ran.
  std::vector<fairlane::Status> drain(GroupCommit& commits, FakeClock& clock, int rounds = 20) {
    std::vector<fairlane::Status> answers;
    for (int i = 0; i < rounds && commits.pending() > 0; ++i) {
      clock.advance(10s);  // past any backoff
      std::vector<PageTransition> batch = commits.begin_flush();
      auto answer = apply(batch);
      answers.push_back(commits.end_flush(std::move(batch), std::move(answer)));
    }
    return answers;
  }
};

}  // namespace

TEST_CASE("A transition the store refuses for what it holds fails its page, and stalls no other") {
  Fixture f;
  GroupCommit commits(*f.store, f.clock);
  Refusing store{*f.store, f.page(1)};
  std::vector<std::int64_t> heard;
  const auto record = [&heard](std::int64_t tag) {
    return [&heard, tag](std::int64_t changed) { heard.push_back(tag * 10 + changed); };
  };
  for (std::size_t i = 0; i < 3; ++i) {
    const std::vector dispatch{PageTransition::dispatched(f.page(i), 100)};
    REQUIRE(f.store->apply(dispatch).ok());
  }
  commits.submit(PageTransition::completed(f.page(0), "zero", Usage{1, 2}), record(1));
  commits.submit(PageTransition::completed(f.page(1), "poison", Usage{1, 2}), record(2));
  commits.submit(PageTransition::completed(f.page(2), "two", Usage{1, 2}), record(3));

  const std::vector<fairlane::Status> answers = store.drain(commits, f.clock);
  // The batch, then page 0 alone, page 1 alone (refused), its failure, page 2.
  REQUIRE(answers.size() == 5);
  CHECK(answers[0].code() == fairlane::StatusCode::invalid_argument);
  CHECK(answers[1].ok());
  CHECK(answers[2].message() ==
        "parameter $5 holds a NUL byte; page " + std::to_string(f.page(1)) + " fails instead");
  CHECK(answers[3].ok());
  CHECK(answers[4].ok());
  CHECK(commits.pending() == 0);
  CHECK(commits.refused() == 1);
  // Everyone hears, in order; page 1's callback hears 0: its completion did not apply.
  CHECK(heard == std::vector<std::int64_t>{11, 20, 31});
  const auto view = job_view(*f.store, f.job.job.id);
  CHECK(view.pages.done == 2);
  CHECK(view.pages.failed == 1);
  const auto results = f.store->results(f.job.job.id);
  REQUIRE(results.ok());
  CHECK((*results)[1].state == fairlane::PageState::failed);
  CHECK((*results)[1].error ==
        "the store refused this page's change (invalid_argument: parameter $5 holds a NUL byte)");
  CHECK((*results)[2].output == "two");
}

TEST_CASE("A refused page's failure refused too is dropped, and the rest still commit") {
  Fixture f;
  GroupCommit commits(*f.store, f.clock);
  Refusing store{*f.store, f.page(1)};
  store.failing_too = true;
  std::vector<std::int64_t> heard;
  for (std::size_t i = 0; i < 3; ++i) {
    const std::vector dispatch{PageTransition::dispatched(f.page(i), 100)};
    REQUIRE(f.store->apply(dispatch).ok());
    commits.submit(PageTransition::completed(f.page(i), "out", Usage{1, 2}),
                   [&heard, i](std::int64_t changed) {
                     heard.push_back(static_cast<std::int64_t>(i) * 10 + changed);
                   });
  }
  const std::vector<fairlane::Status> answers = store.drain(commits, f.clock);
  // The batch, page 0, page 1 (refused), its failure (refused: dropped), page 2.
  REQUIRE(answers.size() == 5);
  CHECK(answers[3].message() == "parameter $5 holds a NUL byte; that change is dropped");
  CHECK(commits.refused() == 2);
  CHECK(heard == std::vector<std::int64_t>{1, 10, 21});  // page 1 hears 0: nothing changed
  const auto view = job_view(*f.store, f.job.job.id);
  CHECK(view.pages.done == 2);
  CHECK(view.pages.in_flight == 1);  // as the store had it: the next start takes it up
}

TEST_CASE("A batch that fails for the disk is retried whole, never taken apart") {
  Fixture f;
  GroupCommit commits(*f.store, f.clock);
  Refusing store{*f.store, f.page(1), fairlane::StatusCode::disk_full};
  for (std::size_t i = 0; i < 3; ++i) {
    const std::vector dispatch{PageTransition::dispatched(f.page(i), 100)};
    REQUIRE(f.store->apply(dispatch).ok());
    commits.submit(PageTransition::completed(f.page(i), "out", Usage{1, 2}));
  }
  const std::vector<fairlane::Status> answers = store.drain(commits, f.clock, 4);
  CHECK(answers.size() == 4);
  CHECK(store.refused == 4);  // the whole batch each time
  CHECK(commits.pending() == 3);
  CHECK(commits.refused() == 0);
  CHECK(job_view(*f.store, f.job.job.id).pages.done == 0);
}

TEST_CASE("A transition refused alone in its batch fails its page at its second refusal") {
  Fixture f;
  GroupCommit commits(*f.store, f.clock);
  Refusing store{*f.store, f.page(0)};
  std::vector<std::int64_t> heard;
  const std::vector dispatch{PageTransition::dispatched(f.page(0), 100)};
  REQUIRE(f.store->apply(dispatch).ok());
  // A quiet service: nothing else is queued behind it, ever.
  commits.submit(PageTransition::completed(f.page(0), "poison", Usage{1, 2}),
                 [&heard](std::int64_t changed) { heard.push_back(changed); });

  const std::vector<fairlane::Status> answers = store.drain(commits, f.clock);
  // Refused once (it may have been the store's passing trouble), then again: it fails.
  REQUIRE(answers.size() == 3);
  CHECK(answers[0].message() == "parameter $5 holds a NUL byte");
  CHECK(answers[1].message() ==
        "parameter $5 holds a NUL byte; page " + std::to_string(f.page(0)) + " fails instead");
  CHECK(answers[2].ok());
  CHECK(commits.pending() == 0);
  CHECK(commits.refused() == 1);
  CHECK(heard == std::vector<std::int64_t>{0});
  const auto results = f.store->results(f.job.job.id);
  REQUIRE(results.ok());
  CHECK((*results)[0].state == fairlane::PageState::failed);
}

TEST_CASE("A transition alone that fails once for what it holds, then commits, is not refused") {
  Fixture f;
  GroupCommit commits(*f.store, f.clock);
  const std::vector dispatch{PageTransition::dispatched(f.page(0), 100)};
  REQUIRE(f.store->apply(dispatch).ok());
  std::vector<std::int64_t> heard;
  commits.submit(PageTransition::completed(f.page(0), "out", Usage{1, 2}),
                 [&heard](std::int64_t changed) { heard.push_back(changed); });
  std::vector<PageTransition> batch = commits.begin_flush();
  const fairlane::Status odd{fairlane::StatusCode::internal, "an unexpected SQLSTATE"};
  CHECK(commits.end_flush(std::move(batch), odd).code() == fairlane::StatusCode::internal);
  f.clock.advance(10s);
  REQUIRE(commits.flush().ok());
  CHECK(commits.refused() == 0);
  CHECK(heard == std::vector<std::int64_t>{1});
  CHECK(job_view(*f.store, f.job.job.id).pages.done == 1);
}
