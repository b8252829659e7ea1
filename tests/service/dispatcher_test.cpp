// The dispatch loop with everything real on one io_context: the SQLite store, the libcurl
// client, and the provider stand-in on loopback with a few milliseconds of latency. Every
// wait is bounded.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fairlane/core/estimator.hpp"
#include "fairlane/core/fair_scheduler.hpp"
#include "fairlane/provider/curl_provider.hpp"
#include "provider_sim.hpp"
#include "service/dispatcher.hpp"
#include "service/router.hpp"
#include "support/faulty_vfs.hpp"
#include "support/forwarding_store.hpp"
#include "support/loop.hpp"
#include "support/store.hpp"
#include "support/unread_texts.hpp"

using namespace std::chrono_literals;
using fairlane::JobRequest;
using fairlane::JobState;
using fairlane::PageInput;
using fairlane::service::Dispatcher;
using fairlane::service::DispatcherConfig;
namespace sim = fairlane::provider_sim;

namespace {

// A store in front of the real one (a test double that changes a call or two).
using WrapStore = std::function<std::unique_ptr<fairlane::Store>(std::unique_ptr<fairlane::Store>)>;

struct Rig {
  Rig(sim::Config provider_config, DispatcherConfig config,
      const std::string& db = ":memory:", const std::string& vfs = "", const WrapStore& wrap = {})
      : stand_in(io, std::move(provider_config)),
        store(fairlane::testing::open_store(db, fairlane::StoreOptions{.vfs = vfs})) {
    if (wrap) store = wrap(std::move(store));
    auto port = stand_in.listen("127.0.0.1", 0);
    REQUIRE(port.ok());
    stand_in_port = port.value();
    fairlane::CurlProviderConfig client;
    client.base_url = "http://127.0.0.1:" + std::to_string(port.value());
    client.max_connections = static_cast<std::size_t>(config.limits.max_in_flight);
    provider = std::move(fairlane::make_curl_provider(io, client)).value();
    dispatcher = std::make_unique<Dispatcher>(io, *store, *provider, std::move(config));
  }

  fairlane::UserId user(const std::string& name) { return store->add_user(name)->user.id; }

  fairlane::EnqueuedJob enqueue(fairlane::UserId user, int pages, const std::string& name,
                                std::int64_t max_tokens = 100) {
    std::vector<PageInput> inputs;
    for (int i = 1; i <= pages; ++i) inputs.push_back({name + " page " + std::to_string(i), 300});
    auto job = store->enqueue_job(JobRequest{user, name, inputs, max_tokens});
    REQUIRE_MESSAGE(job.ok(), job.status().message());
    return std::move(job).value();
  }

  bool run_until(const std::function<bool()>& done, std::chrono::seconds limit = 20s) {
    return fairlane::testing::run_until(io, done, limit);
  }

  bool terminal(fairlane::JobId job) { return fairlane::testing::job_ended(*store, job); }

  boost::json::object stats() const {
    return boost::json::parse(stand_in.stats_json()).as_object();
  }

  boost::asio::io_context io;
  sim::Server stand_in;
  std::uint16_t stand_in_port = 0;
  std::unique_ptr<fairlane::Store> store;
  std::unique_ptr<fairlane::Provider> provider;
  std::unique_ptr<Dispatcher> dispatcher;
};

sim::Config stand_in(std::int64_t max_in_flight, double latency_ms = 10) {
  sim::Config c;
  c.requests_per_minute = 6'000;
  c.tokens_per_minute = 600'000;
  c.max_in_flight = max_in_flight;
  c.latency_ms = latency_ms;
  c.output_tokens = 20;
  return c;
}

DispatcherConfig fairlane_config(std::int64_t max_in_flight) {
  DispatcherConfig c;
  c.limits = {
      .requests_per_minute = 6'000, .tokens_per_minute = 600'000, .max_in_flight = max_in_flight};
  c.backoff_base = 20ms;
  c.seed = 7;
  return c;
}

}  // namespace

TEST_CASE("Three users: every page done, the provider never refuses, light books finish first") {
  Rig rig(stand_in(4), fairlane_config(4));
  const auto heavy = rig.user("heavy");
  const auto a = rig.user("light-a");
  const auto b = rig.user("light-b");
  REQUIRE(rig.dispatcher->start().ok());
  std::vector<fairlane::JobId> heavy_jobs;
  for (int i = 0; i < 3; ++i) {
    const auto job = rig.enqueue(heavy, 10, "heavy-" + std::to_string(i));
    heavy_jobs.push_back(job.job.id);
    rig.dispatcher->add(job, 1);
  }
  const auto light_a = rig.enqueue(a, 10, "a");
  const auto light_b = rig.enqueue(b, 10, "b");
  rig.dispatcher->add(light_a, 1);
  rig.dispatcher->add(light_b, 1);

  std::vector<fairlane::JobId> finished;
  rig.dispatcher->on_job_changed([&](fairlane::JobId job) {
    if (rig.terminal(job) && std::find(finished.begin(), finished.end(), job) == finished.end()) {
      finished.push_back(job);
    }
  });
  REQUIRE(rig.run_until([&] { return finished.size() == 5; }));

  for (const auto job :
       {heavy_jobs[0], heavy_jobs[1], heavy_jobs[2], light_a.job.id, light_b.job.id}) {
    const auto view = fairlane::testing::job_view(*rig.store, job);
    CHECK(view.state == JobState::done);
    CHECK(view.pages.done == 10);
  }
  const auto results = rig.store->results(light_a.job.id).value();
  CHECK(results[3].output == "a page 4");
  const auto stats = rig.stats();
  CHECK(stats.at("rejected_429") == 0);
  CHECK(stats.at("rejected_503") == 0);
  CHECK(stats.at("max_in_flight_seen").as_int64() <= 4);
  CHECK(stats.at("ok") == 50);
  CHECK(rig.dispatcher->counters().done == 50);
  // Every call answered is in the latency histogram; every page's first call in the wait's.
  CHECK(rig.dispatcher->counters().call_latency_seconds.count() == 50);
  CHECK(rig.dispatcher->counters().queue_wait_seconds.count() == 50);
  const auto position = [&](fairlane::JobId job) {
    return std::find(finished.begin(), finished.end(), job) - finished.begin();
  };
  CHECK(position(light_a.job.id) < position(heavy_jobs[1]));
  CHECK(position(light_b.job.id) < position(heavy_jobs[1]));
}

TEST_CASE("Each call asks for its own job's max_tokens") {
  // The stand-in answers 20 output tokens a page, cut to what the call asked for.
  Rig rig(stand_in(4), fairlane_config(4));
  const auto alice = rig.user("alice");
  REQUIRE(rig.dispatcher->start().ok());
  const auto short_answers = rig.enqueue(alice, 3, "short", 5);
  const auto long_answers = rig.enqueue(alice, 3, "long", 100);
  rig.dispatcher->add(short_answers, 1);
  rig.dispatcher->add(long_answers, 1);
  REQUIRE(rig.run_until(
      [&] { return rig.terminal(short_answers.job.id) && rig.terminal(long_answers.job.id); }));
  CHECK(fairlane::testing::job_view(*rig.store, short_answers.job.id).usage.output_tokens == 3 * 5);
  CHECK(fairlane::testing::job_view(*rig.store, long_answers.job.id).usage.output_tokens == 3 * 20);
}

TEST_CASE("After a restart, pages that were in flight are sent again and end done once") {
  fairlane::testing::TempDir dir;
  const std::string db = dir.file("restart.db");
  fairlane::JobId job_id = 0;
  {
    auto store = fairlane::testing::open_store(db);
    const auto user = store->add_user("alice")->user.id;
    const auto job = fairlane::testing::enqueue(*store, user, 6);
    job_id = job.job.id;
    // The last process died with two calls out.
    fairlane::testing::apply(*store,
                             {fairlane::PageTransition::dispatched(job.pages[0].page_id, 300),
                              fairlane::PageTransition::dispatched(job.pages[1].page_id, 300)});
  }
  Rig rig(stand_in(4), fairlane_config(4), db);
  REQUIRE(rig.dispatcher->start().ok());
  // The warm start counted the two calls of the last minute (less the few requests the
  // bucket refills, at 100 a second, before the next line runs).
  CHECK(rig.dispatcher->budget().requests().level() < 5'998.5);
  REQUIRE(rig.run_until([&] { return rig.terminal(job_id); }));
  const auto view = fairlane::testing::job_view(*rig.store, job_id);
  CHECK(view.state == JobState::done);
  CHECK(view.pages.done == 6);
  const auto results = rig.store->results(job_id).value();
  CHECK(results[0].output == "page 1");
  CHECK(rig.stats().at("ok") == 6);
  // Pages requeued at the start join their lane anew: six waits, six calls.
  CHECK(rig.dispatcher->counters().call_latency_seconds.count() == 6);
  CHECK(rig.dispatcher->counters().queue_wait_seconds.count() == 6);
}

TEST_CASE("A start that failed after requeueing the dead process's calls still holds them next") {
  // The last process died with four calls out. A start requeues their pages (load_lanes)
  // and then fails (the recent spend cannot be read, once): the next start must still hold
  // their places under the cap, though no page of theirs is in flight any more. Read from
  // the pages in flight, it found none and sent up to the cap beside the dead calls.
  fairlane::testing::TempDir dir;
  const std::string db = dir.file("requeued.db");
  {
    auto store = fairlane::testing::open_store(db);
    const auto user = store->add_user("alice")->user.id;
    const auto job = fairlane::testing::enqueue(*store, user, 6);
    std::vector<fairlane::PageTransition> sent;
    for (int i = 0; i < 4; ++i) {
      sent.push_back(fairlane::PageTransition::dispatched(
          job.pages[static_cast<std::size_t>(i)].page_id, 300));
    }
    fairlane::testing::apply(*store, sent);
  }
  struct SpendUnread final : fairlane::testing::ForwardingStore {
    using ForwardingStore::ForwardingStore;
    fairlane::Result<fairlane::Spend> recent_spend(std::chrono::milliseconds /*window*/) override {
      return fairlane::Status(fairlane::StatusCode::io_error, "not now");
    }
  };
  {
    Rig failing(stand_in(8), fairlane_config(8), db, "",
                [](std::unique_ptr<fairlane::Store> inner) {
                  return std::make_unique<SpendUnread>(std::move(inner));
                });
    REQUIRE_FALSE(failing.dispatcher->start().ok());
  }
  Rig rig(stand_in(8), fairlane_config(8), db);
  REQUIRE(rig.dispatcher->start().ok());
  CHECK(rig.dispatcher->counters().calls_inherited == 4);
  CHECK(rig.dispatcher->budget().in_flight().in_use() == 4);
  // Counted at once, for the log line and the gauge (it counted the places' timers, set
  // only once their coroutines had run: "0 calls of the previous leader held" at a takeover).
  CHECK(rig.dispatcher->inherited_in_flight() == 4);
}

TEST_CASE("After a restart the estimator starts from what the last calls cost and took") {
  fairlane::testing::TempDir dir;
  const std::string db = dir.file("warm.db");
  std::vector<std::int64_t> reserved;
  {
    fairlane::testing::ManualWallClock wall;
    auto store =
        fairlane::testing::open_store(db, fairlane::StoreOptions{.wall_clock = wall.function()});
    const auto user = store->add_user("alice")->user.id;
    const auto job = fairlane::testing::enqueue(*store, user, 40);
    // The last process's calls, one after another: each used 360 tokens and took 3 s.
    for (const auto& page : job.pages) {
      fairlane::testing::apply(
          *store, {fairlane::PageTransition::dispatched(page.page_id, page.estimated_tokens)});
      wall.advance(3s);
      fairlane::testing::apply(*store, {fairlane::PageTransition::completed(
                                           page.page_id, "ok", fairlane::Usage{300, 60})});
      reserved.push_back(page.estimated_tokens);
    }
  }
  const DispatcherConfig config = fairlane_config(4);
  Rig rig(stand_in(4), config, db);
  REQUIRE(rig.dispatcher->start().ok());
  // Its averages are those calls' own, not the configured 800 tokens and 2 s.
  const fairlane::Estimator& warm = rig.dispatcher->estimator();
  CHECK(warm.avg_tokens_per_page() == doctest::Approx(360.0));
  CHECK(warm.avg_latency_s() == doctest::Approx(3.0));
  // And its ETAs are those of an estimator that saw those calls end.
  const fairlane::FairScheduler scheduler(config.quantum);
  fairlane::EstimatorConfig limited = config.estimator;
  limited.limits = config.limits;
  fairlane::Estimator seen(scheduler, limited);
  for (const std::int64_t r : reserved) seen.record_settled(360, r, 3s);
  CHECK(warm.avg_reserved_tokens_per_page() ==
        doctest::Approx(seen.avg_reserved_tokens_per_page()));
  CHECK(warm.alone_seconds(1, 100) == doctest::Approx(seen.alone_seconds(1, 100)));
}

TEST_CASE("After a restart the estimator expects the arrivals of the last window at once") {
  fairlane::testing::TempDir dir;
  const std::string db = dir.file("arrivals.db");
  DispatcherConfig config = fairlane_config(4);
  // The last 300 s: a newcomer's book of 2 pages every 10 s, 5 s off the window's 30 s slots
  // (so that the milliseconds of this test move none across a slot's edge).
  const auto now =
      std::chrono::time_point_cast<fairlane::WallTime::duration>(std::chrono::system_clock::now());
  {
    fairlane::testing::ManualWallClock wall;
    auto store =
        fairlane::testing::open_store(db, fairlane::StoreOptions{.wall_clock = wall.function()});
    for (int i = 29; i >= 0; --i) {
      wall.now = now - std::chrono::seconds(5 + 10 * i);
      fairlane::testing::enqueue(*store, store->add_user(fmt::format("user{}", i))->user.id, 2);
    }
  }
  Rig rig(stand_in(4), config, db);
  // Before it starts (as a fresh process would): nothing seen.
  CHECK(rig.dispatcher->estimator().competition(1'000.0) == 0.0);
  REQUIRE(rig.dispatcher->start().ok());
  // The window's nine ended slots hold three books each (the tenth is the current one), the
  // busiest left out: 8 x 6 pages in 8 x 30 s, 0.2 pages a second, each page weighing
  // 1 - 1 / 1000 for a job 1,000 rounds out.
  const fairlane::Estimator& estimator = rig.dispatcher->estimator();
  CHECK(estimator.competition(1'000.0) ==
        doctest::Approx(0.2 * (1.0 - 1.0 / 1'000.0) / estimator.mu()));
}

TEST_CASE("A restart counts no job older than the arrivals' window") {
  fairlane::testing::TempDir dir;
  const std::string db = dir.file("quiet.db");
  {
    fairlane::testing::ManualWallClock wall;
    wall.now = std::chrono::time_point_cast<fairlane::WallTime::duration>(
                   std::chrono::system_clock::now()) -
               1h;
    auto store =
        fairlane::testing::open_store(db, fairlane::StoreOptions{.wall_clock = wall.function()});
    for (int i = 0; i < 30; ++i) {
      fairlane::testing::enqueue(*store, store->add_user(fmt::format("user{}", i))->user.id, 2);
      wall.advance(10s);
    }
  }
  Rig rig(stand_in(4), fairlane_config(4), db);
  REQUIRE(rig.dispatcher->start().ok());
  CHECK(rig.dispatcher->estimator().competition(1'000.0) == 0.0);
}

TEST_CASE("A page's latency, for the estimator, runs from its leaving its lane to its answer") {
  DispatcherConfig config = fairlane_config(1);
  config.estimator.latency_alpha = 1.0;  // the last call's alone
  Rig rig(stand_in(1), config);
  const auto job = rig.enqueue(rig.user("alice"), 1, "leaflet");
  REQUIRE(rig.dispatcher->start().ok());
  REQUIRE(rig.run_until([&] { return rig.terminal(job.job.id); }));
  const auto& calls = rig.dispatcher->counters().call_latency_seconds;
  REQUIRE(calls.count() == 1);
  // Its dispatch's commit and its text's read came before the call, and a job's end waits
  // for them too.
  CHECK(rig.dispatcher->estimator().avg_latency_s() > calls.sum());
  CHECK(rig.dispatcher->estimator().avg_latency_s() < calls.sum() + 1.0);
}

TEST_CASE("Cancelling a job mid-run: queued pages are cancelled, those in flight finish") {
  Rig rig(stand_in(2, 40), fairlane_config(2));
  const auto user = rig.user("alice");
  REQUIRE(rig.dispatcher->start().ok());
  const auto job = rig.enqueue(user, 20, "book");
  rig.dispatcher->add(job, 1);
  REQUIRE(rig.run_until([&] { return rig.dispatcher->counters().done >= 3; }));
  REQUIRE(rig.dispatcher->cancel(user, job.job.id).ok());
  REQUIRE(rig.run_until([&] { return rig.terminal(job.job.id); }));
  const auto view = fairlane::testing::job_view(*rig.store, job.job.id);
  CHECK(view.state == JobState::cancelled);
  CHECK(view.pages.done + view.pages.cancelled == 20);
  CHECK(view.pages.cancelled >= 10);
  CHECK(rig.dispatcher->scheduler().size() == 0);
}

TEST_CASE("Cancelled jobs leave nothing behind: 10,000 cancels, and cancels with calls out") {
  Rig rig(stand_in(2, 40), fairlane_config(2));
  const auto user = rig.user("alice");
  // The loop is not started: every page is queued when its job is cancelled.
  for (int i = 0; i < 10'000; ++i) {
    const auto job = rig.enqueue(user, 1, "note");
    rig.dispatcher->add(job, 1);
    REQUIRE(rig.dispatcher->cancel(user, job.job.id).ok());
  }
  CHECK(rig.dispatcher->tracked_pages() == 0);
  CHECK(rig.dispatcher->cancelled_jobs() == 0);
  CHECK(rig.dispatcher->scheduler().size() == 0);

  // With calls out: the job is kept in mind until its last page comes back, then forgotten.
  REQUIRE(rig.dispatcher->start().ok());
  std::vector<fairlane::JobId> jobs;
  for (int i = 0; i < 3; ++i) {
    const auto job = rig.enqueue(user, 4, "book-" + std::to_string(i));
    rig.dispatcher->add(job, 1);
    jobs.push_back(job.job.id);
  }
  REQUIRE(rig.run_until([&] { return rig.stats().at("in_flight") == 2; }));
  for (const auto job : jobs) REQUIRE(rig.dispatcher->cancel(user, job).ok());
  CHECK(rig.dispatcher->cancelled_jobs() >= 1);
  REQUIRE(rig.run_until([&] {
    return rig.dispatcher->in_flight() == 0 &&
           std::all_of(jobs.begin(), jobs.end(), [&](auto job) { return rig.terminal(job); });
  }));
  CHECK(rig.dispatcher->tracked_pages() == 0);
  CHECK(rig.dispatcher->cancelled_jobs() == 0);
}

TEST_CASE("Stopping lets the calls in flight finish, commits, and says so") {
  Rig rig(stand_in(3, 50), fairlane_config(3));
  const auto user = rig.user("alice");
  REQUIRE(rig.dispatcher->start().ok());
  const auto job = rig.enqueue(user, 20, "book");
  rig.dispatcher->add(job, 1);
  // Three calls at the provider (taken pages whose dispatch is still being committed are
  // not sent once the stop has begun).
  REQUIRE(rig.run_until([&] { return rig.stats().at("in_flight") == 3; }));
  bool stopped = false;
  rig.dispatcher->stop(5s, [&](const fairlane::Status& status) {
    CHECK(status.ok());
    stopped = true;
  });
  REQUIRE(rig.run_until([&] { return stopped; }));
  CHECK(rig.dispatcher->in_flight() == 0);
  const auto view = fairlane::testing::job_view(*rig.store, job.job.id);
  CHECK(view.pages.in_flight == 0);
  CHECK(view.pages.done >= 3);
  CHECK(view.pages.done + view.pages.queued == 20);
}

TEST_CASE("A provider that announces a lower RPM than fairlane's is followed: no refusals") {
  // The stand-in takes 120 requests a minute (2 a second once its bucket is spent) and says
  // so in every answer's headers; fairlane was told 6,000.
  sim::Config provider = stand_in(4, 5);
  provider.requests_per_minute = 120;
  Rig rig(provider, fairlane_config(4));
  const auto user = rig.user("alice");
  REQUIRE(rig.dispatcher->start().ok());
  const auto job = rig.enqueue(user, 124, "book");
  rig.dispatcher->add(job, 1);
  REQUIRE(rig.run_until([&] { return rig.terminal(job.job.id); }, 30s));
  CHECK(fairlane::testing::job_view(*rig.store, job.job.id).pages.done == 124);
  CHECK(rig.dispatcher->counters().provider_429 == 0);
  CHECK(rig.stats().at("rejected_429") == 0);
  CHECK(rig.stats().at("requests") == 124);
}

TEST_CASE("A failed attempt holds its page back, and a stop leaves it queued for the next start") {
  sim::Config provider = stand_in(4);
  provider.fail_rate = 1.0;
  DispatcherConfig config = fairlane_config(4);
  config.backoff_base = 20s;  // the first backoff is anywhere in [0, 20 s)
  config.seed = 3;
  Rig rig(provider, config);
  const auto user = rig.user("alice");
  REQUIRE(rig.dispatcher->start().ok());
  const auto job = rig.enqueue(user, 1, "book");
  rig.dispatcher->add(job, 1);
  REQUIRE(rig.run_until([&] { return rig.dispatcher->counters().retried == 1; }));
  CHECK(rig.dispatcher->held() == 1);
  CHECK(rig.dispatcher->scheduler().size() == 0);
  bool stopped = false;
  rig.dispatcher->stop(100ms, [&](const fairlane::Status& status) {
    CHECK(status.ok());
    stopped = true;
  });
  REQUIRE(rig.run_until([&] { return stopped && rig.dispatcher->held() == 0; }, 5s));
  const auto view = fairlane::testing::job_view(*rig.store, job.job.id);
  CHECK(view.pages.queued == 1);
  CHECK(rig.store->results(job.job.id).value().front().attempts == 1);
}

TEST_CASE("A page too large for a minute's TPM fails at once, naming its size") {
  DispatcherConfig config = fairlane_config(4);
  config.limits.tokens_per_minute = 200;  // the pages cost 300
  Rig rig(stand_in(4), config);
  const auto user = rig.user("alice");
  REQUIRE(rig.dispatcher->start().ok());
  const auto job = rig.enqueue(user, 2, "book");
  rig.dispatcher->add(job, 1);
  REQUIRE(rig.run_until([&] { return rig.terminal(job.job.id); }));
  const auto results = rig.store->results(job.job.id).value();
  CHECK(results[0].state == fairlane::PageState::failed);
  CHECK(results[0].error == "the page needs 300 tokens, more than the provider's 200 a minute");
  CHECK(rig.stats().at("requests") == 0);
}

TEST_CASE(
    "A provider that refuses fairlane's key pauses all dispatch and fails no page: once the key "
    "is right the backlog goes") {
  sim::Config provider = stand_in(4);
  provider.api_key = "sk-needed";  // the client sends none
  fairlane::testing::TempDir dir;
  const std::string db = dir.file("key.db");
  Rig rig(provider, fairlane_config(4), db);
  const auto user = rig.user("alice");
  REQUIRE(rig.dispatcher->start().ok());
  std::vector<fairlane::EnqueuedJob> jobs;
  for (int i = 0; i < 3; ++i) {
    jobs.push_back(rig.enqueue(user, 20, "book-" + std::to_string(i)));
    rig.dispatcher->add(jobs.back(), 1);
  }
  // Paused after the first burst's refusals (at most the cap, 4), then one call at a time
  // asks again after each pause, the pauses doubling from 20 ms: not a call for each page.
  REQUIRE(rig.run_until([&] { return rig.dispatcher->counters().outage_pauses >= 4; }));
  CHECK(rig.stats().at("unauthorized").as_int64() <= 4 + rig.dispatcher->counters().outage_pauses);
  CHECK(rig.dispatcher->counters().failed == 0);
  for (const auto& job : jobs) {
    const auto view = fairlane::testing::job_view(*rig.store, job.job.id);
    CHECK(view.pages.failed == 0);
    CHECK(view.state != JobState::failed);
  }
  // The operator gives fairlane the key and starts it again: every page is done.
  bool stopped = false;
  rig.dispatcher->stop(1s, [&](const fairlane::Status&) { stopped = true; });
  REQUIRE(rig.run_until([&] { return stopped; }));
  rig.dispatcher.reset();
  setenv("FAIRLANE_TEST_DISPATCH_KEY", "sk-needed", 1);
  fairlane::CurlProviderConfig client;
  client.base_url = "http://127.0.0.1:" + std::to_string(rig.stand_in_port);
  client.api_key_env = "FAIRLANE_TEST_DISPATCH_KEY";
  rig.provider = std::move(fairlane::make_curl_provider(rig.io, client)).value();
  rig.dispatcher =
      std::make_unique<Dispatcher>(rig.io, *rig.store, *rig.provider, fairlane_config(4));
  REQUIRE(rig.dispatcher->start().ok());
  REQUIRE(rig.run_until([&] {
    return std::all_of(jobs.begin(), jobs.end(),
                       [&](const auto& job) { return rig.terminal(job.job.id); });
  }));
  for (const auto& job : jobs) {
    const auto view = fairlane::testing::job_view(*rig.store, job.job.id);
    CHECK(view.state == JobState::done);
    CHECK(view.pages.done == 20);
  }
}

TEST_CASE("The dispatcher, the provider and the store can go while calls are out") {
  // Calls that never answer: the four out stay out until their connections close.
  sim::Config provider = stand_in(4);
  provider.timeout_rate = 1.0;
  fairlane::testing::TempDir dir;
  const std::string db = dir.file("out.db");
  Rig rig(provider, fairlane_config(4), db);
  const auto user = rig.user("alice");
  REQUIRE(rig.dispatcher->start().ok());
  const auto job = rig.enqueue(user, 8, "book");
  rig.dispatcher->add(job, 1);
  // Out means at the stand-in, not only committed as dispatched: under load curl may not
  // have sent them yet, and resetting the provider would then drop them unsent.
  REQUIRE(rig.run_until([&] {
    return rig.dispatcher->in_flight() == 4 && rig.stats().at("requests").as_int64() >= 4;
  }));
  rig.dispatcher.reset();
  rig.provider.reset();
  rig.store.reset();
  rig.io.run_for(500ms);  // whatever was pending runs, or is dropped, without a crash
  // The provider took its connections with it: the stand-in holds none of the four calls,
  // and nothing was sent after the dispatcher went.
  const auto stats = rig.stats();
  CHECK(stats.at("requests") == 4);
  CHECK(stats.at("in_flight") == 0);
  CHECK(stats.at("connections") == 0);
  // Nothing was lost: opened again, the store has the eight pages, none done, and all eight
  // are in the lane for the next start (the four that were out among them).
  auto store = fairlane::testing::open_store(db);
  const auto view = fairlane::testing::job_view(*store, job.job.id);
  CHECK(view.pages.done == 0);
  CHECK(view.pages.queued + view.pages.in_flight == 8);
  const auto lanes = store->load_lanes();
  REQUIRE(lanes.ok());
  REQUIRE(lanes->size() == 1);
  CHECK(lanes->front().pages.size() == 8);
}

TEST_CASE("When the store stops committing, the dispatcher says so, and a stop reports it") {
  fairlane::testing::FaultyVfs::install();
  fairlane::testing::TempDir dir;
  const std::string db = dir.file("full.db");
  {
    // The database exists before the fault VFS opens it.
    auto store = fairlane::testing::open_store(db);
  }
  sim::Config provider = stand_in(2, 20);
  Rig rig(provider, fairlane_config(2), db, fairlane::testing::FaultyVfs::kName);
  const auto user = rig.user("alice");
  REQUIRE(rig.dispatcher->start().ok());
  rig.dispatcher->add(rig.enqueue(user, 10, "book"), 1);
  REQUIRE(rig.run_until([&] { return rig.dispatcher->counters().done >= 2; }));
  fairlane::testing::FaultyVfs::fill_disk();
  REQUIRE(rig.run_until([&] { return !rig.dispatcher->store_error().ok(); }));
  CHECK(rig.dispatcher->store_error().code() == fairlane::StatusCode::disk_full);
  std::optional<fairlane::Status> stopped;
  rig.dispatcher->stop(300ms, [&](const fairlane::Status& status) { stopped = status; });
  REQUIRE(rig.run_until([&] { return stopped.has_value(); }, 5s));
  CHECK(stopped->code() == fairlane::StatusCode::disk_full);
  fairlane::testing::FaultyVfs::heal();
}

namespace {

// Refuses, for what it holds, every batch with a completion of `page` (as PostgreSQL refused
// a NUL in text).
class RefusingStore final : public fairlane::testing::ForwardingStore {
 public:
  RefusingStore(std::unique_ptr<fairlane::Store> inner, fairlane::PageId page)
      : ForwardingStore(std::move(inner)), page_(page) {}

  fairlane::Result<std::vector<std::int64_t>> apply(
      std::span<const fairlane::PageTransition> transitions) override {
    for (const fairlane::PageTransition& t : transitions) {
      if (t.page_id == page_ && t.kind == fairlane::PageTransition::Kind::completed) {
        return fairlane::Status{fairlane::StatusCode::invalid_argument,
                                "recording page transitions: parameter $5 holds a NUL byte"};
      }
    }
    return ForwardingStore::apply(transitions);
  }

 private:
  fairlane::PageId page_;
};

}  // namespace

TEST_CASE("A result the store refuses fails its page with the reason, and the rest are done") {
  // The job's second page is refused; its id is known once the job is enqueued, and pages'
  // ids count from 1 in a new database.
  static constexpr fairlane::PageId kRefused = 2;
  Rig rig(stand_in(4), fairlane_config(4), ":memory:", "",
          [](std::unique_ptr<fairlane::Store> inner) -> std::unique_ptr<fairlane::Store> {
            return std::make_unique<RefusingStore>(std::move(inner), kRefused);
          });
  const auto user = rig.user("alice");
  REQUIRE(rig.dispatcher->start().ok());
  const auto job = rig.enqueue(user, 8, "book");
  REQUIRE(job.pages[1].page_id == kRefused);
  rig.dispatcher->add(job, 1);
  // Before, the batch holding the refused result was retried for good: nothing was written
  // again and the job never ended.
  REQUIRE(rig.run_until([&] { return rig.terminal(job.job.id); }));
  const auto results = rig.store->results(job.job.id).value();
  for (std::size_t i = 0; i < results.size(); ++i) {
    CAPTURE(i);
    CHECK(results[i].state == (i == 1 ? fairlane::PageState::failed : fairlane::PageState::done));
  }
  CHECK(results[1].error ==
        "the store refused this page's change (invalid_argument: recording page transitions: "
        "parameter $5 holds a NUL byte)");
  CHECK(rig.dispatcher->counters().store_refused == 1);
  CHECK(rig.dispatcher->store_error().ok());  // the batches since have committed
}

TEST_CASE("A page whose text the store cannot give now waits for it, spending no attempt") {
  // The job's second page; ids count from 1 in a new database. Its text cannot be read more
  // times than a page may fail attempts. A lock is the store's: before, the page failed
  // "gave up after 5 attempts: its text could not be read", for no fault of its own. A
  // disk failing under SQLite's file may be the page's own: it spends attempts, as before.
  static constexpr fairlane::PageId kUnread = 2;
  constexpr int kFailures = 7;
  for (const bool locked : {true, false}) {
    CAPTURE(locked);
    const fairlane::Status why =
        locked ? fairlane::Status{fairlane::StatusCode::busy,
                                  "reading a page: the database is locked (database is locked)"}
               : fairlane::Status{fairlane::StatusCode::io_error,
                                  "reading a page: disk I/O error (disk I/O error)"};
    fairlane::testing::UnreadTexts* texts = nullptr;
    Rig rig(stand_in(4), fairlane_config(4), ":memory:", "",
            [&](std::unique_ptr<fairlane::Store> inner) -> std::unique_ptr<fairlane::Store> {
              auto store = std::make_unique<fairlane::testing::UnreadTexts>(
                  std::move(inner), kUnread, kFailures, why);
              texts = store.get();
              return store;
            });
    REQUIRE(texts != nullptr);
    const DispatcherConfig defaults;
    REQUIRE(defaults.max_attempts < kFailures);
    const auto user = rig.user("alice");
    REQUIRE(rig.dispatcher->start().ok());
    const auto job = rig.enqueue(user, 4, "book");
    REQUIRE(job.pages[1].page_id == kUnread);
    rig.dispatcher->add(job, 1);
    REQUIRE(rig.run_until([&] { return rig.terminal(job.job.id); }));
    const auto results = rig.store->results(job.job.id).value();
    for (const fairlane::PageResult& page : results) {
      CAPTURE(page.seq);
      const bool unread = page.seq == 1;
      CHECK(page.state ==
            (unread && !locked ? fairlane::PageState::failed : fairlane::PageState::done));
      // The store counts the attempts retried; the one that failed the page is in its error.
      CHECK(page.attempts == (unread && !locked ? defaults.max_attempts - 1 : 0));
    }
    if (locked) {
      CHECK(texts->reads() == kFailures + 1);
      CHECK(rig.dispatcher->counters().requeued == kFailures);
    } else {
      CHECK(texts->reads() == defaults.max_attempts);
      CHECK(
          results[1].error.value_or("").starts_with("gave up after 5 attempts: its text could "
                                                    "not be read: reading a page: disk I/O"));
    }
  }
}

namespace {

// Refuses, for what it holds, every batch that cancels job `job`.
class RefusesCancelOf final : public fairlane::testing::ForwardingStore {
 public:
  RefusesCancelOf(std::unique_ptr<fairlane::Store> inner, fairlane::JobId job)
      : ForwardingStore(std::move(inner)), job_(job) {}

  fairlane::Result<std::vector<std::int64_t>> apply(
      std::span<const fairlane::PageTransition> transitions) override {
    for (const fairlane::PageTransition& t : transitions) {
      if (t.job_id == job_ && t.kind == fairlane::PageTransition::Kind::job_cancelled) {
        return fairlane::Status{fairlane::StatusCode::invalid_argument, "refused for the test"};
      }
    }
    return ForwardingStore::apply(transitions);
  }

 private:
  fairlane::JobId job_;
};

}  // namespace

TEST_CASE(
    "A cancellation is acknowledged once it is committed, also while a refused batch is "
    "committed one change at a time") {
  // Jobs' ids count from 1 in a new database: the first job's cancellation is refused.
  Rig rig(stand_in(4), fairlane_config(4), ":memory:", "",
          [](std::unique_ptr<fairlane::Store> inner) -> std::unique_ptr<fairlane::Store> {
            return std::make_unique<RefusesCancelOf>(std::move(inner), 1);
          });
  const auto user = rig.user("alice");
  REQUIRE(rig.dispatcher->start().ok());
  std::vector<fairlane::JobId> jobs;
  for (int i = 0; i < 4; ++i) {
    jobs.push_back(rig.enqueue(user, 2, "book-" + std::to_string(i)).job.id);
  }
  REQUIRE(jobs.front() == 1);
  const auto state = [&](fairlane::JobId job) {
    return fairlane::testing::job_view(*rig.store, job).state;
  };

  // The first is refused (and stays queued, to be retried). So is the batch the second
  // joins it in: that batch is taken apart and committed one change at a time, the refused
  // one dropped. Every cancellation acknowledged is in the store when it is acknowledged:
  // before, a flush committed only the first change of the batch taken apart, and the
  // second was answered with the first's refusal, the third too, and the fourth
  // acknowledged while it was still queued.
  CHECK_FALSE(rig.dispatcher->cancel(user, jobs[0]).ok());
  for (const std::size_t i : {std::size_t{1}, std::size_t{2}, std::size_t{3}}) {
    CAPTURE(i);
    const fairlane::Status cancelled = rig.dispatcher->cancel(user, jobs[i]);
    CHECK_MESSAGE(cancelled.ok(), cancelled.message());
    CHECK(state(jobs[i]) == JobState::cancelled);
  }
  CHECK(state(jobs[0]) == JobState::queued);
  CHECK(rig.dispatcher->counters().store_refused == 1);
}

TEST_CASE("A cancellation the store drops leaves its job running, as the store holds it") {
  // Jobs' ids count from 1 in a new database: the first job's cancellation is refused, then
  // dropped. The user is told it failed, and the store still holds the job queued: before,
  // its pages had already left the lanes, so it was never dispatched nor ended until a
  // restart read it again.
  Rig rig(stand_in(4), fairlane_config(4), ":memory:", "",
          [](std::unique_ptr<fairlane::Store> inner) -> std::unique_ptr<fairlane::Store> {
            return std::make_unique<RefusesCancelOf>(std::move(inner), 1);
          });
  const auto user = rig.user("alice");
  REQUIRE(rig.dispatcher->start().ok());
  const auto job = rig.enqueue(user, 8, "book");
  REQUIRE(job.job.id == 1);
  rig.dispatcher->add(job, 1);
  const fairlane::Status cancelled = rig.dispatcher->cancel(user, job.job.id);
  CHECK(cancelled.code() == fairlane::StatusCode::internal);  // 500: not the caller's fault
  CHECK(cancelled.message() ==
        "job 1 was not cancelled and goes on: the job store refused the cancellation "
        "(invalid_argument: refused for the test; that change is dropped). Tell the service's "
        "operator.");
  CHECK(rig.dispatcher->tracks_job(job.job.id));
  REQUIRE(rig.run_until([&] { return rig.terminal(job.job.id); }));
  const auto view = fairlane::testing::job_view(*rig.store, job.job.id);
  CHECK(view.state == JobState::done);
  CHECK(view.pages.done == 8);
  CHECK(rig.dispatcher->tracked_pages() == 0);
  CHECK(rig.dispatcher->cancelled_jobs() == 0);
}

TEST_CASE("Results that cannot be written wait, are written once when space returns") {
  fairlane::testing::FaultyVfs::install();
  fairlane::testing::TempDir dir;
  const std::string db = dir.file("full.db");
  { auto store = fairlane::testing::open_store(db); }
  Rig rig(stand_in(4, 50), fairlane_config(4), db, fairlane::testing::FaultyVfs::kName);
  const auto user = rig.user("alice");
  REQUIRE(rig.dispatcher->start().ok());
  const auto job = rig.enqueue(user, 20, "book");
  rig.dispatcher->add(job, 1);
  REQUIRE(rig.run_until([&] { return rig.stats().at("in_flight") == 4; }));
  fairlane::testing::FaultyVfs::fill_disk();
  // The four calls out are answered; their results cannot be written, nor can new
  // dispatches, so nothing more goes to the provider.
  REQUIRE(rig.run_until(
      [&] { return !rig.dispatcher->store_error().ok() && rig.stats().at("in_flight") == 0; }));
  CHECK(rig.dispatcher->store_error().code() == fairlane::StatusCode::disk_full);
  rig.io.run_for(300ms);
  const auto answered_while_full = rig.stats().at("ok").as_int64();
  rig.io.run_for(300ms);
  CHECK(rig.stats().at("ok").as_int64() == answered_while_full);
  CHECK(rig.store->write_health().code() == fairlane::StatusCode::disk_full);

  fairlane::testing::FaultyVfs::heal();
  REQUIRE(rig.run_until([&] { return rig.terminal(job.job.id); }));
  CHECK(rig.dispatcher->store_error().ok());
  const auto view = fairlane::testing::job_view(*rig.store, job.job.id);
  CHECK(view.state == JobState::done);
  CHECK(view.pages.done == 20);
  // Each page was sent once, and each result written once.
  CHECK(rig.stats().at("ok") == 20);
  CHECK(rig.dispatcher->counters().done == 20);
  const auto results = rig.store->results(job.job.id).value();
  for (std::size_t i = 0; i < results.size(); ++i) {
    CHECK(results[i].output == "book page " + std::to_string(i + 1));
  }
}

namespace {

// A provider that answers every call with one outcome, at once, and no rate-limit headers.
class ScriptedProvider final : public fairlane::Provider {
 public:
  ScriptedProvider(boost::asio::io_context& io, fairlane::ProviderOutcome outcome)
      : io_(io), outcome_(std::move(outcome)) {}
  void call(const fairlane::ProviderRequest&, Done done) override {
    boost::asio::post(io_, [done = std::move(done), o = outcome_] { done(o); });
  }
  [[nodiscard]] std::size_t in_flight() const override { return 0; }

 private:
  boost::asio::io_context& io_;
  fairlane::ProviderOutcome outcome_;
};

}  // namespace

// The provider asks for two minutes (a 429 with Retry-After: 120): the job's promise is
// revised for the pause (PromiseWatch), and its job object says the same. Before, its
// eta_seconds was the queue's alone, a few seconds, for as long as the pause lasted.
TEST_CASE("A job's eta_seconds counts what is left of a pause of all dispatch") {
  namespace o = fairlane::outcome;
  boost::asio::io_context io;
  auto store = fairlane::testing::open_store(":memory:");
  ScriptedProvider provider(io, fairlane::ProviderOutcome{o::RateLimited{120s}, 429, {}, 1ms});
  Dispatcher dispatcher(io, *store, provider, fairlane_config(1));
  const auto alice = store->add_user("alice");
  REQUIRE(alice.ok());
  REQUIRE(dispatcher.start().ok());
  auto job = store->enqueue_job(JobRequest{
      alice->user.id, "book", {PageInput{"page one", 300}, PageInput{"page two", 300}}, 100});
  REQUIRE(job.ok());
  dispatcher.add(job.value(), 1);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!dispatcher.paused_until() && std::chrono::steady_clock::now() < deadline) {
    io.run_for(10ms);
  }
  REQUIRE(dispatcher.paused_until().has_value());
  fairlane::service::Router router(
      *store, dispatcher,
      fairlane::service::RouterConfig{"admin-secret", "Extract.", 200, 1'000, 2'000'000});
  const auto answer = router.handle(fairlane::service::ApiRequest{
      "GET", "/v1/jobs/" + job->job.public_id, {{"Authorization", "Bearer " + alice->key}}, ""});
  REQUIRE(answer.status == 200);
  const double eta = boost::json::parse(answer.body).at("eta_seconds").to_number<double>();
  CHECK(eta > 110.0);
  CHECK(eta < 130.0);
}

// The adapter's half of the outcome table (the decisions are the policy's, tested in
// tests/core/dispatch_policy_test.cpp): each provider outcome is mapped to the core's, and
// its verdict is counted and committed as the page's transition, with the reason sentence,
// the attempts and the tokens the policy decided.
TEST_CASE("Each provider outcome reaches the store as the policy decided") {
  namespace o = fairlane::outcome;
  using fairlane::PageState;
  struct Case {
    const char* name;
    fairlane::OutcomeKind kind;
    int http_status;
    PageState state;
    std::int64_t attempts;
    std::optional<std::string> error;
    std::int64_t tokens_kept;
    bool paused;
  };
  const std::string no_answer = "the provider did not answer in time";
  const Case cases[] = {
      {"ok", o::Ok{"text", 200, 20}, 200, PageState::done, 0, std::nullopt, 220, false},
      {"429", o::RateLimited{60s}, 429, PageState::queued, 0, std::nullopt, 0, true},
      {"503", o::Overloaded{}, 503, PageState::queued, 0, std::nullopt, 0, true},
      {"unreachable", o::ConnectionError{"refused", true}, 0, PageState::queued, 0, std::nullopt, 0,
       true},
      {"reset", o::ConnectionError{"reset", false}, 0, PageState::queued, 1,
       "could not reach the provider (reset)", 0, false},
      {"timeout", o::Timeout{}, 0, PageState::queued, 1, no_answer, 0, false},
      {"500", o::ServerError{500, "internal"}, 500, PageState::queued, 1,
       "the provider answered 500 (internal)", 0, false},
      {"400", o::ClientError{400, "bad request"}, 400, PageState::failed, 0,
       "the provider refused the request with 400 (bad request)", 0, false},
      // The provider refuses fairlane itself (its key, its account, a proxy's login): every
      // page would meet the same, so it is an outage, not this page's failure.
      // (provider::classify tells them apart, and names what to check.)
      {"401", o::ClientError{401, "invalid API key", "check the key"}, 401, PageState::queued, 0,
       std::nullopt, 0, true},
      {"402", o::ClientError{402, "payment required", "check the payment"}, 402, PageState::queued,
       0, std::nullopt, 0, true},
      {"407", o::ClientError{407, "proxy login", "check the proxy"}, 407, PageState::queued, 0,
       std::nullopt, 0, true},
      {"429 out of quota", o::ClientError{429, "You exceeded your current quota", "check billing"},
       429, PageState::queued, 0, std::nullopt, 0, true},
      // 403 and 404 may be the page's own (a proxy refusing its text, a model that takes no
      // images): its failure, as any other 4xx.
      {"403", o::ClientError{403, "blocked"}, 403, PageState::failed, 0,
       "the provider refused the request with 403 (blocked)", 0, false},
      {"404", o::ClientError{404, "no endpoint takes images"}, 404, PageState::failed, 0,
       "the provider refused the request with 404 (no endpoint takes images)", 0, false},
      // A 2xx whose body cannot be read keeps its tokens spent; any other status gives them back.
      {"unreadable 200", o::BadResponse{"not JSON"}, 200, PageState::queued, 1,
       "the provider's answer was unusable: not JSON", 300, false},
      {"unreadable 502", o::BadResponse{"not JSON"}, 502, PageState::queued, 1,
       "the provider's answer was unusable: not JSON", 0, false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    boost::asio::io_context io;
    auto store = fairlane::testing::open_store(":memory:");
    ScriptedProvider provider(io, fairlane::ProviderOutcome{c.kind, c.http_status, {}, 1ms});
    DispatcherConfig config = fairlane_config(1);
    config.limits.tokens_per_minute = 1'000;  // refills 17 tokens a second
    config.backoff_base = 60s;                // a page held back stays held, a pause paused
    config.default_pause = 60s;
    Dispatcher dispatcher(io, *store, provider, config);
    const auto user = store->add_user("alice")->user.id;
    REQUIRE(dispatcher.start().ok());
    auto job = store->enqueue_job(JobRequest{user, "book", {PageInput{"page", 300}}, 100});
    REQUIRE(job.ok());
    const fairlane::WallTime before = std::chrono::system_clock::now();
    dispatcher.add(job.value(), 1);
    const auto page = [&] { return store->results(job->job.id).value().front(); };
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while ((dispatcher.counters().outcomes.empty() || page().state == PageState::in_flight) &&
           std::chrono::steady_clock::now() < deadline) {
      io.run_for(10ms);
    }
    const auto& counters = dispatcher.counters();
    REQUIRE(counters.outcomes.size() == 1);
    CHECK(counters.dispatched == 1);  // and no second call: paused, held or ended
    CHECK(page().state == c.state);
    CHECK(page().attempts == c.attempts);
    CHECK(page().error == c.error);
    CHECK(dispatcher.paused_until().has_value() == c.paused);
    CHECK(counters.done == (c.state == PageState::done ? 1 : 0));
    CHECK(counters.failed == (c.state == PageState::failed ? 1 : 0));
    CHECK(counters.retried == c.attempts);
    CHECK(counters.requeued == (c.paused ? 1 : 0));
    // (An account out of quota is a 429 that is no rate limit: an outage.)
    const bool limited = std::holds_alternative<o::RateLimited>(c.kind);
    const bool overloaded = std::holds_alternative<o::Overloaded>(c.kind);
    CHECK(counters.provider_429 == (limited ? 1 : 0));
    CHECK(counters.provider_503 == (overloaded ? 1 : 0));
    const bool outage = c.paused && !limited && !overloaded;
    CHECK(counters.outage_pauses == (outage ? 1 : 0));
    CHECK(dispatcher.held() == static_cast<std::size_t>(c.attempts));
    if (c.attempts > 0) {
      // The backoff's end, on the wall clock, is kept for a restart: within [0, 60 s).
      const auto lanes = store->load_lanes();
      REQUIRE(lanes.ok());
      REQUIRE(lanes->size() == 1);
      const auto not_before = lanes->front().pages.front().not_before;
      REQUIRE(not_before.has_value());
      CHECK(*not_before >= before - 1s);  // stored to the millisecond
      CHECK(*not_before < std::chrono::system_clock::now() + 60s);
    }
    // What the bucket lacks of full: the tokens kept, less what it refilled meanwhile (50
    // tokens are 3 s).
    const auto& tokens = dispatcher.budget().tokens();
    const std::int64_t used = tokens.capacity() - tokens.remaining();
    CHECK(used <= c.tokens_kept);
    CHECK(used >= c.tokens_kept - 50);
  }
}

// Two backlogged users whose pages fairlane estimates alike (900 bytes each), but one writes
// Chinese, which the stand-in counts as real tokenizers do (a token a character, 1.3 times
// the estimate), the other ASCII (0.8 times): each settle corrects its lane's credit, so
// while both are backlogged the provider COUNTS the same tokens for each.
TEST_CASE("Backlogged users share the tokens the provider counted, not fairlane's estimates") {
  sim::Config provider = stand_in(2, 5);
  provider.cjk_tokens = true;
  Rig rig(provider, fairlane_config(2));
  const auto dense = rig.user("dense");
  const auto plain = rig.user("plain");
  const DispatcherConfig defaults;
  const auto enqueue = [&](fairlane::UserId user, const std::string& page) {
    std::vector<PageInput> inputs;
    const auto estimate =
        static_cast<std::int64_t>((defaults.prompt.size() + page.size() + 3) / 4) + 100;
    for (int i = 0; i < 120; ++i) inputs.push_back({page, estimate});
    auto job = rig.store->enqueue_job(JobRequest{user, "book", inputs, 100});
    REQUIRE(job.ok());
    rig.dispatcher->add(job.value(), 1);
    return job->job.id;
  };
  std::string chinese;
  for (int i = 0; i < 300; ++i) chinese += "\xe6\xbc\xa2";  // U+6F22, three bytes
  const auto dense_job = enqueue(dense, chinese);
  const auto plain_job = enqueue(plain, std::string(900, 'a'));
  std::optional<std::pair<std::int64_t, std::int64_t>> counted;  // when the first job ends
  rig.dispatcher->on_job_changed([&](fairlane::JobId) {
    if (counted || (!rig.terminal(dense_job) && !rig.terminal(plain_job))) return;
    const auto tokens = [&](fairlane::JobId job) {
      const auto view = fairlane::testing::job_view(*rig.store, job);
      return view.usage.input_tokens + view.usage.output_tokens;
    };
    counted.emplace(tokens(dense_job), tokens(plain_job));
  });
  REQUIRE(rig.dispatcher->start().ok());
  REQUIRE(rig.run_until([&] { return counted.has_value(); }, 60s));
  INFO("dense ", counted->first, " tokens, plain ", counted->second);
  const double ratio = static_cast<double>(counted->first) / static_cast<double>(counted->second);
  CHECK(ratio == doctest::Approx(1.0).epsilon(0.05));
  CHECK(rig.stats().at("rejected_429") == 0);
}

namespace {

// Counts the reads of job views, one at a time and by the set.
class CountingJobReads final : public fairlane::testing::ForwardingStore {
 public:
  CountingJobReads(std::unique_ptr<fairlane::Store> inner, int& one_at_a_time)
      : ForwardingStore(std::move(inner)), one_at_a_time_(one_at_a_time) {}

  fairlane::Result<fairlane::JobView> job(fairlane::JobId job) override {
    ++one_at_a_time_;
    return ForwardingStore::job(job);
  }

 private:
  int& one_at_a_time_;
};

}  // namespace

TEST_CASE("A start reads the jobs whose promises it keeps together, not one at a time") {
  // On PostgreSQL each read is a round trip, and a takeover's start is what a follower's
  // lease waits for.
  int one_at_a_time = 0;
  Rig rig(stand_in(4), fairlane_config(4), ":memory:", "", [&](std::unique_ptr<fairlane::Store> s) {
    return std::make_unique<CountingJobReads>(std::move(s), one_at_a_time);
  });
  const auto alice = rig.user("alice");
  const auto bob = rig.user("bob");
  std::vector<fairlane::JobId> promised;
  for (int k = 0; k < 40; ++k) {
    JobRequest request{k % 2 == 0 ? alice : bob, "promised", {PageInput{"page", 300}}, 100};
    request.promised_eta_s = 30.0 + k;
    const auto job = rig.store->enqueue_job(request);
    REQUIRE(job.ok());
    promised.push_back(job->job.id);
  }
  (void)rig.enqueue(alice, 2, "unpromised");
  REQUIRE(rig.dispatcher->start().ok());
  CHECK(one_at_a_time == 0);
  std::vector<fairlane::JobId> restored;
  for (const auto& job : rig.dispatcher->restored_promises()) restored.push_back(job.id);
  std::sort(restored.begin(), restored.end());
  CHECK(restored == promised);
}

TEST_CASE(
    "Jobs restored at start keep the door's promise, and a Router made after start watches them") {
  Rig rig(stand_in(4), fairlane_config(4));
  const auto alice = rig.user("alice");
  JobRequest request{alice, "promised", {PageInput{"promised page 1", 300}}, 100};
  request.promised_eta_s = 30.0;
  const auto promised = rig.store->enqueue_job(request);
  REQUIRE(promised.ok());
  REQUIRE(promised->job.promised_eta_at);
  (void)rig.enqueue(alice, 2, "unpromised");  // no promise: nothing to keep
  REQUIRE(rig.dispatcher->start().ok());
  const auto& restored = rig.dispatcher->restored_promises();
  REQUIRE(restored.size() == 1);
  CHECK(restored[0].id == promised->job.id);
  CHECK(restored[0].promised_eta_at == promised->job.promised_eta_at);
  fairlane::service::Router router(
      *rig.store, *rig.dispatcher,
      fairlane::service::RouterConfig{"admin-secret", "Extract.", 200, 1'000, 2'000'000});
  CHECK(router.promises().watched() == 1);
}
