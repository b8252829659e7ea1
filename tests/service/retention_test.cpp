// Retention: serve --retain's batches, pruned by the instance that leads, a budget at a time.
#include "service/retention.hpp"

#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "core/fake_clock.hpp"
#include "fairlane/store/store.hpp"
#include "service/store_readers.hpp"
#include "support/store.hpp"

using namespace std::chrono_literals;
using fairlane::service::Membership;
using fairlane::service::Retention;
using fairlane::service::RetentionConfig;

namespace {

struct Rig {
  explicit Rig(const std::string& db = ":memory:") {
    store = fairlane::testing::open_store(db, options());
    user = store->add_user("alice").value().user.id;
  }

  fairlane::StoreOptions options() {
    return fairlane::StoreOptions{.wall_clock = [this] { return wall.now(); }};
  }

  // A job of `pages` pages, sent and answered: done now.
  fairlane::JobId finished_job(int pages) {
    const auto job = fairlane::testing::enqueue(*store, user, pages);
    fairlane::testing::finish(*store, job);
    return job.job.id;
  }

  bool exists(fairlane::JobId job) { return store->job(job).ok(); }

  boost::asio::io_context io;
  fairlane::FakeClock clock;
  fairlane::FakeWallClock wall{clock, std::chrono::system_clock::now()};
  std::unique_ptr<fairlane::Store> store;
  fairlane::UserId user = 0;
  Membership membership{"a", "a", true, 0};
};

RetentionConfig keep_for(std::chrono::seconds retain, std::int64_t batch_pages = 1'000) {
  RetentionConfig config;
  config.retain = retain;
  config.batch_pages = batch_pages;
  return config;
}

}  // namespace

TEST_CASE("Retention prunes the jobs finished longer ago than it keeps, a batch at a look") {
  Rig rig;
  const auto first = rig.finished_job(3);
  const auto second = rig.finished_job(3);
  rig.clock.advance(1h);
  const auto recent = rig.finished_job(1);
  rig.finished_job(1);  // the newest, never pruned
  rig.clock.advance(61min);
  Retention retention(rig.io, *rig.store, rig.membership, keep_for(2h, 4), nullptr, &rig.wall);

  retention.look();  // one job of 3 pages: the second would pass the 4
  CHECK_FALSE(rig.exists(first));
  CHECK(rig.exists(second));
  retention.look();
  CHECK_FALSE(rig.exists(second));
  CHECK(retention.pruned_jobs() == 2);
  CHECK(retention.pruned_pages() == 6);
  retention.look();  // the others finished 61 minutes ago
  CHECK(rig.exists(recent));
  CHECK(retention.pruned_jobs() == 2);
}

TEST_CASE("Retention prunes nothing on an instance that does not lead, nor once stopped") {
  Rig rig;
  const auto old = rig.finished_job(2);
  rig.finished_job(1);
  rig.clock.advance(3h);
  rig.membership.leading = false;
  Retention retention(rig.io, *rig.store, rig.membership, keep_for(1h), nullptr, &rig.wall);
  retention.look();
  CHECK(rig.exists(old));
  rig.membership.leading = true;
  retention.stop();
  retention.look();
  CHECK(rig.exists(old));
  CHECK(retention.pruned_jobs() == 0);
}

TEST_CASE("Retention looks at once when started, and never with a retention of 0") {
  Rig rig;
  const auto old = rig.finished_job(2);
  rig.finished_job(1);
  rig.clock.advance(24h * 365);
  {
    Retention keep_all(rig.io, *rig.store, rig.membership, keep_for(0s), nullptr, &rig.wall);
    keep_all.start();
    rig.io.poll();
    CHECK(rig.exists(old));
  }
  rig.io.restart();
  Retention retention(rig.io, *rig.store, rig.membership, keep_for(1h), nullptr, &rig.wall);
  retention.start();
  rig.io.poll();  // the first look is due at once; the next a minute later
  CHECK_FALSE(rig.exists(old));
  CHECK(retention.pruned_jobs() == 1);
}

TEST_CASE("With readers, Retention prunes on a reader's connection and counts back on the loop") {
  const fairlane::testing::TempDir dir;
  Rig rig(dir.file("retention.db"));
  const auto old = rig.finished_job(2);
  rig.finished_job(1);
  rig.clock.advance(2h);
  std::vector<std::unique_ptr<fairlane::Store>> stores;
  stores.push_back(fairlane::testing::open_store(dir.file("retention.db"), rig.options()));
  fairlane::service::StoreReaders readers(std::move(stores));
  Retention retention(rig.io, *rig.store, rig.membership, keep_for(1h), &readers, &rig.wall);
  retention.look();
  CHECK(retention.pruned_jobs() == 0);  // not yet heard back
  // The answer comes back as a handler on the loop (bounded: the reader's thread runs it).
  REQUIRE(rig.io.run_one_for(10s) == 1);
  CHECK(retention.pruned_jobs() == 1);
  CHECK_FALSE(rig.exists(old));
}
