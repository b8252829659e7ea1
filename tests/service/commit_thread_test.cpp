// Commits off the io thread: the CommitThread itself, and a Dispatcher that commits its
// batches there, against the SQLite store on a file (two connections, as a server database
// would have them), the libcurl client and the provider stand-in on loopback. A test double
// holds each batch at the commit store until the test lets it go. Every wait is bounded.
#include <doctest/doctest.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fairlane/provider/curl_provider.hpp"
#include "provider_sim.hpp"
#include "service/commit_thread.hpp"
#include "service/dispatcher.hpp"
#include "support/forwarding_store.hpp"
#include "support/loop.hpp"
#include "support/store.hpp"

using namespace std::chrono_literals;
using fairlane::JobState;
using fairlane::PageTransition;
using fairlane::Store;
using fairlane::service::CommitThread;
using fairlane::service::Dispatcher;
using fairlane::service::DispatcherConfig;
using fairlane::testing::open_store;
namespace sim = fairlane::provider_sim;

namespace {

// Commits only once the test opens the gate; says which threads committed.
class GatedStore final : public fairlane::testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;

  fairlane::Result<std::vector<std::int64_t>> apply(
      std::span<const PageTransition> transitions) override {
    {
      std::unique_lock lock(mutex_);
      ++entered_;
      threads_.insert(std::this_thread::get_id());
      opened_.wait(lock, [this] { return open_; });
    }
    return ForwardingStore::apply(transitions);
  }

  void close() {
    const std::lock_guard lock(mutex_);
    open_ = false;
  }
  void open() {
    {
      const std::lock_guard lock(mutex_);
      open_ = true;
    }
    opened_.notify_all();
  }
  int entered() {
    const std::lock_guard lock(mutex_);
    return entered_;
  }
  std::set<std::thread::id> threads() {
    const std::lock_guard lock(mutex_);
    return threads_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = true;
  int entered_ = 0;
  std::set<std::thread::id> threads_;
};

// Counts the page texts read from it, and on which threads.
class PageReads final : public fairlane::testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  fairlane::Result<fairlane::PageCall> page_call(fairlane::PageId page) override {
    {
      const std::lock_guard lock(mutex_);
      ++reads_;
      threads_.insert(std::this_thread::get_id());
    }
    return ForwardingStore::page_call(page);
  }
  int reads() {
    const std::lock_guard lock(mutex_);
    return reads_;
  }
  std::set<std::thread::id> threads() {
    const std::lock_guard lock(mutex_);
    return threads_;
  }

 private:
  std::mutex mutex_;
  int reads_ = 0;
  std::set<std::thread::id> threads_;
};

// Opens the gate when it goes, so that a failed check never leaves a batch held forever.
struct OpenAtExit {
  GatedStore& gate;
  ~OpenAtExit() { gate.open(); }
};

struct Rig {
  Rig()
      : stand_in(io, provider_config()),
        store(open_store(dir.file("commits.db"))),
        user(store->add_user("alice")->user.id) {
    auto port = stand_in.listen("127.0.0.1", 0);
    REQUIRE(port.ok());
    fairlane::CurlProviderConfig client;
    client.base_url = "http://127.0.0.1:" + std::to_string(port.value());
    client.max_connections = 4;
    provider = std::move(fairlane::make_curl_provider(io, client)).value();
    auto gated = std::make_unique<GatedStore>(open_store(dir.file("commits.db")));
    gate = gated.get();
    gate->close();
    DispatcherConfig config;
    config.limits = {
        .requests_per_minute = 6'000, .tokens_per_minute = 600'000, .max_in_flight = 4};
    config.seed = 7;
    dispatcher = std::make_unique<Dispatcher>(io, *store, *provider, config, std::move(gated));
    opener = std::make_unique<OpenAtExit>(*gate);
  }

  static sim::Config provider_config() {
    sim::Config c;
    c.requests_per_minute = 6'000;
    c.tokens_per_minute = 600'000;
    c.max_in_flight = 4;
    c.latency_ms = 10;
    c.output_tokens = 20;
    return c;
  }

  bool run_until(const std::function<bool()>& done, std::chrono::seconds limit = 20s) {
    return fairlane::testing::run_until(io, done, limit);
  }

  bool terminal(fairlane::JobId job) { return fairlane::testing::job_ended(*store, job); }

  std::int64_t stand_in_count(const char* name) const {
    return boost::json::parse(stand_in.stats_json()).as_object().at(name).as_int64();
  }

  fairlane::testing::TempDir dir;
  boost::asio::io_context io;
  sim::Server stand_in;
  std::unique_ptr<Store> store;
  fairlane::UserId user;
  std::unique_ptr<fairlane::Provider> provider;
  GatedStore* gate = nullptr;  // the dispatcher's commit store
  std::unique_ptr<Dispatcher> dispatcher;
  std::unique_ptr<OpenAtExit> opener;  // after the dispatcher: goes first
};

}  // namespace

TEST_CASE("A CommitThread runs its tasks in order, on a thread of its own, and run() waits") {
  std::mutex mutex;
  std::vector<int> order;
  std::set<std::thread::id> threads;
  {
    CommitThread thread(open_store(":memory:"));
    for (int i = 0; i < 100; ++i) {
      thread.post([&, i](Store&) {
        const std::lock_guard lock(mutex);
        order.push_back(i);
        threads.insert(std::this_thread::get_id());
      });
    }
    thread.run([&](Store&) {
      const std::lock_guard lock(mutex);
      order.push_back(100);
    });
    {
      const std::lock_guard lock(mutex);
      REQUIRE(order.size() == 101);  // run() returned: all before it ran, and it did
      CHECK(std::is_sorted(order.begin(), order.end()));
      CHECK(threads.size() == 1);
      CHECK(threads.count(std::this_thread::get_id()) == 0);
    }
    for (int i = 101; i < 110; ++i) {
      thread.post([&, i](Store&) {
        const std::lock_guard lock(mutex);
        order.push_back(i);
      });
    }
  }  // destroyed: what was given still runs
  CHECK(order.size() == 110);
}

TEST_CASE("Batches commit off the io thread, which goes on while one is out: every page once") {
  Rig rig;
  const auto job = fairlane::testing::enqueue(*rig.store, rig.user, 20);
  REQUIRE(rig.dispatcher->start().ok());
  rig.dispatcher->add(job, 1);
  // The first dispatches are out at the commit store, held there.
  REQUIRE(rig.run_until([&] { return rig.gate->entered() >= 1; }));

  // The loop is not waiting for them: a timer still fires, and no call went out before its
  // dispatch committed.
  bool ticked = false;
  boost::asio::steady_timer timer(rig.io, 20ms);
  timer.async_wait([&](boost::system::error_code) { ticked = true; });
  CHECK(rig.run_until([&] { return ticked; }, 5s));
  CHECK(rig.gate->entered() == 1);  // one batch out at a time
  CHECK(fairlane::testing::job_view(*rig.store, job.job.id).pages.in_flight == 0);
  CHECK(rig.stand_in_count("requests") == 0);

  rig.gate->open();
  REQUIRE(rig.run_until([&] { return rig.terminal(job.job.id); }));
  const auto view = fairlane::testing::job_view(*rig.store, job.job.id);
  CHECK(view.state == JobState::done);
  CHECK(view.pages.done == 20);
  const auto results = rig.store->results(job.job.id).value();
  REQUIRE(results.size() == 20);
  CHECK(results[0].output == "page 1");
  CHECK(results[19].output == "page 20");
  CHECK(rig.stand_in_count("ok") == 20);  // each page called once
  CHECK(rig.dispatcher->counters().done == 20);
  const auto threads = rig.gate->threads();
  CHECK(threads.size() == 1);
  CHECK(threads.count(std::this_thread::get_id()) == 0);
}

TEST_CASE("A cancel while a batch is out waits for it, and is committed when it returns") {
  Rig rig;
  const auto job = fairlane::testing::enqueue(*rig.store, rig.user, 20);
  REQUIRE(rig.dispatcher->start().ok());
  rig.dispatcher->add(job, 1);
  REQUIRE(rig.run_until([&] { return rig.gate->entered() >= 1; }));

  std::latch cancelling(1);
  std::thread opener([&] {
    cancelling.wait();
    rig.gate->open();
  });
  cancelling.count_down();
  const fairlane::Status cancelled = rig.dispatcher->cancel(rig.user, job.job.id);
  opener.join();
  REQUIRE(cancelled.ok());
  // The batch out (its dispatches) went first, the cancellation after it, both committed.
  auto view = fairlane::testing::job_view(*rig.store, job.job.id);
  CHECK(view.pages.in_flight >= 1);
  CHECK(view.pages.cancelled >= 1);
  CHECK(view.pages.in_flight + view.pages.cancelled == 20);

  REQUIRE(rig.run_until([&] { return rig.terminal(job.job.id); }));
  view = fairlane::testing::job_view(*rig.store, job.job.id);
  CHECK(view.state == JobState::cancelled);
  CHECK(view.pages.done + view.pages.cancelled == 20);
  CHECK(view.pages.done == rig.stand_in_count("ok"));
}

TEST_CASE(
    "With a page store, each page's text is read there, off the io thread, never from the "
    "io thread's store") {
  Rig rig;
  rig.gate->open();
  auto main = std::make_unique<PageReads>(open_store(rig.dir.file("commits.db")));
  auto pages = std::make_unique<PageReads>(open_store(rig.dir.file("commits.db")));
  PageReads& on_io = *main;
  PageReads& off_io = *pages;
  DispatcherConfig config;
  config.limits = {.requests_per_minute = 6'000, .tokens_per_minute = 600'000, .max_in_flight = 4};
  Dispatcher dispatcher(rig.io, on_io, *rig.provider, config, nullptr, std::move(pages));
  const auto job = fairlane::testing::enqueue(on_io, rig.user, 6);
  REQUIRE(dispatcher.start().ok());
  REQUIRE(rig.run_until([&] { return fairlane::testing::job_ended(on_io, job.job.id); }));
  const auto view = fairlane::testing::job_view(on_io, job.job.id);
  CHECK(view.state == JobState::done);
  CHECK(view.pages.done == 6);
  const auto results = on_io.results(job.job.id).value();
  REQUIRE(results.size() == 6);
  CHECK(results[0].output == "page 1");
  CHECK(results[5].output == "page 6");
  CHECK(on_io.reads() == 0);
  CHECK(off_io.reads() == 6);
  const auto threads = off_io.threads();
  CHECK(threads.size() == 1);
  CHECK(threads.count(std::this_thread::get_id()) == 0);
  bool stopped = false;
  dispatcher.stop(1s, [&](const fairlane::Status&) { stopped = true; });
  CHECK(rig.run_until([&] { return stopped; }, 5s));
}
