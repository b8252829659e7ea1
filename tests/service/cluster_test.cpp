// A cluster's dispatch on the tests' PostgreSQL server (DESIGN.md section 10): two instances
// in one process, each with its own store connection, dispatcher and router, on one database
// and one provider stand-in on loopback. Every wait is bounded.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fairlane/core/estimator.hpp"
#include "fairlane/provider/curl_provider.hpp"
#include "fairlane/store/cluster.hpp"
#include "fairlane/store/page_transition.hpp"
#include "provider_sim.hpp"
#include "service/dispatcher.hpp"
#include "service/leadership.hpp"
#include "service/router.hpp"
#include "store/pg.hpp"
#include "support/forwarding_store.hpp"
#include "support/loop.hpp"
#include "support/store.hpp"
#include "support/store_home.hpp"
#include "support/unread_texts.hpp"

using namespace std::chrono_literals;
using fairlane::JobRequest;
using fairlane::JobState;
using fairlane::PageInput;
using fairlane::PageTransition;
using fairlane::StatusCode;
using fairlane::service::Dispatcher;
using fairlane::service::DispatcherConfig;
namespace sim = fairlane::provider_sim;

namespace {

constexpr std::int64_t kCap = 3;

DispatcherConfig config() {
  DispatcherConfig c;
  c.limits = {.requests_per_minute = 60'000, .tokens_per_minute = 6'000'000, .max_in_flight = kCap};
  c.backoff_base = 20ms;
  c.seed = 11;
  return c;
}

// The same, with the estimator's arrivals counted over `window` (in ten slots).
DispatcherConfig config(std::chrono::seconds window) {
  DispatcherConfig c = config();
  c.estimator.arrival_window = window;
  return c;
}

fairlane::WallTime wall_now() {
  return std::chrono::time_point_cast<fairlane::WallTime::duration>(
      std::chrono::system_clock::now());
}

// One instance: its connection to the database, its dispatcher and its router.
struct Instance {
  // `page_store`: where the dispatcher reads pages' texts (a connection of its own unless
  // given).
  Instance(boost::asio::io_context& io, fairlane::testing::StoreHome& home, std::uint16_t port,
           std::string id, DispatcherConfig dispatcher_config = config(),
           std::unique_ptr<fairlane::Store> page_store = nullptr)
      : name(std::move(id)), store(home.open()) {
    fairlane::CurlProviderConfig client;
    client.base_url = "http://127.0.0.1:" + std::to_string(port);
    client.max_connections = kCap;
    provider = std::move(fairlane::make_curl_provider(io, client)).value();
    // As `fairlane serve` on PostgreSQL: batches commit, and pages' texts are read, on
    // connections of their own.
    if (!page_store) page_store = home.open();
    dispatcher = std::make_unique<Dispatcher>(io, *store, *provider, std::move(dispatcher_config),
                                              home.open(), std::move(page_store));
    fairlane::service::RouterConfig router_config;
    router_config.membership = &membership;
    membership.instance = name;
    router = std::make_unique<fairlane::service::Router>(*store, *dispatcher, router_config);
  }

  fairlane::ClusterStore& cluster() { return *store->cluster(); }

  // Takes the lease under its name and leads with its epoch, which it returns.
  std::int64_t lead() {
    const auto lease = cluster().claim_lease(name, 60s);
    REQUIRE(lease.ok());
    REQUIRE(lease->held);
    REQUIRE(dispatcher->lead(name, lease->epoch).ok());
    return lease->epoch;
  }

  std::string name;
  fairlane::service::Membership membership;
  std::unique_ptr<fairlane::Store> store;
  std::unique_ptr<fairlane::Provider> provider;
  std::unique_ptr<Dispatcher> dispatcher;
  std::unique_ptr<fairlane::service::Router> router;
};

struct Cluster {
  Cluster() : stand_in(io, provider_config()) {
    auto listening = stand_in.listen("127.0.0.1", 0);
    REQUIRE(listening.ok());
    port = listening.value();
  }

  static sim::Config provider_config() {
    sim::Config c;
    c.requests_per_minute = 60'000;
    c.tokens_per_minute = 6'000'000;
    c.max_in_flight = kCap;
    c.latency_ms = 30;
    c.output_tokens = 20;
    return c;
  }

  bool run_until(const std::function<bool()>& done, std::chrono::seconds limit = 20s) {
    return fairlane::testing::run_until(io, done, limit);
  }

  boost::json::object stats() const {
    return boost::json::parse(stand_in.stats_json()).as_object();
  }

  boost::asio::io_context io;
  sim::Server stand_in;
  std::uint16_t port = 0;
};

fairlane::EnqueuedJob enqueue(fairlane::Store& store, fairlane::UserId user, int pages,
                              const std::string& name) {
  std::vector<PageInput> inputs;
  for (int i = 1; i <= pages; ++i) inputs.push_back({name + "-p" + std::to_string(i), 300});
  auto job = store.enqueue_job(JobRequest{user, name, inputs, 100});
  REQUIRE_MESSAGE(job.ok(), job.status().message());
  return std::move(job).value();
}

std::int64_t done_pages(fairlane::Store& store, fairlane::JobId job) {
  const auto view = store.job(job);
  return view.ok() ? view->pages.done : -1;
}

// Every page of the job done, with its own text as output, once.
void check_done_once(fairlane::Store& store, const fairlane::EnqueuedJob& job, int pages) {
  const auto results = store.results(job.job.id);
  REQUIRE(results.ok());
  REQUIRE(results->size() == static_cast<std::size_t>(pages));
  for (int i = 0; i < pages; ++i) {
    const auto& page = (*results)[static_cast<std::size_t>(i)];
    CHECK(page.state == fairlane::PageState::done);
    CHECK(page.output.value_or("") == job.job.name + "-p" + std::to_string(i + 1));
  }
}

// Two instances, a and b, on one database, and alice's book of `pages` pages queued there.
struct TwoWithABook {
  TwoWithABook(fairlane::testing::StoreHome& home, int pages)
      : a(cluster.io, home, cluster.port, "a"),
        b(cluster.io, home, cluster.port, "b"),
        user(a.store->add_user("alice")->user.id),
        job(enqueue(*a.store, user, pages, "book")) {}

  Cluster cluster;
  Instance a;
  Instance b;
  fairlane::UserId user;
  fairlane::EnqueuedJob job;
};

std::unique_ptr<fairlane::testing::StoreHome> postgresql() {
  auto home = fairlane::testing::StoreHome::postgresql();
  if (!home) MESSAGE(fairlane::testing::kNoPgServer);
  return home;
}

}  // namespace

TEST_CASE(
    "PostgreSQL: a deposed leader stops at its first fenced commit, and the new leader "
    "finishes every page once") {
  auto home = postgresql();
  if (!home) return;
  TwoWithABook two(*home, 30);
  auto& [cluster, a, b, user, job] = two;

  const std::int64_t first = a.lead();
  std::vector<fairlane::Status> deposed;
  a.dispatcher->on_deposed([&](const fairlane::Status& why) {
    deposed.push_back(why);
    REQUIRE(a.dispatcher->follow().ok());
  });
  REQUIRE(cluster.run_until([&] { return done_pages(*b.store, job.job.id) >= 5; }));

  // b takes the lease over (as a follower would once a's ran out) and leads with its epoch.
  REQUIRE(b.cluster().release_lease("a").ok());
  CHECK(b.lead() > first);

  // a's next commit is refused: it is told once, and stops dispatching.
  REQUIRE(cluster.run_until([&] { return !deposed.empty(); }));
  CHECK(deposed.front().code() == StatusCode::fenced);
  CHECK_FALSE(a.dispatcher->dispatching());
  CHECK(b.dispatcher->dispatching());

  REQUIRE(cluster.run_until([&] { return done_pages(*b.store, job.job.id) == 30; }));
  check_done_once(*b.store, job, 30);
  CHECK(deposed.size() == 1);
  const auto stats = cluster.stats();
  CHECK(stats.at("rejected_503").as_int64() == 0);
  CHECK(stats.at("max_in_flight_seen").as_int64() <= kCap);
}

// SIGTERM on a leader: its calls out may finish, within the stop's deadline. If it learns
// meanwhile that another instance took the lease (its renewal finds it held, a commit is
// fenced), its dispatcher is replaced by a follower's view: the stop must still end, at once
// (what was out is the new leader's to requeue), and nothing may lead again. Before, the
// replacement dropped the stop and its callback: `fairlane serve` waited for ever, and a
// later claim could lead again after SIGTERM.
TEST_CASE("PostgreSQL: a leader deposed while it stops ends its stop and does not lead again") {
  auto home = postgresql();
  if (!home) return;
  TwoWithABook two(*home, 30);
  auto& [cluster, a, b, user, job] = two;
  a.lead();
  REQUIRE(cluster.run_until([&] { return a.dispatcher->in_flight() > 0; }));

  // a is told to stop with its calls still out; b takes the lease over, and a's next look
  // at the lease makes it a follower (Leadership::claim).
  std::optional<fairlane::Status> stopped;
  a.dispatcher->stop(30s, [&](const fairlane::Status& status) { stopped = status; });
  REQUIRE(b.cluster().release_lease("a").ok());
  const std::int64_t epoch = b.lead();
  REQUIRE(a.dispatcher->follow().ok());
  REQUIRE(cluster.run_until([&] { return stopped.has_value(); }, 10s));
  CHECK(stopped->ok());
  CHECK_FALSE(a.dispatcher->dispatching());

  // The lease comes back to a: it does not lead again, it is stopping.
  REQUIRE(b.cluster().release_lease("b").ok());
  const auto lease = a.cluster().claim_lease("a", 60s);
  REQUIRE(lease.ok());
  REQUIRE(lease->held);
  CHECK(lease->epoch > epoch);
  const fairlane::Status led = a.dispatcher->lead("a", lease->epoch);
  CHECK_FALSE(led.ok());
  CHECK(led.message().find("stopping") != std::string::npos);
  CHECK_FALSE(a.dispatcher->dispatching());
  b.dispatcher->stop(1s, [](const fairlane::Status&) {});
}

// The leader adopts a job another instance accepted when it hears of it, which may be after
// a later job of the same user: that job still goes first, as the store's lanes have it.
TEST_CASE(
    "PostgreSQL: a job accepted elsewhere first and heard of after the leader's own goes "
    "before it in its user's lane") {
  auto home = postgresql();
  if (!home) return;
  Cluster cluster;
  Instance leader(cluster.io, *home, cluster.port, "a");
  Instance other(cluster.io, *home, cluster.port, "b");
  const auto user = leader.store->add_user("alice")->user.id;
  leader.lead();
  const auto first = enqueue(*other.store, user, 4, "first");     // accepted by b
  const auto second = enqueue(*leader.store, user, 3, "second");  // then by the leader
  REQUIRE(leader.dispatcher->add(second, 1));
  auto adopted = leader.cluster().queued_job(first.job.id);  // as Leadership::adopt reads it
  REQUIRE(adopted.ok());
  REQUIRE(leader.dispatcher->add(adopted.value(), 1));

  const auto place = [&](fairlane::JobId job) {
    const auto at = leader.dispatcher->scheduler().job_place(user, job);
    REQUIRE(at.has_value());
    return std::pair{at->next_index, at->last_index};
  };
  CHECK(place(first.job.id) == std::pair<std::int64_t, std::int64_t>{1, 4});
  CHECK(place(second.job.id) == std::pair<std::int64_t, std::int64_t>{5, 7});

  REQUIRE(cluster.run_until([&] {
    return done_pages(*leader.store, first.job.id) == 4 &&
           done_pages(*leader.store, second.job.id) == 3;
  }));
  check_done_once(*leader.store, first, 4);
  check_done_once(*leader.store, second, 3);
}

// The dispatch commits, then the page's text is read on a connection of its own: a server
// that went away in between is the store's outage, not the page's fault. Before, each such
// read spent an attempt, and five failed the page for good.
TEST_CASE(
    "PostgreSQL: a page whose text cannot be read while the server is out of reach spends no "
    "attempt") {
  auto home = postgresql();
  if (!home) return;
  Cluster cluster;
  auto setup = home->open();
  const auto user = setup->add_user("alice")->user.id;
  const auto job = enqueue(*setup, user, 4, "book");
  constexpr int kFailures = 7;
  REQUIRE(DispatcherConfig{}.max_attempts < kFailures);
  auto texts = std::make_unique<fairlane::testing::UnreadTexts>(
      home->open(), job.pages[1].page_id, kFailures,
      fairlane::Status{StatusCode::io_error,
                       "reading a page: lost the connection to PostgreSQL at 127.0.0.1 (server "
                       "closed the connection unexpectedly)"});
  const fairlane::testing::UnreadTexts& unread = *texts;
  Instance leader(cluster.io, *home, cluster.port, "a", config(), std::move(texts));
  leader.lead();
  REQUIRE(cluster.run_until([&] { return done_pages(*leader.store, job.job.id) == 4; }));
  check_done_once(*leader.store, job, 4);
  for (const fairlane::PageResult& page : leader.store->results(job.job.id).value()) {
    CHECK(page.attempts == 0);
  }
  CHECK(unread.reads() == kFailures + 1);
  CHECK(leader.dispatcher->counters().requeued == kFailures);
}

TEST_CASE(
    "PostgreSQL: a follower's estimator learns what the leader's calls cost and took, not its "
    "configured guesses") {
  auto home = postgresql();
  if (!home) return;
  TwoWithABook two(*home, 30);
  auto& [cluster, leader, follower, user, job] = two;
  leader.lead();
  REQUIRE(cluster.run_until([&] { return done_pages(*leader.store, job.job.id) == 30; }));
  // Committed: the last batch's commit is on its own connection.
  REQUIRE(cluster.run_until([&] { return follower.store->recent_calls(30)->size() == 30; }));

  // The follower's view, read again as after a notification: its estimator never sees a
  // call end, so it starts from those the store has.
  REQUIRE(follower.dispatcher->follow().ok());
  const fairlane::Estimator& learned = follower.dispatcher->estimator();
  const fairlane::Estimator& live = leader.dispatcher->estimator();
  const fairlane::EstimatorConfig guesses = config().estimator;
  // Its averages are the calls' own: the tokens the provider counted, on average...
  double tokens = 0;
  for (const fairlane::EndedCall& call : follower.store->recent_calls(30).value()) {
    tokens += static_cast<double>(call.tokens);
  }
  CHECK(learned.avg_tokens_per_page() == doctest::Approx(tokens / 30.0));
  CHECK(learned.avg_tokens_per_page() < 0.5 * guesses.initial_tokens_per_page);
  // ... and the 30 ms the stand-in takes (as stored: from the dispatch's commit to the
  // commit of its end), not the configured 2 s, as the leader learned from the calls it saw.
  CHECK(learned.avg_latency_s() < 0.25 * guesses.initial_latency_s);
  CHECK(live.avg_latency_s() < 0.25 * guesses.initial_latency_s);
}

TEST_CASE(
    "PostgreSQL: a follower counts the jobs that come between its views as arrivals, and "
    "keeps them when it leads") {
  auto home = postgresql();
  if (!home) return;
  Cluster cluster;
  Instance follower(cluster.io, *home, cluster.port, "f", config(2s));  // slots of 0.2 s
  // Other instances' uploads, straight into the store; a shelf from before the arrivals'
  // window (a job of the window would count as arrived when it was created: the next test).
  fairlane::testing::ManualWallClock wall;
  wall.now = wall_now() - 10s;
  const auto uploads = home->open(fairlane::StoreOptions{.wall_clock = wall.function()});
  const auto alice = uploads->add_user("alice")->user.id;
  enqueue(*uploads, alice, 40, "shelf");
  REQUIRE(follower.dispatcher->follow().ok());
  // The queue as it stood at the first view did not arrive while anyone waited, nor does a
  // job seen again: two slots later (one busy slot would not be left out) nothing competes.
  cluster.io.run_for(500ms);
  REQUIRE(follower.dispatcher->follow().ok());
  const double shelf_rounds = 40.0;
  CHECK(follower.dispatcher->estimator().competition(shelf_rounds) == 0.0);
  // Newcomers' books, one between each two views.
  for (int i = 0; i < 6; ++i) {
    wall.now = wall_now();
    const auto user = uploads->add_user("newcomer" + std::to_string(i))->user.id;
    enqueue(*uploads, user, 2, "book" + std::to_string(i));
    cluster.io.run_for(150ms);
    REQUIRE(follower.dispatcher->follow().ok());
  }
  CHECK(follower.dispatcher->estimator().competition(shelf_rounds) > 0.0);

  // Leading, it goes on counting them.
  follower.lead();
  CHECK(follower.dispatcher->estimator().competition(shelf_rounds) > 0.0);
}

TEST_CASE(
    "PostgreSQL: a follower counts the jobs that came and were done between two of its views") {
  auto home = postgresql();
  if (!home) return;
  Cluster cluster;
  // The leader writes the jobs' pages done; its dispatcher was never told of them (no
  // notifications here), so it sends nothing itself.
  Instance leader(cluster.io, *home, cluster.port, "a");
  leader.lead();
  Instance follower(cluster.io, *home, cluster.port, "f", config(2s));  // slots of 0.2 s
  REQUIRE(follower.dispatcher->follow().ok());
  cluster.io.run_for(500ms);
  REQUIRE(follower.dispatcher->follow().ok());
  const double rounds = 40.0;
  CHECK(follower.dispatcher->estimator().competition(rounds) == 0.0);
  // Newcomers' books, each sent and answered before the follower's next view: no view ever
  // holds them in its lanes.
  for (int i = 0; i < 6; ++i) {
    const auto user = leader.store->add_user(fmt::format("newcomer{}", i))->user.id;
    const auto book = enqueue(*leader.store, user, 2, fmt::format("book{}", i));
    std::vector<PageTransition> sent;
    std::vector<PageTransition> answered;
    for (const auto& page : book.pages) {
      sent.push_back(PageTransition::dispatched(page.page_id, 300));
      answered.push_back(PageTransition::completed(page.page_id, "ok", fairlane::Usage{100, 20}));
    }
    REQUIRE(leader.store->apply(sent).ok());
    REQUIRE(leader.store->apply(answered).ok());
    cluster.io.run_for(150ms);
    REQUIRE(follower.dispatcher->follow().ok());
  }
  CHECK(follower.dispatcher->scheduler().size() == 0);
  CHECK(follower.dispatcher->estimator().competition(rounds) > 0.0);
}

TEST_CASE(
    "PostgreSQL: a follower's first view counts the jobs of the arrivals' window as arrived "
    "when they were created") {
  auto home = postgresql();
  if (!home) return;
  Cluster cluster;
  Instance follower(cluster.io, *home, cluster.port, "f", config(60s));  // slots of 6 s
  // Another instance took a newcomer's page every 2 s for the last minute, 1 s off the
  // slots' edges: the nine slots that have ended hold three each.
  fairlane::testing::ManualWallClock wall;
  const auto uploads = home->open(fairlane::StoreOptions{.wall_clock = wall.function()});
  const auto now = wall_now();
  for (int i = 29; i >= 0; --i) {
    wall.now = now - std::chrono::seconds(1 + 2 * i);
    enqueue(*uploads, uploads->add_user("newcomer" + std::to_string(i))->user.id, 1, "page");
  }
  REQUIRE(follower.dispatcher->follow().ok());
  // The busiest left out: 8 x 3 pages in 8 x 6 s, 0.5 pages a second, each page weighing
  // 1 - 0.5 / 1000 for a job 1,000 rounds out.
  const fairlane::Estimator& estimator = follower.dispatcher->estimator();
  CHECK(estimator.competition(1'000.0) ==
        doctest::Approx(0.5 * (1.0 - 0.5 / 1'000.0) / estimator.mu()));
  // Its views after that count only what arrives between them: the same jobs seen again add
  // nothing (each view is a new estimator, going on from the one before).
  REQUIRE(follower.dispatcher->follow().ok());
  const fairlane::Estimator& again = follower.dispatcher->estimator();
  CHECK(again.competition(1'000.0) == doctest::Approx(0.5 * (1.0 - 0.5 / 1'000.0) / again.mu()));
}

TEST_CASE(
    "PostgreSQL: a follower's dispatcher holds the lanes as the store has them and sends "
    "nothing") {
  auto home = postgresql();
  if (!home) return;
  Cluster cluster;
  Instance follower(cluster.io, *home, cluster.port, "f");
  const auto user = follower.store->add_user("alice")->user.id;
  const auto job = enqueue(*follower.store, user, 12, "book");
  REQUIRE(follower.dispatcher->follow().ok());
  CHECK_FALSE(follower.dispatcher->dispatching());
  CHECK(follower.dispatcher->scheduler().size() == 12);
  // Its door answers from that view: a second book waits behind the first.
  const auto estimate = follower.dispatcher->door().estimate(user, 12, 400);
  const auto* accepted = std::get_if<fairlane::DoorAccepted>(&estimate);
  REQUIRE(accepted != nullptr);
  CHECK(accepted->estimate.position == 12);
  // Run the loop as long as a leader would need for the book: nothing goes out.
  cluster.io.run_for(300ms);
  CHECK(cluster.stats().at("requests").as_int64() == 0);
  CHECK(done_pages(*follower.store, job.job.id) == 0);
}

TEST_CASE(
    "PostgreSQL: Leadership: the first instance leads, the second follows and adopts "
    "nothing, and takes over once the leader gives the lease up") {
  auto home = postgresql();
  if (!home) return;
  Cluster cluster;
  Instance a(cluster.io, *home, cluster.port, "a");
  Instance b(cluster.io, *home, cluster.port, "b");
  const fairlane::service::LeadershipConfig lease{.instance = "a", .lease = 1'000ms};
  fairlane::service::Leadership lead_a(cluster.io, *a.store, *a.dispatcher, *a.router, a.membership,
                                       lease);
  fairlane::service::LeadershipConfig lease_b = lease;
  lease_b.instance = "b";
  fairlane::service::Leadership lead_b(cluster.io, *b.store, *b.dispatcher, *b.router, b.membership,
                                       lease_b);
  REQUIRE(lead_a.start().ok());
  REQUIRE(lead_b.start().ok());
  CHECK(a.membership.leading);
  CHECK_FALSE(b.membership.leading);
  CHECK(b.membership.leader == "a");

  // A book accepted by the follower: the leader adopts it when told, and does it.
  const auto user = b.store->add_user("bob")->user.id;
  const auto job = enqueue(*b.store, user, 6, "notes");
  lead_a.notified(fairlane::kJobEnqueuedChannel, std::to_string(job.job.id));
  // (The loop has not run since: all six are queued.)
  CHECK(a.dispatcher->scheduler().size() == 6);
  // Told twice (its own notification as well), it adds nothing.
  lead_a.notified(fairlane::kJobEnqueuedChannel, std::to_string(job.job.id));
  CHECK(a.dispatcher->scheduler().size() == 6);
  CHECK(a.dispatcher->tracked_pages() == 6);
  REQUIRE(cluster.run_until([&] { return done_pages(*a.store, job.job.id) == 6; }));
  check_done_once(*a.store, job, 6);

  // A clean stop gives the lease up: b leads within its next try (a tenth of the lease).
  a.dispatcher->stop(1s, [](const fairlane::Status&) {});
  lead_a.stop();
  REQUIRE(cluster.run_until([&] { return b.membership.leading; }, 5s));
  CHECK(b.membership.leader == "b");
  CHECK(b.dispatcher->dispatching());
  CHECK(lead_b.takeovers() == 1);
}

TEST_CASE(
    "PostgreSQL: Leadership: a leader whose batch's outcome is unknown stops, gives the lease "
    "up, and the next leader finishes every page once") {
  auto home = postgresql();
  if (!home) return;
  TwoWithABook two(*home, 12);
  auto& [cluster, a, b, user, job] = two;
  // The test's own connection (the store's path is the database's URI: the tests' server
  // takes no password) holds the first page's row, so that the leader's first dispatch
  // waits with its batch out.
  auto raw = fairlane::store::pg::Connection::open(a.store->path());
  REQUIRE(raw.ok());
  auto watch = fairlane::store::pg::Connection::open(a.store->path());
  REQUIRE(watch.ok());
  REQUIRE(raw->exec(fmt::format("BEGIN; SELECT 1 FROM pages WHERE id = {} FOR UPDATE",
                                job.pages[0].page_id),
                    "locking a page")
              .ok());

  fairlane::service::LeadershipConfig lease{.instance = "a", .lease = 1'000ms};
  fairlane::service::Leadership lead_a(cluster.io, *a.store, *a.dispatcher, *a.router, a.membership,
                                       lease);
  lease.instance = "b";
  fairlane::service::Leadership lead_b(cluster.io, *b.store, *b.dispatcher, *b.router, b.membership,
                                       lease);
  REQUIRE(lead_a.start().ok());
  REQUIRE(lead_b.start().ok());
  REQUIRE(a.membership.leading);
  const std::int64_t first_epoch = a.membership.epoch;

  // The server ends the connection the batch waits on, as a restart would: whether the
  // batch was stored is unknown to a.
  bool ended = false;
  REQUIRE(cluster.run_until([&] {
    if (ended) return true;
    auto waiting = watch->query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
        "current_database() AND wait_event_type = 'Lock'",
        {}, "ending the connection of the waiting batch");
    REQUIRE(waiting.ok());
    ended = waiting->size() > 0;
    return ended;
  }));
  REQUIRE(raw->exec("ROLLBACK", "letting the page go").ok());
  // a stops at once and gives the lease up; whichever instance claims it next leads with a
  // new epoch, from what the store holds.
  REQUIRE(cluster.run_until([&] { return !a.membership.leading; }, 5s));
  REQUIRE(cluster.run_until([&] { return a.membership.leading || b.membership.leading; }, 5s));
  Instance& leader = a.membership.leading ? a : b;
  CHECK(leader.membership.epoch > first_epoch);
  REQUIRE(cluster.run_until([&] { return done_pages(*leader.store, job.job.id) == 12; }));
  check_done_once(*leader.store, job, 12);
  CHECK(lead_a.takeovers() + lead_b.takeovers() == 2);
  const auto stats = cluster.stats();
  CHECK(stats.at("max_in_flight_seen").as_int64() <= kCap);
  lead_a.stop();
  lead_b.stop();
}

// A leader paused past its lease (a stopped process, a long stall) claims it again after
// another instance led in between: the lease is its own once more, under a newer epoch. Its
// dispatcher's view and fence are of the old epoch, and the store holds what the other
// leader did meanwhile (here a book it accepted and sent whole, then died). The leader must
// lead again from the store, not carry on as if nothing happened: before, only its epoch
// was updated, and the dead leader's calls stayed in flight until this one's next write,
// which an idle leader never makes.
TEST_CASE(
    "PostgreSQL: Leadership: a leader that claims the lease again after another led in "
    "between leads again from the store, and finishes the other's pages") {
  auto home = postgresql();
  if (!home) return;
  Cluster cluster;
  DispatcherConfig quick = config();
  quick.call_timeout = 1s;  // how long the dead leader's calls are held under the cap
  Instance a(cluster.io, *home, cluster.port, "a", quick);
  Instance b(cluster.io, *home, cluster.port, "b");
  fairlane::service::Leadership lead_a(cluster.io, *a.store, *a.dispatcher, *a.router, a.membership,
                                       {.instance = "a", .lease = 1'000ms});
  REQUIRE(lead_a.start().ok());
  REQUIRE(a.membership.leading);
  const std::int64_t first_epoch = a.membership.epoch;

  // While a's loop does not run (it is paused): its lease runs out (released here, which is
  // the same to the store), b takes the lease, accepts a book and sends every page of it,
  // then dies with the calls out, and its lease runs out in turn.
  REQUIRE(b.cluster().release_lease("a").ok());
  const auto b_lease = b.cluster().claim_lease("b", 60s);
  REQUIRE(b_lease.ok());
  REQUIRE(b_lease->held);
  b.cluster().fence("b", b_lease->epoch);
  const auto user = b.store->add_user("bob")->user.id;
  const auto job = enqueue(*b.store, user, static_cast<int>(kCap), "notes");
  std::vector<PageTransition> sent;
  for (const auto& page : job.pages) sent.push_back(PageTransition::dispatched(page.page_id, 300));
  REQUIRE(b.store->apply(sent).ok());
  REQUIRE(b.cluster().release_lease("b").ok());

  // a's next renewal finds the lease free and takes it, under a newer epoch than b's.
  REQUIRE(cluster.run_until([&] { return a.membership.epoch > b_lease->epoch; }, 5s));
  CHECK(a.membership.leading);
  CHECK(a.membership.epoch > first_epoch);
  // It leads again: b's calls held under the cap, then requeued and done, each once.
  REQUIRE(cluster.run_until([&] { return done_pages(*a.store, job.job.id) == kCap; }));
  check_done_once(*a.store, job, static_cast<int>(kCap));
  CHECK(lead_a.takeovers() == 2);
  CHECK(cluster.stats().at("max_in_flight_seen").as_int64() <= kCap);
  lead_a.stop();
}

namespace {

// Two instances on one database: a leads (its Leadership started, its loop not yet run), b
// follows; alice's book of 8 pages and bob's notes of 4 are queued, and a holds all twelve.
struct BookAndNotes {
  explicit BookAndNotes(fairlane::testing::StoreHome& home)
      : a(cluster.io, home, cluster.port, "a"),
        b(cluster.io, home, cluster.port, "b"),
        lead_a(cluster.io, *a.store, *a.dispatcher, *a.router, a.membership,
               fairlane::service::LeadershipConfig{.instance = "a", .lease = 60'000ms}),
        alice(a.store->add_user("alice")->user.id),
        bob(a.store->add_user("bob")->user.id),
        book(enqueue(*a.store, alice, 8, "book")),
        notes(enqueue(*a.store, bob, 4, "notes")) {
    REQUIRE(lead_a.start().ok());
    REQUIRE(a.membership.leading);
    REQUIRE(b.dispatcher->follow().ok());
  }

  Cluster cluster;
  Instance a;
  Instance b;
  fairlane::service::Leadership lead_a;
  fairlane::UserId alice;
  fairlane::UserId bob;
  fairlane::EnqueuedJob book;
  fairlane::EnqueuedJob notes;
};

}  // namespace

TEST_CASE(
    "PostgreSQL: Leadership: a job adopted while its user cannot be read leaves the user's weight "
    "as it was") {
  auto home = postgresql();
  if (!home) return;
  // The leader's store, whose look-up of a user by name fails on demand (a connection lost
  // for one statement, a timeout).
  struct UsersUnread final : fairlane::testing::ForwardingStore {
    using ForwardingStore::ForwardingStore;
    fairlane::Result<fairlane::User> find_user_by_name(std::string_view name) override {
      if (fail) return fairlane::Status(fairlane::StatusCode::io_error, "not now");
      return ForwardingStore::find_user_by_name(name);
    }
    bool fail = false;
  };
  Cluster cluster;
  Instance a(cluster.io, *home, cluster.port, "a");
  Instance b(cluster.io, *home, cluster.port, "b");
  const auto bob = a.store->add_user("bob", 5)->user.id;
  (void)enqueue(*a.store, bob, 4, "notes");
  UsersUnread users(home->open());
  fairlane::service::Leadership lead_a(
      cluster.io, users, *a.dispatcher, *a.router, a.membership,
      fairlane::service::LeadershipConfig{.instance = "a", .lease = 60'000ms});
  REQUIRE(lead_a.start().ok());
  REQUIRE(a.membership.leading);
  REQUIRE(a.dispatcher->scheduler().weight(bob) == 5);
  // Bob's essay, accepted by the follower, heard of while his row cannot be read.
  const auto essay = enqueue(*b.store, bob, 1, "essay");
  users.fail = true;
  lead_a.notified(fairlane::kJobEnqueuedChannel, std::to_string(essay.job.id));
  CHECK(a.dispatcher->scheduler().lane_length(bob) == 5);  // adopted all the same
  CHECK(a.dispatcher->scheduler().weight(bob) == 5);
  a.dispatcher->stop(1s, [](const fairlane::Status&) {});
  lead_a.stop();
}

TEST_CASE(
    "PostgreSQL: Leadership: a job whose adoption failed for a passing reason is adopted at the "
    "next renewal") {
  auto home = postgresql();
  if (!home) return;
  // The leader's store, whose read of a job accepted elsewhere fails on demand (a statement
  // timeout, a connection lost for one statement).
  struct JobsUnread final : fairlane::ClusterStore {
    explicit JobsUnread(fairlane::ClusterStore& real) : inner(real) {}
    fairlane::Result<fairlane::LeaseState> claim_lease(std::string_view instance,
                                                       std::chrono::milliseconds lease) override {
      return inner.claim_lease(instance, lease);
    }
    fairlane::Status release_lease(std::string_view instance) override {
      return inner.release_lease(instance);
    }
    void fence(std::string_view instance, std::int64_t epoch) override {
      inner.fence(instance, epoch);
    }
    fairlane::Result<fairlane::EnqueuedJob> queued_job(fairlane::JobId job) override {
      if (fail) return fairlane::Status(fairlane::StatusCode::io_error, "not now");
      return inner.queued_job(job);
    }
    fairlane::Result<std::vector<fairlane::Lane>> lanes_view() override {
      if (fail) return fairlane::Status(fairlane::StatusCode::io_error, "not now");
      return inner.lanes_view();
    }
    fairlane::ClusterStore& inner;
    bool fail = false;
  };
  struct Store final : fairlane::testing::ForwardingStore {
    explicit Store(std::unique_ptr<fairlane::Store> inner)
        : ForwardingStore(std::move(inner)), jobs(*ForwardingStore::cluster()) {}
    fairlane::ClusterStore* cluster() override { return &jobs; }
    JobsUnread jobs;
  };
  Cluster cluster;
  Instance a(cluster.io, *home, cluster.port, "a");
  Instance b(cluster.io, *home, cluster.port, "b");
  const auto bob = a.store->add_user("bob")->user.id;
  Store store(home->open());
  fairlane::service::Leadership lead_a(
      cluster.io, store, *a.dispatcher, *a.router, a.membership,
      fairlane::service::LeadershipConfig{.instance = "a", .lease = 400ms});
  REQUIRE(lead_a.start().ok());
  REQUIRE(a.membership.leading);
  // Bob's essay, accepted by the follower, heard of while it cannot be read: nothing else
  // brings it back (it will not change, so nothing notifies of it again).
  const auto essay = enqueue(*b.store, bob, 3, "essay");
  store.jobs.fail = true;
  lead_a.notified(fairlane::kJobEnqueuedChannel, std::to_string(essay.job.id));
  CHECK_FALSE(a.dispatcher->tracks_job(essay.job.id));
  store.jobs.fail = false;
  // The next renewal, 100 ms on, reads the lanes again and adopts it: it is done.
  REQUIRE(cluster.run_until([&] { return done_pages(*a.store, essay.job.id) == 3; }, 10s));
  check_done_once(*a.store, essay, 3);
  a.dispatcher->stop(1s, [](const fairlane::Status&) {});
  lead_a.stop();
}

TEST_CASE(
    "PostgreSQL: Leadership: a promise a follower made again when its window closed is the one "
    "the leader watches once notified") {
  auto home = postgresql();
  if (!home) return;
  BookAndNotes two(*home);
  auto& [cluster, a, b, lead_a, alice, bob, book, notes] = two;
  // An upload on the follower, promised 30 s by its door, heard of by the leader.
  auto request = JobRequest{bob, "essay", {PageInput{"essay-p1", 300}}, 100};
  request.promised_eta_s = 30.0;
  const auto essay = b.store->enqueue_job(request);
  REQUIRE(essay.ok());
  const auto first = essay->job.promised_eta_at;
  REQUIRE(first.has_value());
  lead_a.notified(fairlane::kJobEnqueuedChannel, std::to_string(essay->job.id));
  CHECK(a.router->promises().promised_at(essay->job.id) == first);
  // Its window closes on the follower with others that came together: promised 12 s later,
  // the promise its 202 says.
  const fairlane::WallTime later = *first + 12s;
  REQUIRE(b.store->set_promise(essay->job.id, later).ok());
  lead_a.notified(fairlane::kJobChangedChannel, std::to_string(essay->job.id));
  CHECK(a.router->promises().promised_at(essay->job.id) == later);
  // A change that does not move it (the leader's own transitions) leaves it be.
  lead_a.notified(fairlane::kJobChangedChannel, std::to_string(essay->job.id));
  CHECK(a.router->promises().promised_at(essay->job.id) == later);
  // Nor does the store's millisecond: a promise the leader's own window made, watched to the
  // microsecond, is the one the store holds to the millisecond.
  auto own = a.store->job(essay->job.id);
  REQUIRE(own.ok());
  own->promised_eta_at = later + 400us;
  a.router->watch(own.value());
  lead_a.notified(fairlane::kJobChangedChannel, std::to_string(essay->job.id));
  CHECK(a.router->promises().promised_at(essay->job.id) == later + 400us);
  a.dispatcher->stop(1s, [](const fairlane::Status&) {});
  lead_a.stop();
}

TEST_CASE(
    "PostgreSQL: Leadership: a cancel written on a follower leaves the leader's lanes when the "
    "leader is notified, with nothing dispatched or written") {
  auto home = postgresql();
  if (!home) return;
  BookAndNotes two(*home);
  auto& [cluster, a, b, lead_a, alice, bob, book, notes] = two;
  // (The loop has not run: the leader has dispatched nothing, all twelve are queued.)
  REQUIRE(a.dispatcher->scheduler().size() == 12);
  // A new job of bob's would wait behind his four pages and the book's turns between them.
  CHECK(a.dispatcher->estimator().estimate_new(bob, 1).position > 4);
  // A change that is not a cancel (the leader's own transitions are notified too) drops
  // nothing.
  lead_a.notified(fairlane::kJobChangedChannel, std::to_string(book.job.id));
  lead_a.notified(fairlane::kJobChangedChannel, std::to_string(notes.job.id));
  CHECK(a.dispatcher->scheduler().size() == 12);

  // The follower's router cancels through its own dispatcher: written to the store at once.
  REQUIRE(b.dispatcher->cancel(alice, book.job.id).ok());
  const auto cancelled = a.store->job(book.job.id);
  REQUIRE(cancelled.ok());
  CHECK(cancelled->state == JobState::cancelled);
  CHECK(cancelled->pages.cancelled == 8);
  // The leader still counts the book until it hears of it.
  CHECK(a.dispatcher->scheduler().size() == 12);

  bool woken = false;
  a.router->watchers().park([&] { woken = true; });
  lead_a.notified(fairlane::kJobChangedChannel, std::to_string(book.job.id));
  CHECK(woken);
  CHECK(a.dispatcher->scheduler().size() == 4);
  CHECK(a.dispatcher->scheduler().lane_length(alice) == 0);
  CHECK(a.dispatcher->tracked_pages() == 4);
  CHECK_FALSE(a.dispatcher->estimator().job(alice, book.job.id).has_value());
  const auto notes_place = a.dispatcher->estimator().job(bob, notes.job.id);
  REQUIRE(notes_place.has_value());
  CHECK(notes_place->position == 0);
  CHECK(a.dispatcher->estimator().estimate_new(bob, 1).position == 4);
  // Told again (the follower's own notification, a later change), it changes nothing.
  lead_a.notified(fairlane::kJobChangedChannel, std::to_string(book.job.id));
  CHECK(a.dispatcher->scheduler().size() == 4);

  // Only the notes go out; the book's pages stay cancelled, as the follower wrote them.
  REQUIRE(cluster.run_until([&] { return done_pages(*a.store, notes.job.id) == 4; }));
  check_done_once(*a.store, notes, 4);
  CHECK(cluster.stats().at("requests").as_int64() == 4);
  CHECK(a.dispatcher->counters().dispatched == 4);
  const auto book_after = a.store->job(book.job.id);
  REQUIRE(book_after.ok());
  CHECK(book_after->state == JobState::cancelled);
  CHECK(book_after->pages.cancelled == 8);
  CHECK(book_after->pages.done == 0);
  a.dispatcher->stop(1s, [](const fairlane::Status&) {});
  lead_a.stop();
}

TEST_CASE(
    "PostgreSQL: Leadership: a cancel written on a follower while the leader's listener was "
    "down leaves the leader's lanes at the resync") {
  auto home = postgresql();
  if (!home) return;
  BookAndNotes two(*home);
  auto& [cluster, a, b, lead_a, alice, bob, book, notes] = two;
  REQUIRE(a.dispatcher->scheduler().size() == 12);

  // The cancel's notification is lost (the leader's listening connection was down): only
  // the resync that follows its reconnection tells it.
  REQUIRE(b.dispatcher->cancel(alice, book.job.id).ok());
  CHECK(a.dispatcher->scheduler().size() == 12);
  lead_a.resync();
  CHECK(a.dispatcher->scheduler().size() == 4);
  CHECK(a.dispatcher->scheduler().lane_length(alice) == 0);
  CHECK_FALSE(a.dispatcher->estimator().job(alice, book.job.id).has_value());
  // The notes, still queued in the store, stay as they were; a second resync changes nothing.
  lead_a.resync();
  CHECK(a.dispatcher->scheduler().size() == 4);
  CHECK(a.dispatcher->scheduler().lane_length(bob) == 4);

  REQUIRE(cluster.run_until([&] { return done_pages(*a.store, notes.job.id) == 4; }));
  check_done_once(*a.store, notes, 4);
  CHECK(cluster.stats().at("requests").as_int64() == 4);
  const auto book_after = a.store->job(book.job.id);
  REQUIRE(book_after.ok());
  CHECK(book_after->state == JobState::cancelled);
  CHECK(book_after->pages.cancelled == 8);
  a.dispatcher->stop(1s, [](const fairlane::Status&) {});
  lead_a.stop();
}

// The job's state reads `running` while a page of it is in flight, cancelled or not: the
// leader must see the cancel in its counts. Before, it kept the cancelled book's queued
// pages in its lanes and sent each in its turn (a request spent, a place under the cap
// held, a dispatch written that changed nothing) until the call out came back.
TEST_CASE(
    "PostgreSQL: Leadership: a cancel written on a follower while a page of the job is in "
    "flight leaves the leader's lanes when the leader is notified") {
  auto home = postgresql();
  if (!home) return;
  BookAndNotes two(*home);
  auto& [cluster, a, b, lead_a, alice, bob, book, notes] = two;
  std::int64_t out = 0;  // the book's pages in flight, as the store has them
  REQUIRE(cluster.run_until([&] {
    const auto view = a.store->job(book.job.id);
    out = view.ok() ? view->pages.in_flight : 0;
    return out > 0;
  }));
  REQUIRE(a.dispatcher->scheduler().lane_length(alice) > 0);

  REQUIRE(b.dispatcher->cancel(alice, book.job.id).ok());
  const auto cancelled = a.store->job(book.job.id);
  REQUIRE(cancelled.ok());
  CHECK(cancelled->state == JobState::running);  // a page is still out
  CHECK(cancelled->pages.cancelled == 8 - out - cancelled->pages.done);
  lead_a.notified(fairlane::kJobChangedChannel, std::to_string(book.job.id));
  CHECK(a.dispatcher->scheduler().lane_length(alice) == 0);
  CHECK_FALSE(a.dispatcher->estimator().job(alice, book.job.id).has_value());

  // Only the notes and the pages that were out are sent.
  REQUIRE(cluster.run_until([&] {
    const auto view = a.store->job(book.job.id);
    return done_pages(*a.store, notes.job.id) == 4 && view.ok() &&
           view->state == JobState::cancelled;
  }));
  check_done_once(*a.store, notes, 4);
  CHECK(cluster.stats().at("requests").as_int64() <= 4 + out + cancelled->pages.done);
  a.dispatcher->stop(1s, [](const fairlane::Status&) {});
  lead_a.stop();
}
