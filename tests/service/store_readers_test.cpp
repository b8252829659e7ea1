// Reads off the io thread (StoreReaders): the job routes read on a reader's connection and
// answer on the io thread; the transport goes on serving while a read is out; a key found is
// remembered for a while, so that a request costs no read at all.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "cli/http_client.hpp"
#include "core/fake_clock.hpp"
#include "document/pdf_writer.hpp"
#include "service/http_server.hpp"
#include "service/router.hpp"
#include "service/store_readers.hpp"
#include "service/uploads.hpp"
#include "support/forwarding_store.hpp"
#include "support/silent_provider.hpp"
#include "support/store.hpp"

using namespace std::chrono_literals;
using fairlane::Result;
using fairlane::Store;
using fairlane::UserId;
using fairlane::service::ApiRequest;
using fairlane::service::ApiResponse;
using fairlane::service::Dispatcher;
using fairlane::service::DispatcherConfig;
using fairlane::service::Router;
using fairlane::service::RouterConfig;
using fairlane::service::StoreReaders;
using fairlane::testing::ForwardingStore;
namespace json = boost::json;

using fairlane::testing::SilentProvider;

namespace {

// The io thread's store: counts the reads the job routes make on it, and the key lookups.
class CountedStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  Result<fairlane::JobView> job_of(std::string_view id, UserId owner) override {
    ++job_reads;
    return ForwardingStore::job_of(id, owner);
  }
  Result<fairlane::JobList> jobs_of(UserId user, std::size_t limit,
                                    std::optional<std::string_view> cursor) override {
    ++job_reads;
    return ForwardingStore::jobs_of(user, limit, cursor);
  }
  Result<std::vector<fairlane::PageResult>> results_from(fairlane::JobId job, std::int64_t from_seq,
                                                         std::int64_t limit) override {
    ++job_reads;
    return ForwardingStore::results_from(job, from_seq, limit);
  }
  Result<fairlane::User> find_user_by_key(std::string_view key) override {
    ++key_reads;
    return ForwardingStore::find_user_by_key(key);
  }
  Result<fairlane::EnqueuedJob> enqueue_job(const fairlane::JobRequest& request) override {
    ++commits;
    return ForwardingStore::enqueue_job(request);
  }
  std::atomic<int> job_reads = 0;
  std::atomic<int> key_reads = 0;
  std::atomic<int> commits = 0;
};

// Commits on readers' connections, the first held until the test lets it go; counts how
// many were under way at once.
struct CommitGate {
  std::mutex mutex;
  std::condition_variable changed;
  int entered = 0;
  int active = 0;
  int most_at_once = 0;
  bool released = false;

  bool wait_entered(int n) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, 20s, [&] { return entered >= n; });
  }
  void release() {
    const std::lock_guard lock(mutex);
    released = true;
    changed.notify_all();
  }
};

class HeldCommits final : public ForwardingStore {
 public:
  HeldCommits(std::unique_ptr<Store> inner, CommitGate& gate)
      : ForwardingStore(std::move(inner)), gate_(gate) {}
  Result<fairlane::EnqueuedJob> enqueue_job(const fairlane::JobRequest& request) override {
    {
      std::unique_lock lock(gate_.mutex);
      ++gate_.entered;
      ++gate_.active;
      gate_.most_at_once = std::max(gate_.most_at_once, gate_.active);
      gate_.changed.notify_all();
      gate_.changed.wait_for(lock, 20s, [this] { return gate_.released; });
    }
    auto enqueued = ForwardingStore::enqueue_job(request);
    const std::lock_guard lock(gate_.mutex);
    --gate_.active;
    return enqueued;
  }

 private:
  CommitGate& gate_;
};

// A reader's store whose job_of waits until the test lets it go, and says when it began.
class HeldStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  Result<fairlane::JobView> job_of(std::string_view id, UserId owner) override {
    {
      std::unique_lock lock(mutex_);
      entered_ = true;
      changed_.notify_all();
      changed_.wait_for(lock, 20s, [this] { return released_; });
    }
    return ForwardingStore::job_of(id, owner);
  }
  bool wait_entered() {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 20s, [this] { return entered_; });
  }
  void release() {
    const std::lock_guard lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool entered_ = false;
  bool released_ = false;
};

// A database file, its io-thread store (counted) and a dispatcher whose loop is not started,
// with alice and one job of hers of three pages.
struct Rig {
  explicit Rig(RouterConfig config = RouterConfig{"admin-secret", "Extract.", 200, 1'000, 65'536})
      : store(
            std::make_unique<CountedStore>(fairlane::testing::open_store(dir.file("fairlane.db")))),
        counted(dynamic_cast<CountedStore*>(store.get())) {
    DispatcherConfig dispatch;
    dispatch.limits = {
        .requests_per_minute = 1'500, .tokens_per_minute = 300'000, .max_in_flight = 200};
    dispatcher = std::make_unique<Dispatcher>(io, *store, provider, dispatch);
    auto added = store->add_user("alice");
    REQUIRE(added.ok());
    alice = added->key;
    alice_id = added->user.id;
    job = fairlane::testing::enqueue(*store, added->user.id, 3, "book.pdf");
    counted->commits = 0;  // what the tests count starts here
    config_ = std::move(config);
  }

  Router& router(StoreReaders* readers) {
    config_.readers = readers;
    router_ = std::make_unique<Router>(*store, *dispatcher, config_);
    return *router_;
  }

  ApiResponse send(std::string target, const std::string& key) {
    ApiRequest request{"GET", std::move(target), {{"Authorization", "Bearer " + key}}, ""};
    return router_->handle(std::move(request));
  }

  [[nodiscard]] std::unique_ptr<Store> connection() const {
    return fairlane::testing::open_store(dir.file("fairlane.db"));
  }

  fairlane::testing::TempDir dir;
  boost::asio::io_context io;
  std::unique_ptr<Store> store;
  CountedStore* counted;
  SilentProvider provider;
  std::unique_ptr<Dispatcher> dispatcher;
  std::string alice;
  UserId alice_id = 0;
  fairlane::EnqueuedJob job;
  RouterConfig config_;
  std::unique_ptr<Router> router_;
};

json::object body(const ApiResponse& r) {
  return json::parse(r.body).as_object();
}

// Readers over `count` connections to the rig's database, each made what `wrap` makes of it.
std::unique_ptr<StoreReaders> readers_of(
    const Rig& rig, int count,
    const std::function<std::unique_ptr<Store>(std::unique_ptr<Store>)>& wrap = {}) {
  std::vector<std::unique_ptr<Store>> stores;
  for (int i = 0; i < count; ++i) {
    stores.push_back(wrap ? wrap(rig.connection()) : rig.connection());
  }
  return std::make_unique<StoreReaders>(std::move(stores));
}

// Two readers whose commits wait at `gate` until the test lets them go.
std::unique_ptr<StoreReaders> held_commit_readers(const Rig& rig, CommitGate& gate) {
  return readers_of(rig, 2, [&gate](std::unique_ptr<Store> connection) {
    return std::make_unique<HeldCommits>(std::move(connection), gate);
  });
}

// An upload's answer before it has come.
Result<fairlane::cli::HttpReply> not_answered() {
  return fairlane::Status(fairlane::StatusCode::internal, "not answered");
}

// A router served on loopback, its io_context run on a thread of its own until stop().
struct Served {
  Served(boost::asio::io_context& context, Router& router)
      : io(context), server(context, router), work(boost::asio::make_work_guard(context)) {
    const auto port = server.listen("127.0.0.1", 0);
    REQUIRE(port.ok());
    base = "http://127.0.0.1:" + std::to_string(port.value());
    loop = std::thread([this] { io.run(); });
  }
  Served(const Served&) = delete;
  Served& operator=(const Served&) = delete;
  ~Served() { stop(); }
  void stop() {
    if (!loop.joinable()) return;
    work.reset();
    io.stop();
    loop.join();
  }

  // A thread that uploads three pages named `name` as `key`, its answer in `reply`.
  std::thread upload(const std::string& key, const std::string& name,
                     Result<fairlane::cli::HttpReply>& reply) const {
    return std::thread([&reply, url = base, key, name] {
      fairlane::cli::HttpClient client(url, key, 30s);
      reply = client.post("/v1/jobs", "application/json",
                          R"({"name": ")" + name + R"(", "pages": ["one", "two", "three"]})");
    });
  }
  // Asks `what` on the io thread until it is true; whether it became so (within 20 s).
  bool wait_until(const std::function<bool()>& what) const {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      std::promise<bool> seen;
      boost::asio::post(io, [&] { seen.set_value(what()); });
      if (seen.get_future().get()) return true;
      std::this_thread::yield();
    }
    return false;
  }

  boost::asio::io_context& io;
  fairlane::service::HttpServer server;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work;
  std::thread loop;
  std::string base;
};

}  // namespace

TEST_CASE("StoreReaders gives each read a connection of its own, and every read runs") {
  std::vector<std::unique_ptr<Store>> stores;
  std::vector<const Store*> given;
  for (int i = 0; i < 2; ++i) stores.push_back(fairlane::testing::open_store(":memory:"));
  for (const auto& s : stores) given.push_back(s.get());
  std::mutex mutex;
  std::vector<const Store*> in_use;
  int reads = 0;
  bool shared = false;
  bool foreign = false;
  {
    StoreReaders readers(std::move(stores));
    CHECK(readers.size() == 2);
    for (int i = 0; i < 200; ++i) {
      boost::asio::post(readers.executor(), [&] {
        readers.read([&](Store& store) {
          {
            const std::lock_guard lock(mutex);
            shared = shared || std::find(in_use.begin(), in_use.end(), &store) != in_use.end();
            foreign = foreign || std::find(given.begin(), given.end(), &store) == given.end();
            in_use.push_back(&store);
          }
          std::this_thread::yield();
          const std::lock_guard lock(mutex);
          in_use.erase(std::find(in_use.begin(), in_use.end(), &store));
          ++reads;
        });
      });
    }
  }  // the destructor waits for every read posted
  CHECK(reads == 200);
  CHECK_FALSE(shared);
  CHECK_FALSE(foreign);
  CHECK_THROWS_AS(StoreReaders(std::vector<std::unique_ptr<Store>>{}), std::invalid_argument);
}

TEST_CASE(
    "With readers, a job's view, list and result are read on a reader, not on the io "
    "thread's store, and answered as without") {
  Rig rig;
  const std::unique_ptr<Store> reader = rig.connection();
  const auto readers = readers_of(rig, 1);
  rig.router(readers.get());
  const std::string id = rig.job.job.public_id;

  // Each answer comes back unread, with the read to make; made on another connection, its
  // answer is the route's.
  const auto read_there = [&](const std::string& target) {
    const ApiResponse deferred = rig.send(target, rig.alice);
    REQUIRE(deferred.read != nullptr);
    return deferred.read->read(*reader)();
  };
  const ApiResponse view = read_there("/v1/jobs/" + id);
  CHECK(view.status == 200);
  CHECK(body(view).at("id").as_string() == id);
  CHECK(body(view).at("pages").at("total") == 3);
  const ApiResponse list = read_there("/v1/jobs");
  CHECK(list.status == 200);
  CHECK(body(list).at("jobs").as_array().size() == 1);
  const ApiResponse result = read_there("/v1/jobs/" + id + "/result");
  CHECK(result.status == 200);
  CHECK(body(result).at("pages").as_array().size() == 3);
  const ApiResponse missing = read_there("/v1/jobs/job_nothere");
  CHECK(missing.status == 404);
  CHECK(body(missing).at("error").at("type") == "not_found");
  CHECK(rig.counted->job_reads == 0);

  // Without readers the same routes read in place, on the io thread's store.
  rig.router(nullptr);
  const ApiResponse in_place = rig.send("/v1/jobs/" + id, rig.alice);
  CHECK(in_place.read == nullptr);
  CHECK(in_place.status == 200);
  CHECK(body(in_place).at("id").as_string() == id);
  CHECK(rig.counted->job_reads == 1);
}

TEST_CASE("While a job view is read on a reader, the io thread answers other requests") {
  Rig rig;
  HeldStore* held_store = nullptr;
  const auto readers = readers_of(rig, 1, [&](std::unique_ptr<Store> connection) {
    auto held = std::make_unique<HeldStore>(std::move(connection));
    held_store = held.get();
    return held;
  });
  HeldStore& held = *held_store;
  Served served(rig.io, rig.router(readers.get()));
  const std::string& base = served.base;

  Result<fairlane::cli::HttpReply> view =
      fairlane::Status(fairlane::StatusCode::internal, "unsent");
  std::thread viewer([&] {
    fairlane::cli::HttpClient client(base, rig.alice, 30s);
    view = client.get("/v1/jobs/" + rig.job.job.public_id);
  });
  const bool entered = held.wait_entered();
  // The view's read is held at the reader's connection; the io thread is not waiting for it.
  fairlane::cli::HttpClient other(base, rig.alice, 10s);
  const auto health = other.get("/healthz");
  const auto estimate = other.get("/v1/estimate?pages=5");
  held.release();
  viewer.join();
  served.stop();

  CHECK(entered);
  REQUIRE(health.ok());
  CHECK(health->status == 200);
  REQUIRE(estimate.ok());
  CHECK(estimate->status == 200);
  REQUIRE(view.ok());
  CHECK(view->status == 200);
  CHECK(json::parse(view->body).at("id").as_string() == rig.job.job.public_id);
  CHECK(rig.counted->job_reads == 0);
}

TEST_CASE("A key found is remembered for key_memory: no store read for it until that passes") {
  fairlane::FakeClock clock;
  RouterConfig config{"admin-secret", "Extract.", 200, 1'000, 65'536};
  config.key_memory = 5s;
  config.clock = &clock;
  Rig rig(config);
  rig.router(nullptr);
  CHECK(rig.send("/v1/jobs", rig.alice).status == 200);
  CHECK(rig.counted->key_reads == 1);
  clock.advance(4s);
  CHECK(rig.send("/v1/jobs", rig.alice).status == 200);
  CHECK(rig.counted->key_reads == 1);
  clock.advance(2s);
  CHECK(rig.send("/v1/jobs", rig.alice).status == 200);
  CHECK(rig.counted->key_reads == 2);
  // An unknown key is asked every time: it may be added at any moment.
  CHECK(rig.send("/v1/jobs", "fl_unknown").status == 401);
  CHECK(rig.send("/v1/jobs", "fl_unknown").status == 401);
  CHECK(rig.counted->key_reads == 4);
}

TEST_CASE("Without key_memory every request asks the store for its key") {
  Rig rig;
  rig.router(nullptr);
  CHECK(rig.send("/v1/jobs", rig.alice).status == 200);
  CHECK(rig.send("/v1/jobs", rig.alice).status == 200);
  CHECK(rig.counted->key_reads == 2);
}

TEST_CASE(
    "With readers, an upload is committed on a reader and joins its lane back on the io "
    "thread") {
  Rig rig;
  const std::unique_ptr<Store> reader = rig.connection();
  const auto readers = readers_of(rig, 1);
  Router& router = rig.router(readers.get());
  ApiRequest request{
      "POST",
      "/v1/jobs",
      {{"Authorization", "Bearer " + rig.alice}, {"Content-Type", "application/json"}},
      R"({"name": "notes", "pages": ["one", "two"]})"};
  ApiResponse begun = router.handle(std::move(request));
  REQUIRE(begun.document.has_value());
  const fairlane::service::Upload who = begun.document->upload;
  const ApiResponse commit =
      router.finish_upload(who, fairlane::service::read_upload(std::move(*begun.document)));
  // Past the door, not committed: the commit is the reader's to make.
  REQUIRE(commit.read != nullptr);
  CHECK(rig.counted->commits == 0);
  const auto then = commit.read->read(*reader);
  CHECK(rig.counted->commits == 0);
  CHECK(rig.dispatcher->scheduler().size() == 0);
  const ApiResponse accepted = then();
  CHECK(accepted.status == 202);
  CHECK(rig.dispatcher->scheduler().size() == 2);
  const auto view =
      rig.store->job_of(std::string(body(accepted).at("id").as_string()), rig.alice_id);
  REQUIRE(view.ok());
  CHECK(view->pages.total == 2);
}

TEST_CASE(
    "With readers, the next upload passes the door only once the one before has joined "
    "its lane, and the io thread serves meanwhile") {
  Rig rig;
  CommitGate gate;
  const auto readers = held_commit_readers(rig, gate);
  Served served(rig.io, rig.router(readers.get()));
  fairlane::service::HttpServer& server = served.server;
  Result<fairlane::cli::HttpReply> first = not_answered();
  Result<fairlane::cli::HttpReply> second = not_answered();
  std::thread one = served.upload(rig.alice, "first", first);
  const bool first_held = gate.wait_entered(1);
  std::thread two = served.upload(rig.alice, "second", second);
  const bool second_waits = served.wait_until([&] { return server.uploads_waiting() == 1; });
  fairlane::cli::HttpClient other(served.base, rig.alice, 10s);
  const auto health = other.get("/healthz");
  gate.release();
  one.join();
  two.join();
  served.stop();

  CHECK(first_held);
  CHECK(second_waits);
  REQUIRE(health.ok());
  CHECK(health->status == 200);
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  CHECK(first->status == 202);
  CHECK(second->status == 202);
  CHECK(gate.entered == 2);
  CHECK(gate.most_at_once == 1);
  CHECK(rig.counted->commits == 0);
  // Both joined the lane: the rig's own job is the store's only.
  CHECK(rig.dispatcher->scheduler().size() == 6);
}

TEST_CASE(
    "With readers, an upload waiting for its turn to commit counts as on its way: the upload "
    "committed before it waits for it in its promise window") {
  RouterConfig config{"admin-secret", "Extract.", 200, 1'000, 65'536};
  config.promise_window = 2s;
  Rig rig(config);
  CommitGate gate;
  const auto readers = held_commit_readers(rig, gate);
  Router& router = rig.router(readers.get());
  Served served(rig.io, router);
  fairlane::service::HttpServer& server = served.server;
  Result<fairlane::cli::HttpReply> first = not_answered();
  Result<fairlane::cli::HttpReply> second = not_answered();
  std::thread one = served.upload(rig.alice, "first", first);
  const bool first_held = gate.wait_entered(1);
  std::thread two = served.upload(rig.alice, "second", second);
  // The second's body is read; it waits for the first's commit to take its turn.
  const bool second_waits = served.wait_until([&] { return server.uploads_waiting() == 1; });
  gate.release();
  // The first, committed while the second was on its way, waits for it: its window opens.
  const bool first_waited = served.wait_until([&] { return router.promise_windows_open() == 1; });
  one.join();
  two.join();
  served.stop();

  CHECK(first_held);
  CHECK(second_waits);
  CHECK(first_waited);
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  CHECK(first->status == 202);
  CHECK(second->status == 202);
}

// A read document's pages wait for their turn to commit in memory, each as large as its
// text or image (a small PDF of compressed text can open to thousands of pages): its
// reading slot bounds them until it is committed. Before, the slot was given back once the
// read ended, and any number of read documents could wait for the turn.
TEST_CASE(
    "With readers, a read PDF holds its reading slot while it waits for its turn to commit, "
    "and gives it back once committed") {
  RouterConfig config{"admin-secret", "Extract.", 200, 1'000, 2'000'000};
  config.max_pending_documents = 2;
  config.max_pending_documents_per_user = 1;
  Rig rig(config);
  CommitGate gate;
  const auto readers = held_commit_readers(rig, gate);
  Router& router = rig.router(readers.get());
  Served served(rig.io, router);
  fairlane::service::HttpServer& server = served.server;
  Result<fairlane::cli::HttpReply> first = not_answered();
  Result<fairlane::cli::HttpReply> second = not_answered();
  std::thread one = served.upload(rig.alice, "first", first);
  const bool first_held = gate.wait_entered(1);
  std::thread two([&second, url = served.base, key = rig.alice] {
    fairlane::cli::HttpClient client(url, key, 30s);
    second = client.post("/v1/jobs?name=second.pdf", "application/pdf",
                         fairlane::write_pdf({"One.", "Two."}));
  });
  const ApiRequest pdf_head{
      "POST",
      "/v1/jobs?name=third.pdf",
      {{"Authorization", "Bearer " + rig.alice}, {"Content-Type", "application/pdf"}},
      ""};
  const auto admitted = [&] {
    return std::holds_alternative<fairlane::service::Caller>(router.admit(pdf_head));
  };
  // The PDF is read and waits for the first's commit: her one slot is still its own.
  const bool second_waits = served.wait_until([&] { return server.uploads_waiting() == 1; });
  const bool refused_while_waiting = served.wait_until([&] { return !admitted(); });
  gate.release();
  one.join();
  two.join();
  const bool admitted_once_committed = served.wait_until(admitted);
  served.stop();

  CHECK(first_held);
  CHECK(second_waits);
  CHECK(refused_while_waiting);
  CHECK(admitted_once_committed);
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  CHECK(first->status == 202);
  CHECK(second->status == 202);
}
