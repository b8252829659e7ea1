// The API without sockets: requests in, responses out, over a real store and dispatcher
// (whose loop is not started, so uploads stay queued where the tests can see them).
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <functional>
#include <string>
#include <vector>

#include "core/fake_clock.hpp"
#include "document/pdf_writer.hpp"
#include "service/router.hpp"
#include "support/faulty_vfs.hpp"
#include "support/forwarding_store.hpp"
#include "support/silent_provider.hpp"
#include "support/store.hpp"

using namespace std::chrono_literals;
using fairlane::service::ApiRequest;
using fairlane::service::ApiResponse;
using fairlane::service::Caller;
using fairlane::service::Dispatcher;
using fairlane::service::DispatcherConfig;
using fairlane::service::Router;
using fairlane::service::RouterConfig;
namespace json = boost::json;

using fairlane::testing::SilentProvider;

namespace {

// JSON pages are read off the io thread, as documents are: done here as the server does,
// so that a JSON upload is answered at once.
ApiResponse answered(Router& router, ApiResponse response) {
  if (!response.document ||
      fairlane::service::media_type(response.document->content_type) != "application/json") {
    return response;
  }
  auto document = std::move(*response.document);
  const auto who = document.upload;
  return router.finish_upload(who, fairlane::service::read_upload(std::move(document)));
}

constexpr fairlane::BudgetLimits kLabLimits{
    .requests_per_minute = 1'500, .tokens_per_minute = 300'000, .max_in_flight = 200};

using WrapStore = std::function<std::unique_ptr<fairlane::Store>(std::unique_ptr<fairlane::Store>)>;

struct Api {
  explicit Api(double max_wait_s = 60.0,
               const std::string& db = ":memory:", const std::string& vfs = "",
               fairlane::BudgetLimits limits = kLabLimits, const WrapStore& wrap = {})
      : store(fairlane::testing::open_store(
            db, fairlane::StoreOptions{.wall_clock = [this] { return wall.now(); }, .vfs = vfs})) {
    if (wrap) store = wrap(std::move(store));
    DispatcherConfig config;
    config.limits = limits;
    config.door.max_wait_s = max_wait_s;
    config.door.max_queued_pages_per_user = 500;
    dispatcher = std::make_unique<Dispatcher>(io, *store, provider, config);
    // Pages up to 2 MB, so that the door's 422 for a page over a minute's tokens is reachable.
    RouterConfig router_config{"admin-secret", "Extract.", 200, 1'000, 2'000'000};
    router_config.wall_clock = &wall;
    router = std::make_unique<Router>(*store, *dispatcher, router_config);
    alice = add_user("alice");
    bob = add_user("bob");
  }

  ApiResponse send(std::string method, std::string target, std::string key = "",
                   std::string body = "",
                   std::vector<std::pair<std::string, std::string>> headers = {}) {
    ApiRequest request{std::move(method), std::move(target), std::move(headers), std::move(body)};
    if (!key.empty()) request.headers.emplace_back("Authorization", "Bearer " + key);
    if (!request.body.empty() && !request.header("Content-Type")) {
      request.headers.emplace_back("Content-Type", "application/json");
    }
    return answered(*router, router->handle(request));
  }

  std::string add_user(const std::string& name) {
    const auto r = send("POST", "/v1/users", "admin-secret", R"({"name": ")" + name + R"("})");
    REQUIRE(r.status == 201);
    return std::string(json::parse(r.body).at("key").as_string());
  }

  static json::object body(const ApiResponse& r) { return json::parse(r.body).as_object(); }

  // The router again, its config changed by `change` (the next router takes the
  // dispatcher's callback, so the first goes first).
  void reconfigure(const std::function<void(RouterConfig&)>& change) {
    RouterConfig config{"admin-secret", "Extract.", 200, 1'000, 2'000'000};
    config.wall_clock = &wall;
    change(config);
    router.reset();
    router = std::make_unique<Router>(*store, *dispatcher, config);
  }

  // The router again, with a promise window of 250 ms on `clock`.
  void use_promise_window(const fairlane::Clock& clock) {
    reconfigure([&clock](RouterConfig& config) {
      config.promise_window = 250ms;
      config.clock = &clock;
    });
  }

  static std::string pages_json(int count, std::size_t bytes = 100) {
    json::array pages;
    for (int i = 0; i < count; ++i)
      pages.push_back(json::string(std::string(bytes, 'a' + static_cast<char>(i % 26))));
    return json::serialize(json::object{{"name", "book.pdf"}, {"pages", pages}});
  }

  // The wall clock of the store and of the promises: from now, moved on by the tests.
  fairlane::FakeClock wall_time;
  fairlane::FakeWallClock wall{wall_time, std::chrono::system_clock::now()};
  boost::asio::io_context io;
  std::unique_ptr<fairlane::Store> store;
  SilentProvider provider;
  std::unique_ptr<Dispatcher> dispatcher;
  std::unique_ptr<Router> router;
  std::string alice;
  std::string bob;
};

std::string header(const ApiResponse& r, const std::string& name) {
  for (const auto& [key, value] : r.headers) {
    if (key == name) return value;
  }
  return "";
}

// The message of the 503 busy, with Retry-After: 5, that admit() answered.
std::string busy_message(const std::variant<Caller, ApiResponse>& admitted) {
  REQUIRE(std::holds_alternative<ApiResponse>(admitted));
  const auto& busy = std::get<ApiResponse>(admitted);
  CHECK(busy.status == 503);
  CHECK(header(busy, "Retry-After") == "5");
  return std::string(Api::body(busy).at("error").at("message").as_string());
}

}  // namespace

TEST_CASE("A body sent where none is taken is answered from the headers, before it is read") {
  Api api;
  const auto admit = [&](std::string method, std::string target,
                         std::vector<std::pair<std::string, std::string>> headers) {
    ApiRequest head{std::move(method), std::move(target), std::move(headers), {}};
    head.headers.emplace_back("Authorization", "Bearer " + api.alice);
    return api.router->admit(head);
  };
  const auto status = [](const std::variant<fairlane::service::Caller, ApiResponse>& admitted) {
    const auto* answer = std::get_if<ApiResponse>(&admitted);
    return answer != nullptr ? answer->status : 0;  // 0: admitted, its body to be read
  };
  const std::pair<std::string, std::string> fifty_mb{"Content-Length", "52428800"};
  const std::pair<std::string, std::string> chunked{"Transfer-Encoding", "chunked"};
  // No such route: 404 at once, whatever its body; a method the resource does not take, 405.
  CHECK(status(admit("PUT", "/v1/jobs", {fifty_mb})) == 405);
  CHECK(status(admit("POST", "/v1/queue", {chunked})) == 405);
  CHECK(status(admit("POST", "/v1/nowhere", {fifty_mb})) == 404);
  // A route that takes no body: 400 at once.
  CHECK(status(admit("GET", "/v1/queue", {fifty_mb})) == 400);
  CHECK(status(admit("DELETE", "/v1/jobs/j_1", {chunked})) == 400);
  CHECK(status(admit("GET", "/ui", {fifty_mb})) == 400);  // was read, then the page sent
  CHECK(status(admit("GET", "/ui/", {chunked})) == 400);
  // An upload's body is read; a request without one goes on as before.
  CHECK(status(admit("POST", "/v1/jobs", {fifty_mb, {"Content-Type", "application/pdf"}})) == 0);
  CHECK(status(admit("GET", "/v1/queue", {{"Content-Length", "0"}})) == 0);
  CHECK(status(admit("GET", "/v1/nowhere", {})) == 0);  // 404 when handled: nothing to skip
  // A body of none, as the transport's parser read it: a Content-Length of "00" or "0, 0"
  // (a list of equal values, which HTTP allows) announces no body.
  for (const std::string none : {"00", "0, 0"}) {
    ApiRequest head{"GET", "/v1/queue", {{"Content-Length", none}}, {}};
    head.headers.emplace_back("Authorization", "Bearer " + api.alice);
    head.announced_bytes = 0;
    CHECK_MESSAGE(status(api.router->admit(head)) == 0, none);
  }
}

TEST_CASE(
    "A method a resource does not take is 405 naming the ones it does, in Allow, for a user "
    "and for the admin alike, and a path that is none is 404") {
  // Before, it was 404 "there is no PUT /v1/jobs", as if the resource did not exist, and the
  // admin's GET /v1/users was 403 "the admin key opens /v1/users".
  Api api;
  const std::string id(
      Api::body(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(1))).at("id").as_string());
  struct Case {
    std::string method;
    std::string path;
    std::string key;
    std::string allow;
  };
  const std::vector<Case> cases{
      {"PUT", "/v1/jobs", api.alice, "GET, HEAD, POST"},
      {"DELETE", "/v1/jobs", api.alice, "GET, HEAD, POST"},
      {"POST", "/v1/jobs/" + id, api.alice, "GET, HEAD, DELETE"},
      {"PATCH", "/v1/jobs/job_0", api.alice, "GET, HEAD, DELETE"},
      {"DELETE", "/v1/jobs/" + id + "/result", api.alice, "GET, HEAD"},
      {"POST", "/v1/jobs/" + id + "/events", api.alice, "GET, HEAD"},
      {"POST", "/v1/queue", api.alice, "GET, HEAD"},
      {"POST", "/v1/estimate", api.alice, "GET, HEAD"},
      {"POST", "/metrics", api.alice, "GET, HEAD"},
      {"GET", "/v1/users", api.alice, "POST"},
      {"GET", "/v1/users", "admin-secret", "POST"},
      {"DELETE", "/v1/users", "admin-secret", "POST"},
      {"POST", "/ui", api.alice, "GET, HEAD"},
      {"PUT", "/healthz", "", "GET, HEAD"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.method);
    CAPTURE(c.path);
    const auto answer = api.send(c.method, c.path, c.key);
    CHECK(answer.status == 405);
    CHECK(header(answer, "Allow") == c.allow);
    const auto error = Api::body(answer).at("error");
    CHECK(error.at("type") == "method_not_allowed");
    CHECK(std::string(error.at("message").as_string()).find(c.allow) != std::string::npos);
  }
  CHECK(api.send("PUT", "/v1/nowhere", api.alice).status == 404);
  CHECK(api.send("GET", "/v1/jobs/" + id + "/other", api.alice).status == 404);
  CHECK(api.send("POST", "/v1/jobs/", api.alice).status == 404);  // no id: no job
  CHECK(api.send("POST", "/v1/jobs//result", api.alice).status == 404);
  // A key is still asked for first: without one, 401 as for any route.
  CHECK(api.send("PUT", "/v1/jobs").status == 401);
}

TEST_CASE(
    "A request target in absolute form (as sent to a proxy) is served as its path and query, "
    "and a target that is neither form is 400") {
  // RFC 9112 3.2.2: a server accepts absolute-form. Before, it was 400 "not a valid path".
  Api api;
  CHECK(api.send("GET", "http://127.0.0.1:8080/v1/queue", api.alice).status == 200);
  const auto list = api.send("GET", "https://fairlane.example/v1/jobs?limit=0", api.alice);
  CHECK(list.status == 400);  // its query read: limit is 1 to 1000
  CHECK(std::string(Api::body(list).at("error").at("message").as_string()).find("limit") !=
        std::string::npos);
  CHECK(api.send("GET", "http://127.0.0.1:8080", api.alice).status == 404);  // the path "/"
  // An upload's query is its settings, in either form.
  const auto upload = api.send("POST", "http://127.0.0.1:8080/v1/jobs?max_tokens=77&name=from-url",
                               api.alice, R"({"pages": ["one"]})");
  REQUIRE(upload.status == 202);
  CHECK(Api::body(upload).at("name") == "from-url");
  const std::string id(Api::body(upload).at("id").as_string());
  const auto alice = api.store->find_user_by_key(api.alice);
  REQUIRE(alice.ok());
  CHECK(api.store->job_of(id, alice->id)->max_tokens == 77);
  // An absolute form names its host (RFC 9110 4.2.1), and no user's name or password.
  for (const std::string bad :
       {"v1/queue", "*", "http//x/v1/queue", "/v1/%zz", "http:/v1/queue", "http:v1/queue",
        "http:///v1/queue", "http://u:p@127.0.0.1/v1/queue", "ftp://127.0.0.1/v1/queue"}) {
    CAPTURE(bad);
    const auto refused = api.send("GET", bad, api.alice);
    CHECK(refused.status == 400);
    CHECK(Api::body(refused).at("error").at("type") == "invalid_request");
  }
}

TEST_CASE("Health answers without a key, and the API wants one it knows") {
  Api api;
  CHECK(api.send("GET", "/healthz").status == 200);
  CHECK(api.send("GET", "/readyz").status == 200);
  const auto none = api.send("GET", "/v1/jobs");
  CHECK(none.status == 401);
  CHECK(Api::body(none).at("error").at("type") == "unauthorized");
  CHECK(api.send("GET", "/v1/jobs", "fl_not-a-key").status == 401);
  CHECK(api.send("GET", "/v1/nowhere", api.alice).status == 404);
  CHECK(api.send("GET", "/v1/nowhere").status == 401);
  // The challenge names the scheme (RFC 7235), and the scheme's name is case-insensitive.
  CHECK(header(none, "WWW-Authenticate") == R"(Bearer realm="fairlane")");
  CHECK(api.send("GET", "/v1/jobs", "", "", {{"Authorization", "bearer " + api.alice}}).status ==
        200);
  CHECK(api.send("GET", "/v1/jobs", "", "", {{"Authorization", "Bearer"}}).status == 401);
  CHECK(api.send("GET", "/v1/jobs", "", "", {{"Authorization", "Token " + api.alice}}).status ==
        401);
}

TEST_CASE(
    "A full disk: uploads get 507 saying so and the log where, /readyz is not ready until space "
    "returns") {
  fairlane::testing::FaultyVfs::install();
  fairlane::testing::TempDir dir;
  const std::string db = dir.file("full.db");
  Api api(60.0, db, fairlane::testing::FaultyVfs::kName);
  const auto first = api.send("POST", "/v1/jobs", api.alice, Api::pages_json(3));
  REQUIRE(first.status == 202);

  fairlane::testing::FaultyVfs::fill_disk();
  const auto refused = api.send("POST", "/v1/jobs", api.alice, Api::pages_json(20));
  CHECK(refused.status == 507);
  const auto error = Api::body(refused).at("error");
  CHECK(error.at("type") == "disk_full");
  // The caller is told what happened and what to do; where the database is, and what the
  // operator must do there, only the operator's log.
  const std::string message(error.at("message").as_string());
  CHECK(message.find(db) == std::string::npos);
  CHECK(message.find("no room left") != std::string::npos);
  CHECK(message.find("Retry later") != std::string::npos);
  CHECK(refused.log.find(db) != std::string::npos);
  CHECK(refused.log.find("Free some space") != std::string::npos);
  // Not ready while writes fail; reads still answer.
  const auto not_ready = api.send("GET", "/readyz");
  CHECK(not_ready.status == 503);
  CHECK(Api::body(not_ready).at("error").at("type") == "not_ready");
  CHECK(std::string(Api::body(not_ready).at("error").at("message").as_string()).find("is full") !=
        std::string::npos);
  const std::string id(Api::body(first).at("id").as_string());
  CHECK(api.send("GET", "/v1/jobs/" + id, api.alice).status == 200);

  // Space returns: ready at the next ask, and uploads are accepted, without a restart.
  fairlane::testing::FaultyVfs::heal();
  CHECK(api.send("GET", "/readyz").status == 200);
  CHECK(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(20)).status == 202);
  const auto jobs = Api::body(api.send("GET", "/v1/jobs", api.alice));
  CHECK(jobs.at("jobs").as_array().size() == 2);
}

TEST_CASE("An upload of JSON pages is accepted with its job, then seen, listed and read") {
  Api api;
  const auto accepted = api.send("POST", "/v1/jobs", api.alice, Api::pages_json(3));
  REQUIRE(accepted.status == 202);
  const auto job = Api::body(accepted);
  const std::string id(job.at("id").as_string());
  CHECK(header(accepted, "Location") == "/v1/jobs/" + id);
  CHECK(job.at("state") == "queued");
  CHECK(job.at("pages").at("total") == 3);
  CHECK(job.at("user") == "alice");
  CHECK(job.at("position") == 0);
  CHECK(job.at("eta_seconds").as_double() > 0.0);

  const auto seen = api.send("GET", "/v1/jobs/" + id, api.alice);
  CHECK(seen.status == 200);
  CHECK(Api::body(seen).at("id").as_string() == id);
  const auto list = Api::body(api.send("GET", "/v1/jobs?limit=10", api.alice));
  CHECK(list.at("jobs").as_array().size() == 1);
  CHECK(list.at("next_cursor").is_null());
  const auto result = Api::body(api.send("GET", "/v1/jobs/" + id + "/result", api.alice));
  CHECK(result.at("pages").as_array().size() == 3);
  CHECK(result.at("pages").at(0).at("page") == 1);
  CHECK(result.at("pages").at(0).at("state") == "queued");
  CHECK(api.dispatcher->scheduler().size() == 3);
}

TEST_CASE("A retried upload with the same Idempotency-Key gets the first job back") {
  Api api;
  const std::vector<std::pair<std::string, std::string>> key{{"Idempotency-Key", "upload-7"}};
  const auto first = api.send("POST", "/v1/jobs", api.alice, Api::pages_json(3), key);
  const auto again = api.send("POST", "/v1/jobs", api.alice, Api::pages_json(3), key);
  CHECK(first.status == 202);
  CHECK(again.status == 202);
  CHECK(Api::body(again).at("id") == Api::body(first).at("id"));
  CHECK(Api::body(again).at("pages").at("total") == 3);
  CHECK(api.dispatcher->scheduler().size() == 3);
}

TEST_CASE("An Idempotency-Key sent again with another upload is refused, naming the first job") {
  // A script that uses one key a night ("nightly") sends another book under it. Before, the
  // second book was answered 202 with the first book's job, and never read.
  Api api;
  const std::vector<std::pair<std::string, std::string>> key{{"Idempotency-Key", "nightly"}};
  const auto first = api.send("POST", "/v1/jobs", api.alice, Api::pages_json(3), key);
  REQUIRE(first.status == 202);
  const auto other = api.send("POST", "/v1/jobs", api.alice, Api::pages_json(5), key);
  CHECK(other.status == 422);
  const auto error = Api::body(other).at("error").as_object();
  CHECK(error.at("type") == "idempotency_key_reused");
  CHECK(error.at("job").at("id") == Api::body(first).at("id"));
  CHECK(std::string(error.at("message").as_string())
            .ends_with("which made job " + std::string(Api::body(first).at("id").as_string()) +
                       ": an upload sent again under its key must hold the same bytes. Send "
                       "this one with a new key"));
  CHECK(api.dispatcher->scheduler().size() == 3);
  // Another user's key is theirs: the same one makes Bob a job.
  CHECK(api.send("POST", "/v1/jobs", api.bob, Api::pages_json(5), key).status == 202);
  // JSON of the same length is read all the same: its bytes decide.
  const auto report = [&](const std::string& day) {
    const std::string body = R"({"name":"report","pages":[")" + day + R"("]})";
    return api.send(
        "POST", "/v1/jobs", api.alice, body,
        {{"Idempotency-Key", "daily"}, {"Content-Length", std::to_string(body.size())}});
  };
  const auto monday = report("2026-12-07");
  REQUIRE(monday.status == 202);
  CHECK(report("2026-12-07").status == 202);
  const auto tuesday = report("2026-12-08");
  CHECK(tuesday.status == 422);
  CHECK(Api::body(tuesday).at("error").at("job").at("id") == Api::body(monday).at("id"));
}

TEST_CASE("An upload sent again under its key with another max_tokens or name is refused") {
  // The key named the first job, and a changed ?max_tokens= or ?name= was dropped without a
  // word: the client believed its new settings taken. The same settings, or none said (the
  // service's then), are the same upload.
  Api api;
  const std::string book = fairlane::write_pdf({"One.", "Two."});
  const auto pdf = [&](const std::string& query) {
    return api.send("POST", "/v1/jobs" + query, api.alice, book,
                    {{"Content-Type", "application/pdf"},
                     {"Idempotency-Key", "book-2"},
                     {"Content-Length", std::to_string(book.size())}});
  };
  const auto finish = [&](const ApiResponse& pending) {
    if (!pending.document) return pending;
    return api.router->finish_upload(
        pending.document->upload, fairlane::service::upload_read(fairlane::service::read_document(
                                      pending.document->content_type, pending.document->body)));
  };
  const auto first = finish(pdf("?max_tokens=100&name=draft"));
  REQUIRE(first.status == 202);
  const auto id = Api::body(first).at("id");
  CHECK(Api::body(finish(pdf("?max_tokens=100&name=draft"))).at("id") == id);
  CHECK(Api::body(finish(pdf(""))).at("id") == id);
  const auto tokens = finish(pdf("?max_tokens=4000&name=draft"));
  CHECK(tokens.status == 422);
  CHECK(Api::body(tokens).at("error").at("job").at("id") == id);
  CHECK(std::string(Api::body(tokens).at("error").at("message").as_string())
            .find("max_tokens 4000, where the first asked 100") != std::string::npos);
  const auto name = finish(pdf("?name=final"));
  CHECK(name.status == 422);
  CHECK(std::string(Api::body(name).at("error").at("message").as_string())
            .find("name \"final\", where the first was named \"draft\"") != std::string::npos);
  // JSON: the same bytes under another ?max_tokens= are another upload too.
  const std::vector<std::pair<std::string, std::string>> key{{"Idempotency-Key", "pages-2"}};
  REQUIRE(api.send("POST", "/v1/jobs?max_tokens=100", api.alice, Api::pages_json(2), key).status ==
          202);
  CHECK(api.send("POST", "/v1/jobs?max_tokens=100", api.alice, Api::pages_json(2), key).status ==
        202);
  CHECK(api.send("POST", "/v1/jobs?max_tokens=900", api.alice, Api::pages_json(2), key).status ==
        422);
}

namespace {

// A store in which a key's job is not found until it is committed under it: as when another
// instance commits the same key between this one's look-up and its own commit.
class KeyTakenMeanwhile final : public fairlane::testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  fairlane::Result<fairlane::KeyedJob> job_by_idempotency_key(fairlane::UserId /*user*/,
                                                              std::string_view /*key*/) override {
    return fairlane::Status{fairlane::StatusCode::not_found, "not yet"};
  }
};

}  // namespace

TEST_CASE("An upload whose key was taken meanwhile asking another max_tokens is refused") {
  // The store's commit finds the key's job (created false): it was answered 202 with that
  // job, whatever it asked.
  Api api(60.0, ":memory:", "", kLabLimits, [](std::unique_ptr<fairlane::Store> inner) {
    return std::make_unique<KeyTakenMeanwhile>(std::move(inner));
  });
  const std::vector<std::pair<std::string, std::string>> key{{"Idempotency-Key", "raced"}};
  const auto first =
      api.send("POST", "/v1/jobs?max_tokens=100", api.alice, Api::pages_json(2), key);
  REQUIRE(first.status == 202);
  const auto same = api.send("POST", "/v1/jobs?max_tokens=100", api.alice, Api::pages_json(2), key);
  CHECK(same.status == 202);
  CHECK(Api::body(same).at("id") == Api::body(first).at("id"));
  const auto other =
      api.send("POST", "/v1/jobs?max_tokens=900", api.alice, Api::pages_json(2), key);
  CHECK(other.status == 422);
  CHECK(std::string(Api::body(other).at("error").at("message").as_string())
            .find("max_tokens 900, where the first asked 100") != std::string::npos);
}

TEST_CASE("A PDF sent again under its key is told from another by its head, then its bytes") {
  Api api;
  const std::string book = fairlane::write_pdf({"One.", "Two."});
  const std::string other = fairlane::write_pdf({"Another book, of other pages."});
  REQUIRE(book.size() != other.size());
  const auto headers = [](const std::string& body, bool chunked) {
    std::vector<std::pair<std::string, std::string>> h{{"Content-Type", "application/pdf"},
                                                       {"Idempotency-Key", "book-1"}};
    if (!chunked) h.emplace_back("Content-Length", std::to_string(body.size()));
    return h;
  };
  // Read and finished as the transport does.
  const auto finish = [&](const ApiResponse& pending) {
    REQUIRE(pending.document.has_value());
    return api.router->finish_upload(
        pending.document->upload, fairlane::service::upload_read(fairlane::service::read_document(
                                      pending.document->content_type, pending.document->body)));
  };
  const auto first = finish(api.send("POST", "/v1/jobs", api.alice, book, headers(book, false)));
  REQUIRE(first.status == 202);
  const auto id = Api::body(first).at("id");

  // The same head: the first job, from the headers, with no body read.
  const auto again = api.send("POST", "/v1/jobs", api.alice, book, headers(book, false));
  CHECK_FALSE(again.document.has_value());
  CHECK(again.status == 202);
  CHECK(Api::body(again).at("id") == id);
  // Another length, or none (chunked): the body is read, and its bytes decide.
  for (const bool chunked : {false, true}) {
    CAPTURE(chunked);
    const auto refused =
        finish(api.send("POST", "/v1/jobs", api.alice, other, headers(other, chunked)));
    CHECK(refused.status == 422);
    CHECK(Api::body(refused).at("error").at("job").at("id") == id);
  }
  const auto same_chunked =
      finish(api.send("POST", "/v1/jobs", api.alice, book, headers(book, true)));
  CHECK(same_chunked.status == 202);
  CHECK(Api::body(same_chunked).at("id") == id);
  // The same file in a multipart body (another head): the same upload.
  const std::string multipart =
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"book.pdf\"\r\n"
      "Content-Type: application/pdf\r\n\r\n" +
      book + "\r\n--XyZ--\r\n";
  const auto as_part = finish(api.send("POST", "/v1/jobs", api.alice, multipart,
                                       {{"Content-Type", "multipart/form-data; boundary=XyZ"},
                                        {"Idempotency-Key", "book-1"},
                                        {"Content-Length", std::to_string(multipart.size())}}));
  CHECK(as_part.status == 202);
  CHECK(Api::body(as_part).at("id") == id);
  CHECK(api.dispatcher->scheduler().size() == 2);
}

TEST_CASE("A user sees only their own jobs: another's is 404") {
  Api api;
  const std::string id(
      Api::body(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(1))).at("id").as_string());
  CHECK(api.send("GET", "/v1/jobs/" + id, api.bob).status == 404);
  CHECK(api.send("DELETE", "/v1/jobs/" + id, api.bob).status == 404);
  CHECK(api.send("GET", "/v1/jobs/" + id + "/result", api.bob).status == 404);
  CHECK(api.send("GET", "/v1/jobs/" + id + "/events", api.bob).status == 404);
  CHECK(Api::body(api.send("GET", "/v1/jobs", api.bob)).at("jobs").as_array().empty());
  // The 404 is the same as for a job that does not exist, so ids cannot be probed.
  const auto theirs = Api::body(api.send("GET", "/v1/jobs/" + id, api.bob));
  const auto nobodys = Api::body(api.send("GET", "/v1/jobs/job_000000000000000000000000", api.bob));
  CHECK(theirs.at("error").at("type") == nobodys.at("error").at("type"));
  // Bob's cancel left Alice's job as it was, and its owner still sees it.
  api.io.run_for(50ms);
  const auto still = Api::body(api.send("GET", "/v1/jobs/" + id, api.alice));
  CHECK(still.at("state") == "queued");
  CHECK(still.at("pages").at("queued") == 1);
  CHECK(api.dispatcher->scheduler().size() == 1);
}

TEST_CASE("The door: a long wait is 503 busy with its numbers, and /v1/estimate agrees") {
  Api api(1.5);  // the door accepts 1.5 s of waiting behind others
  const std::string carol = api.add_user("carol");
  // Pages of 100 bytes reserve ceil((8 + 100) / 4) + 200 = 227 tokens, and until a call
  // settles that is what a page is taken to use: 22 pages a second under the tokens limit,
  // 1,321 in the bucket, 200 calls at once of 2 s each (100 a second once they flow).
  REQUIRE(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(100)).status == 202);
  REQUIRE(api.send("POST", "/v1/jobs", api.bob, Api::pages_json(100)).status == 202);
  // Carol's 400 pages go with Alice's and Bob's 200: 200 calls at once, the other 400 as
  // those end (2 s) at 100 a second, 4 s, then 2 s for the last call: 8 s. Alone hers would
  // take 6 s: the queue adds 2 s, 0.5 s more than the door accepts (Retry-After 1).
  const auto predicted = api.send("GET", "/v1/estimate?pages=400&tokens_per_page=227", carol);
  const auto busy = api.send("POST", "/v1/jobs", carol, Api::pages_json(400));
  // The estimate succeeded: 200, with the door's refusal and its numbers, never a 503.
  REQUIRE(predicted.status == 200);
  const auto refusal = Api::body(predicted);
  CHECK(refusal.at("accepted") == false);
  CHECK(refusal.at("reason") == "busy");
  CHECK(refusal.at("position").as_int64() > 0);
  CHECK(refusal.at("estimated_wait_seconds").as_double() == doctest::Approx(2.0).epsilon(0.02));
  CHECK(refusal.at("eta_seconds").as_double() == doctest::Approx(8.0).epsilon(0.02));
  CHECK(refusal.at("max_wait_seconds").as_double() == 1.5);
  CHECK(refusal.at("retry_after_seconds") == 1);
  CHECK(!std::string(refusal.at("message").as_string()).empty());
  CHECK(header(predicted, "Retry-After").empty());
  REQUIRE(busy.status == 503);
  const auto error = Api::body(busy).at("error").as_object();
  CHECK(error.at("type") == "busy");
  CHECK(error.at("position").as_int64() > 0);
  CHECK(error.at("estimated_wait_seconds").as_double() == doctest::Approx(2.0).epsilon(0.02));
  CHECK(error.at("max_wait_seconds").as_double() == 1.5);
  CHECK(error.at("retry_after_seconds") == 1);
  CHECK(header(busy, "Retry-After") == "1");
  // A small job fits, and the estimate said so.
  const auto fits = api.send("GET", "/v1/estimate?pages=10&tokens_per_page=227", carol);
  CHECK(fits.status == 200);
  CHECK(Api::body(fits).at("accepted") == true);
  CHECK(api.send("POST", "/v1/jobs", carol, Api::pages_json(10)).status == 202);
  // A full queue is a refusal the estimate reports too, with its numbers.
  const auto full = Api::body(api.send("GET", "/v1/estimate?pages=600&tokens_per_page=227", carol));
  CHECK(full.at("accepted") == false);
  CHECK(full.at("reason") == "user_queue_full");
  CHECK(full.at("limit") == 500);
}

TEST_CASE("The door counts a user's weight from their first request, before any lane of theirs") {
  Api api;
  // Fresh users, as after a restart: the scheduler has never seen a lane of theirs.
  const auto added = [&](const std::string& name, int weight) {
    const auto r = api.send("POST", "/v1/users", "admin-secret",
                            fmt::format(R"({{"name": "{}", "weight": {}}})", name, weight));
    REQUIRE(r.status == 201);
    return std::string(Api::body(r).at("key").as_string());
  };
  const std::string heavy = added("heavy", 10);
  const std::string light = added("light", 1);
  REQUIRE(api.send("POST", "/v1/jobs", api.bob, Api::pages_json(400)).status == 202);
  const auto eta = [&](const std::string& key) {
    const auto r = Api::body(api.send("GET", "/v1/estimate?pages=100&tokens_per_page=2270", key));
    REQUIRE(r.at("accepted") == true);
    return r.at("eta_seconds").as_double();
  };
  // Weight 10 sends ten pages for each of bob's; weight 1, one: its job ends later.
  CHECK(eta(heavy) < eta(light));
  CHECK(api.dispatcher->scheduler().weight(api.store->find_user_by_key(heavy)->id) == 10);
}

TEST_CASE("Bad uploads get their clear errors, and nothing is queued") {
  Api api;
  CHECK(
      Api::body(api.send("POST", "/v1/jobs", api.alice, "{\"pages\": [")).at("error").at("type") ==
      "invalid_document");
  CHECK(api.send("POST", "/v1/jobs", api.alice, R"({"pages": []})").status == 400);
  CHECK(api.send("POST", "/v1/jobs", api.alice, R"({"pages": [1, 2]})").status == 400);
  CHECK(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(1'001, 1)).status == 413);
  const auto huge = api.send("POST", "/v1/jobs", api.alice, Api::pages_json(2, 1'300'000));
  CHECK(huge.status == 422);
  CHECK(Api::body(huge).at("error").at("page") == 1);
  CHECK(api.send("POST", "/v1/jobs", api.alice, "%PDF-1.7", {{"Content-Type", "text/plain"}})
            .status == 415);
  CHECK(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(501)).status == 429);
  CHECK(api.dispatcher->scheduler().size() == 0);
  CHECK(api.store->jobs_of(api.store->find_user_by_key(api.alice)->id, 10)->jobs.empty());
}

TEST_CASE("A job's name is at most 1,024 bytes, from the JSON, ?name= or the file's name") {
  Api api;
  const std::string longest(1'024, 'n');
  const auto named = [&](const std::string& name) {
    return json::serialize(json::object{{"name", name}, {"pages", json::array{"a page"}}});
  };
  CHECK(api.send("POST", "/v1/jobs", api.alice, named(longest)).status == 202);
  const auto refused = api.send("POST", "/v1/jobs", api.alice, named(longest + "n"));
  CHECK(refused.status == 400);
  const auto error = Api::body(refused).at("error");
  CHECK(error.at("type") == "invalid_request");
  CHECK(std::string(error.at("message").as_string()).find("1025 bytes") != std::string::npos);
  CHECK(std::string(error.at("message").as_string()).find("1024") != std::string::npos);
  CHECK(api.send("POST", "/v1/jobs?name=" + longest + "n", api.alice, Api::pages_json(1)).status ==
        400);
  // Nothing refused was queued.
  CHECK(api.dispatcher->scheduler().size() == 1);
}

TEST_CASE("A JSON upload's empty name counts as none: ?name= names it, else pages.json") {
  Api api;
  const std::string unnamed =
      json::serialize(json::object{{"name", ""}, {"pages", json::array{"a page"}}});
  for (const auto& [target, name] : std::vector<std::pair<std::string, std::string>>{
           {"/v1/jobs", "pages.json"}, {"/v1/jobs?name=notes", "notes"}}) {
    CAPTURE(target);
    const auto answer = api.send("POST", target, api.alice, unnamed);
    REQUIRE(answer.status == 202);
    CHECK(std::string(Api::body(answer).at("name").as_string()) == name);
  }
}

TEST_CASE("An estimate asks about 1 to --max-pages pages of 1 token or more, and is told which") {
  Api api;
  // A page queued, so that the door adds the question's pages to the user's.
  REQUIRE(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(1)).status == 202);
  for (const std::string query : {"pages=9223372036854775807", "pages=1001", "pages=0", "pages=-3",
                                  "pages=10&tokens_per_page=0", "pages=10&tokens_per_page=-5"}) {
    CAPTURE(query);
    const auto answer = api.send("GET", "/v1/estimate?" + query, api.alice);
    CHECK(answer.status == 400);
    CHECK(Api::body(answer).at("error").at("type") == "invalid_request");
  }
  const auto over = api.send("GET", "/v1/estimate?pages=1001", api.alice);
  CHECK(std::string(Api::body(over).at("error").at("message").as_string()).find("1000") !=
        std::string::npos);
  CHECK(api.send("GET", "/v1/estimate?pages=1000", api.alice).status == 200);
  // A page over a minute's tokens is the door's to refuse, with its numbers.
  const auto dear = api.send("GET", "/v1/estimate?pages=10&tokens_per_page=400000", api.alice);
  CHECK(dear.status == 200);
  CHECK(Api::body(dear).at("reason") == "request_too_large");
}

TEST_CASE("A cancel's 202 comes after its commit, with the job as it is after the cancel") {
  fairlane::testing::TempDir dir;
  const std::string db = dir.file("cancel.db");
  Api api(60.0, db);
  const std::string id(
      Api::body(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(4))).at("id").as_string());
  const auto cancelled = api.send("DELETE", "/v1/jobs/" + id, api.alice);
  CHECK(cancelled.status == 202);
  const auto job = Api::body(cancelled);
  CHECK(job.at("state") == "cancelled");
  CHECK(job.at("pages").at("queued") == 0);
  CHECK(job.at("pages").at("cancelled") == 4);
  CHECK(api.dispatcher->scheduler().size() == 0);
  // Committed before the answer, no timer run: another connection to the file sees it.
  const auto other = fairlane::testing::open_store(db);
  const auto user = other->find_user_by_key(api.alice);
  REQUIRE(user.ok());
  const auto seen = other->job_of(id, user->id);
  REQUIRE(seen.ok());
  CHECK(seen->state == fairlane::JobState::cancelled);
  CHECK(seen->pages.cancelled == 4);
}

TEST_CASE("Cancelling a job that has ended changes nothing and answers 200 with it") {
  Api api;
  const std::string id(
      Api::body(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(2))).at("id").as_string());
  REQUIRE(api.send("DELETE", "/v1/jobs/" + id, api.alice).status == 202);
  const auto again = api.send("DELETE", "/v1/jobs/" + id, api.alice);
  CHECK(again.status == 200);
  CHECK(Api::body(again).at("state") == "cancelled");
  CHECK(api.dispatcher->cancelled_jobs() == 0);
}

TEST_CASE("The queue shows lanes, pages, the rate, the binding limit and the buckets") {
  Api api;
  REQUIRE(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(3)).status == 202);
  const auto queue = Api::body(api.send("GET", "/v1/queue", api.bob));
  CHECK(queue.at("lanes") == 1);
  CHECK(queue.at("queued") == 3);
  CHECK(queue.at("in_flight") == 0);
  CHECK(queue.at("binding") == "tokens");
  CHECK(queue.at("buckets").at("requests").as_double() == doctest::Approx(1'500.0).epsilon(0.01));
  CHECK(queue.at("paused") == false);
}

TEST_CASE("The queue is valid JSON without any limit: the rate they allow is null, not infinite") {
  // --rpm 0 --tpm 0 --max-in-flight 0: each "0: none", so the limits allow any rate.
  Api api(60.0, ":memory:", "", fairlane::BudgetLimits{});
  REQUIRE(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(3)).status == 202);
  const auto queue = api.send("GET", "/v1/queue", api.alice);
  REQUIRE(queue.status == 200);
  boost::system::error_code error;
  const json::value body = json::parse(queue.body, error);
  REQUIRE_MESSAGE(!error, queue.body);
  CHECK(body.at("mu").is_null());
  CHECK(body.at("buckets").at("tokens").is_null());
  // With limits it is the number they allow.
  Api lab;
  CHECK(Api::body(lab.send("GET", "/v1/queue", lab.alice)).at("mu").as_double() > 0.0);
}

TEST_CASE("/metrics shows queued pages and the door's refusals by reason, to the admin key") {
  Api api(0.5);
  // As in the door's test, a page here counts 0.28 of an average one, 200 go at once and
  // then 100 a second, and a call takes 2 s: Alice's 300 pages (85 average) wait for nothing.
  REQUIRE(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(300)).status == 202);
  // Bob's 490 (139) go while Alice sends as many: 278 - 200 = 78 at 100/s, 2.78 s, where
  // alone they would take 2 s: the queue adds 0.78 s, busy.
  REQUIRE(api.send("POST", "/v1/jobs", api.bob, Api::pages_json(490)).status == 503);
  // A page over a minute's 300,000 tokens: request_too_large.
  REQUIRE(api.send("POST", "/v1/jobs", api.bob, Api::pages_json(1, 1'300'000)).status == 422);
  const ApiResponse metrics = api.send("GET", "/metrics", "admin-secret");
  REQUIRE(metrics.status == 200);
  CHECK(metrics.content_type.rfind("text/plain", 0) == 0);
  const auto has = [&](const std::string& line) {
    INFO(metrics.body);
    return metrics.body.find("\n" + line + "\n") != std::string::npos;
  };
  CHECK(has("fairlane_pages_queued 300"));
  CHECK(has("fairlane_pages_in_flight 0"));
  CHECK(has("fairlane_door_refusals_total{reason=\"busy\"} 1"));
  CHECK(has("fairlane_door_refusals_total{reason=\"request_too_large\"} 1"));
  CHECK(has("fairlane_door_refusals_total{reason=\"user_queue_full\"} 0"));
  CHECK(has("fairlane_provider_throttled_total{status=\"429\"} 0"));
  CHECK(has("fairlane_pages_out_of_turn_total 0"));  // nothing sent: no promise at risk
  CHECK(has("# TYPE fairlane_call_latency_seconds histogram"));
  CHECK(has("fairlane_bucket_level{bucket=\"requests\"} 1500"));
}

TEST_CASE("Events: the owner gets a stream of the job, another user 404, no key 401") {
  Api api;
  const std::string id(
      Api::body(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(2))).at("id").as_string());
  const ApiResponse stream = api.send("GET", "/v1/jobs/" + id + "/events", api.alice);
  CHECK(stream.status == 200);
  CHECK(stream.content_type == "text/event-stream");
  REQUIRE(stream.events.has_value());
  CHECK(api.send("GET", "/v1/jobs/" + id + "/events", api.bob).status == 404);
  CHECK_FALSE(api.send("GET", "/v1/jobs/" + id + "/events", api.bob).events.has_value());
  CHECK(api.send("GET", "/v1/jobs/" + id + "/events").status == 401);

  // Each event is the job object, as GET /v1/jobs/{id} shows it.
  const auto event = api.router->job_event(*stream.events);
  REQUIRE(event.has_value());
  CHECK_FALSE(event->ended);
  const auto job = json::parse(event->data).as_object();
  CHECK(job.at("id").as_string() == id);
  CHECK(job.at("state") == "queued");
  CHECK(job.at("pages").at("queued") == 2);
}

TEST_CASE("Events: uploads, cancels and committed changes wake the watchers, and a cancel ends") {
  Api api;
  const std::string id(
      Api::body(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(2))).at("id").as_string());
  const auto stream = api.send("GET", "/v1/jobs/" + id + "/events", api.alice).events;
  REQUIRE(stream.has_value());
  int woken = 0;
  api.router->watchers().park([&] { ++woken; });
  // Bob's upload moves the ETA of Alice's job: her watcher wakes.
  REQUIRE(api.send("POST", "/v1/jobs", api.bob, Api::pages_json(2)).status == 202);
  CHECK(woken == 1);

  api.router->watchers().park([&] { ++woken; });
  CHECK(api.send("DELETE", "/v1/jobs/" + id, api.alice).status == 202);
  // The cancellation committed before its answer, and its commit woke the watcher.
  CHECK(woken == 2);
  const auto last = api.router->job_event(*stream);
  REQUIRE(last.has_value());
  CHECK(last->ended);
  CHECK(json::parse(last->data).at("state") == "cancelled");
}

TEST_CASE("An upload may ask its own max_tokens: stored with the job, counted by the door") {
  Api api;
  const auto with = [](std::string_view max_tokens) {
    return R"({"name": "b", "pages": ["one", "two"], "max_tokens": )" + std::string(max_tokens) +
           "}";
  };
  const auto accepted = api.send("POST", "/v1/jobs", api.alice, with("5"));
  REQUIRE(accepted.status == 202);
  const std::string id(Api::body(accepted).at("id").as_string());
  const auto alice = api.store->find_user_by_key(api.alice)->id;
  CHECK(api.store->job_of(id, alice)->max_tokens == 5);
  // Without it, the service's (200 here).
  const auto plain = Api::body(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(1)));
  CHECK(api.store->job_of(std::string(plain.at("id").as_string()), alice)->max_tokens == 200);

  // A page's reservation includes it: 400,000 output tokens pass a minute's 300,000.
  const auto too_large = api.send("POST", "/v1/jobs", api.alice, with("400000"));
  CHECK(too_large.status == 422);
  CHECK(Api::body(too_large).at("error").at("type") == "request_too_large");
  // The page it names is the upload's own: blank pages before it (sent to no one) count.
  const auto third = api.send("POST", "/v1/jobs", api.alice,
                              R"({"name": "b", "pages": ["", "", "three"], "max_tokens": 400000})");
  CHECK(third.status == 422);
  CHECK(std::string(Api::body(third).at("error").at("message").as_string()).starts_with("page 3 "));
  CHECK(Api::body(third).at("error").at("page") == 3);
  for (const char* bad : {"0", "-3", "\"many\"", "2.5", "1000001"}) {
    INFO(bad);
    const auto refused = api.send("POST", "/v1/jobs", api.alice, with(bad));
    CHECK(refused.status == 400);
    CHECK(
        std::string(Api::body(refused).at("error").at("message").as_string()).find("max_tokens") !=
        std::string::npos);
  }
  CHECK(api.dispatcher->scheduler().size() == 3);
}

TEST_CASE("A PDF upload is authorised first, then read, then enqueued page by page") {
  Api api;
  const std::string pdf = fairlane::write_pdf({"First page.", "Second page."});
  const auto pending = api.send("POST", "/v1/jobs?name=novel.pdf&max_tokens=50", api.alice, pdf,
                                {{"Content-Type", "application/pdf"}});
  REQUIRE(pending.document.has_value());
  CHECK(pending.document->body == pdf);
  CHECK(pending.document->upload.name == "novel.pdf");
  CHECK(pending.document->upload.max_tokens == 50);
  CHECK(api.dispatcher->scheduler().size() == 0);  // nothing is queued before it is read

  auto document =
      fairlane::service::read_document(pending.document->content_type, pending.document->body);
  REQUIRE(document.ok());
  CHECK(document->pages.size() == 2);
  const auto accepted = api.router->finish_upload(
      pending.document->upload, fairlane::service::upload_read(std::move(document)));
  REQUIRE(accepted.status == 202);
  const auto job = Api::body(accepted);
  CHECK(job.at("name") == "novel.pdf");
  CHECK(job.at("pages").at("total") == 2);
  CHECK(api.dispatcher->scheduler().size() == 2);
  const auto lanes = api.store->load_lanes().value();
  REQUIRE(lanes.size() == 1);
  REQUIRE(lanes[0].pages.size() == 2);
  const auto first = api.store->page_call(lanes[0].pages[0].page_id);
  CHECK(first->text.find("First page.") != std::string::npos);
  CHECK(first->max_tokens == 50);
  CHECK(api.store->page_call(lanes[0].pages[1].page_id)->text.find("Second page.") !=
        std::string::npos);
}

TEST_CASE("A multipart upload is named after its file, unless ?name= says otherwise") {
  Api api;
  const std::string pdf = fairlane::write_pdf({"Only page."});
  const std::string body =
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; "
      "filename=\"my book.pdf\"\r\nContent-Type: application/pdf\r\n\r\n" +
      pdf + "\r\n--XyZ--\r\n";
  const std::vector<std::pair<std::string, std::string>> type{
      {"Content-Type", "multipart/form-data; boundary=XyZ"}};
  for (const auto& [target, name] : std::vector<std::pair<std::string, std::string>>{
           {"/v1/jobs", "my book.pdf"}, {"/v1/jobs?name=renamed", "renamed"}}) {
    const auto pending = api.send("POST", target, api.alice, body, type);
    REQUIRE(pending.document.has_value());
    auto document =
        fairlane::service::read_document(pending.document->content_type, pending.document->body);
    REQUIRE(document.ok());
    CHECK(document->filename == "my book.pdf");
    const auto accepted = api.router->finish_upload(
        pending.document->upload, fairlane::service::upload_read(std::move(document)));
    REQUIRE(accepted.status == 202);
    CHECK(Api::body(accepted).at("name").as_string() == name);
  }
}

TEST_CASE("A multipart upload without a boundary is refused from its headers, before its body") {
  // A hand-written client that sends "multipart/form-data" alone. Before, its whole body
  // (up to --max-body-mb) was received, and a reading slot taken, for the same 400.
  Api api;
  const auto answer = api.send("POST", "/v1/jobs", api.alice, "--x\r\n...",
                               {{"Content-Type", "multipart/form-data"}});
  CHECK_FALSE(answer.document.has_value());
  CHECK(answer.status == 400);
  CHECK(Api::body(answer).at("error").at("type") == "invalid_document");
  CHECK(Api::body(answer).at("error").at("message") ==
        "the upload's Content-Type has no boundary parameter: send the PDF as -F "
        "file=@book.pdf, which sets it");
}

TEST_CASE("A PDF reader that cannot run gets 503 unavailable to retry, and the operator a line") {
  // The reader exits 127 (a library it needs missing, or replaced under the running service):
  // nothing in the PDF is at fault, so it is not refused as damaged.
  Api api;
  fairlane::service::DocumentReading reading;
  reading.reader.command = {"/bin/sh", "-c", "cat >/dev/null; exit 127"};
  auto document = fairlane::service::read_document("application/pdf",
                                                   fairlane::write_pdf({"Some text."}), reading);
  const auto answer =
      api.router->finish_upload(fairlane::service::Upload{1, 1, "x.pdf", true, 200, std::nullopt},
                                fairlane::service::upload_read(std::move(document)));
  CHECK(answer.status == 503);
  CHECK(header(answer, "Retry-After") == "5");
  CHECK(Api::body(answer).at("error").at("type") == "unavailable");
  const std::string message(Api::body(answer).at("error").at("message").as_string());
  CHECK(message.find("Retry") != std::string::npos);
  CHECK(message.find("/bin/sh") == std::string::npos);
  CHECK(answer.log.rfind("the PDF reader /bin/sh exited with status 127", 0) == 0);
  CHECK(api.dispatcher->scheduler().size() == 0);
}

TEST_CASE("Unreadable documents get 400 invalid_document with the reason, and nothing is queued") {
  Api api;
  const std::string pdf = fairlane::write_pdf({"Some text."});
  const auto reason = [&](const std::string& content_type, const std::string& body) {
    auto document = fairlane::service::read_document(content_type, body);
    const auto answer =
        api.router->finish_upload(fairlane::service::Upload{1, 1, "x.pdf", true, 200, std::nullopt},
                                  fairlane::service::upload_read(std::move(document)));
    CHECK(answer.status == 400);
    CHECK(Api::body(answer).at("error").at("type") == "invalid_document");
    return std::string(Api::body(answer).at("error").at("message").as_string());
  };
  CHECK(reason("application/pdf", pdf.substr(0, pdf.size() / 2)).find("damaged") !=
        std::string::npos);
  CHECK(reason("application/pdf", "just some text, not a PDF").find("could not be read") !=
        std::string::npos);
  CHECK(reason("application/pdf", fairlane::write_pdf({"x"}, {.title = "", .locked = true}))
            .find("encrypted") != std::string::npos);
  CHECK(reason("multipart/form-data; boundary=b",
               "--b\r\nContent-Disposition: form-data; "
               "name=\"other\"\r\n\r\nx\r\n--b--\r\n")
            .find("file") != std::string::npos);
  CHECK(api.dispatcher->scheduler().size() == 0);

  // Refused before any reading: an empty body, and a content type that is none of the three.
  const auto empty =
      api.send("POST", "/v1/jobs", api.alice, "", {{"Content-Type", "application/pdf"}});
  CHECK(empty.status == 400);
  CHECK_FALSE(empty.document.has_value());
  const auto other = api.send("POST", "/v1/jobs", api.alice, pdf, {{"Content-Type", "image/png"}});
  CHECK(other.status == 415);
  CHECK(api.send("POST", "/v1/jobs?max_tokens=0", api.alice, pdf,
                 {{"Content-Type", "application/pdf"}})
            .status == 400);
}

TEST_CASE("A door that would refuse one page refuses a PDF before it is read") {
  Api api;
  // Bob's queue is at its cap of 500 pages: one page more is refused, so is any PDF.
  REQUIRE(api.send("POST", "/v1/jobs", api.bob, Api::pages_json(500)).status == 202);
  const auto refused = api.send("POST", "/v1/jobs", api.bob, fairlane::write_pdf({"x"}),
                                {{"Content-Type", "application/pdf"}});
  CHECK(refused.status == 429);
  CHECK_FALSE(refused.document.has_value());
  CHECK(Api::body(refused).at("error").at("type") == "user_queue_full");
  // Its pages are unknown: it is told that no page is taken, not what a one-page job is.
  const std::string message(Api::body(refused).at("error").at("message").as_string());
  CHECK(message.find("no page more is taken") != std::string::npos);
  CHECK(message.find("adds 1") == std::string::npos);
  CHECK(api.send("GET", "/metrics", "admin-secret")
            .body.find("fairlane_door_refusals_total{reason=\"user_queue_full\"} 1") !=
        std::string::npos);
  // Alice, with nothing queued, is let through to the reading.
  CHECK(api.send("POST", "/v1/jobs", api.alice, fairlane::write_pdf({"x"}),
                 {{"Content-Type", "application/pdf"}})
            .document.has_value());
}

TEST_CASE("The admin key reads the queue with every user's lane, and nothing of the users' jobs") {
  Api api;
  const std::string carol = api.add_user("carol");
  REQUIRE(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(3)).status == 202);
  REQUIRE(api.send("POST", "/v1/jobs", api.bob, Api::pages_json(2)).status == 202);
  const auto queue = api.send("GET", "/v1/queue", "admin-secret");
  REQUIRE(queue.status == 200);
  const auto body = Api::body(queue);
  CHECK(body.at("queued") == 5);
  // Alice's and Bob's lanes, by name; Carol has nothing queued and no lane. Pages of 100
  // bytes reserve ceil((8 + 100) / 4) + 200 = 227 tokens.
  const auto& lanes = body.at("users").as_array();
  REQUIRE(lanes.size() == 2);
  CHECK(lanes[0].at("user") == "alice");
  CHECK(lanes[0].at("queued") == 3);
  CHECK(lanes[0].at("queued_tokens") == 3 * 227);
  CHECK(lanes[0].at("in_flight") == 0);
  CHECK(lanes[0].at("weight") == 1);
  CHECK(lanes[1].at("user") == "bob");
  CHECK(lanes[1].at("queued") == 2);
  // A user sees the totals, not the others' lanes.
  const auto mine = Api::body(api.send("GET", "/v1/queue", carol));
  CHECK(mine.at("queued") == 5);
  CHECK_FALSE(mine.contains("users"));
  // The admin key has no jobs: 403, with the reason.
  const auto jobs = api.send("GET", "/v1/jobs", "admin-secret");
  CHECK(jobs.status == 403);
  CHECK(Api::body(jobs).at("error").at("type") == "forbidden");
  CHECK(api.send("GET", "/v1/estimate?pages=1", "admin-secret").status == 403);
  CHECK(api.send("POST", "/v1/jobs", "admin-secret", Api::pages_json(1)).status == 403);
}

TEST_CASE("Only the admin key adds users and reads /metrics: a user's key gets 403, none 401") {
  Api api;
  const auto user = api.send("POST", "/v1/users", api.alice, R"({"name": "eve"})");
  CHECK(user.status == 403);
  CHECK(Api::body(user).at("error").at("message").as_string().find("admin key") !=
        std::string::npos);
  CHECK(api.send("POST", "/v1/users", "", R"({"name": "eve"})").status == 401);
  CHECK(api.send("POST", "/v1/users", "fl_unknown", R"({"name": "eve"})").status == 401);
  CHECK(api.store->find_user_by_name("eve").status().code() == fairlane::StatusCode::not_found);
  const auto metrics = api.send("GET", "/metrics", api.alice);
  CHECK(metrics.status == 403);
  CHECK(Api::body(metrics).at("error").at("message").as_string().find("admin key") !=
        std::string::npos);
  CHECK(api.send("GET", "/metrics").status == 401);
  CHECK(api.send("GET", "/metrics", "admin-secret-not").status == 401);
  CHECK(api.send("GET", "/metrics", "admin-secre").status == 401);
  CHECK(api.send("GET", "/metrics", "admin-secret").status == 200);
}

TEST_CASE("Without an admin key configured, no key is the admin's, not even an empty one") {
  Api api;
  Router open_router(*api.store, *api.dispatcher, RouterConfig{"", "Extract.", 200, 1'000});
  ApiRequest request{"GET", "/metrics", {{"Authorization", "Bearer "}}, ""};
  CHECK(open_router.handle(request).status == 401);
  request.headers = {{"Authorization", "Bearer " + api.alice}};
  CHECK(open_router.handle(request).status == 403);
}

TEST_CASE(
    "/ui wants a key too: a browser gets a Basic challenge and may give the key as password") {
  Api api;
  const auto challenged = api.send("GET", "/ui");
  CHECK(challenged.status == 401);
  CHECK(header(challenged, "WWW-Authenticate") == R"(Basic realm="fairlane", charset="UTF-8")");
  CHECK(challenged.body.find("<html") == std::string::npos);
  const auto basic = [](const std::string& credentials) {
    // base64 by hand, as a browser sends it.
    static constexpr char kDigits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const auto byte = [&](std::size_t i) {
      return static_cast<unsigned>(static_cast<unsigned char>(credentials[i]));
    };
    std::string out;
    std::size_t i = 0;
    for (; i + 2 < credentials.size(); i += 3) {
      const unsigned n = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
      out += {kDigits[(n >> 18) & 63], kDigits[(n >> 12) & 63], kDigits[(n >> 6) & 63],
              kDigits[n & 63]};
    }
    const std::size_t rest = credentials.size() - i;
    if (rest > 0) {
      unsigned n = byte(i) << 16;
      if (rest == 2) n |= byte(i + 1) << 8;
      out += {kDigits[(n >> 18) & 63], kDigits[(n >> 12) & 63]};
      out += rest == 2 ? std::string(1, kDigits[(n >> 6) & 63]) + "=" : std::string("==");
    }
    return std::vector<std::pair<std::string, std::string>>{{"Authorization", "Basic " + out}};
  };
  for (const std::string& name : {std::string("alice"), std::string(""), std::string("x")}) {
    const auto page = api.send("GET", "/ui", "", "", basic(name + ":" + api.alice));
    CHECK(page.status == 200);
    CHECK(page.content_type == "text/html; charset=utf-8");
    CHECK(page.body.find("/v1/jobs/${encodeURIComponent(id)}/events") != std::string::npos);
  }
  CHECK(api.send("GET", "/ui/", "", "", basic("admin:admin-secret")).status == 200);
  CHECK(api.send("GET", "/ui", api.alice).status == 200);  // Bearer, as a script would
  CHECK(api.send("GET", "/ui", "", "", basic("alice:fl_wrong")).status == 401);
  CHECK(api.send("GET", "/ui", "", "", basic(api.alice)).status == 401);  // no user name part
  CHECK(api.send("GET", "/ui", "", "", {{"Authorization", "Basic !!!"}}).status == 401);
  // Basic credentials open the page only, not the API.
  CHECK(api.send("GET", "/v1/jobs", "", "", basic("alice:" + api.alice)).status == 401);
}

TEST_CASE("A page over the bytes per page is refused with 413 naming the page and the limit") {
  Api api;
  Router small(*api.store, *api.dispatcher,
               RouterConfig{"admin-secret", "Extract.", 200, 1'000, 1'000});
  const auto upload = [&](const std::string& body) {
    return answered(small, small.handle(ApiRequest{"POST",
                                                   "/v1/jobs",
                                                   {{"Authorization", "Bearer " + api.alice},
                                                    {"Content-Type", "application/json"}},
                                                   body}));
  };
  const auto refused = upload(json::serialize(
      json::object{{"name", "b"},
                   {"pages", json::array{"short", json::string(std::string(1'000, 'x')),
                                         json::string(std::string(1'001, 'y'))}}}));
  CHECK(refused.status == 413);
  const auto error = Api::body(refused).at("error");
  CHECK(error.at("type") == "payload_too_large");
  CHECK(error.at("page") == 3);
  CHECK(error.at("bytes") == 1'001);
  CHECK(error.at("max_page_bytes") == 1'000);
  CHECK(error.at("message").as_string().find("page 3") != std::string::npos);
  CHECK(api.dispatcher->scheduler().size() == 0);
  // At the limit it is taken; so are a PDF's pages, checked once read.
  CHECK(upload(json::serialize(
                   json::object{{"pages", json::array{json::string(std::string(1'000, 'x'))}}}))
            .status == 202);
  const fairlane::service::Upload from_pdf{
      api.store->find_user_by_key(api.alice)->id, 1, "b.pdf", true, 200, std::nullopt};
  const auto pdf = small.finish_upload(
      from_pdf,
      fairlane::service::Document{
          "",
          {},
          {},
          {fairlane::DocumentPage{fairlane::PageKind::text, "ok", {}},
           fairlane::DocumentPage{fairlane::PageKind::text, std::string(1'001, 'z'), {}}}});
  CHECK(pdf.status == 413);
  CHECK(Api::body(pdf).at("error").at("page") == 2);
  CHECK(api.dispatcher->scheduler().size() == 1);
}

TEST_CASE("A PDF retried while the first was being read gets the first job, whatever the door") {
  Api api;
  // Alice's queue is one page short of its cap of 500: the retry, if it met the door, would
  // be refused with user_queue_full although its job exists.
  REQUIRE(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(499)).status == 202);
  const std::string pdf = fairlane::write_pdf({"One."});
  const std::vector<std::pair<std::string, std::string>> headers{
      {"Content-Type", "application/pdf"}, {"Idempotency-Key", "book-1"}};
  // Both are authorised before either is read.
  const auto first = api.send("POST", "/v1/jobs", api.alice, pdf, headers);
  const auto retry = api.send("POST", "/v1/jobs", api.alice, pdf, headers);
  REQUIRE(first.document.has_value());
  REQUIRE(retry.document.has_value());
  const auto accepted = api.router->finish_upload(
      first.document->upload, fairlane::service::upload_read(fairlane::service::read_document(
                                  "application/pdf", first.document->body)));
  REQUIRE(accepted.status == 202);
  const auto again = api.router->finish_upload(
      retry.document->upload, fairlane::service::upload_read(fairlane::service::read_document(
                                  "application/pdf", retry.document->body)));
  CHECK(again.status == 202);
  CHECK(Api::body(again).at("id") == Api::body(accepted).at("id"));
  CHECK(api.dispatcher->scheduler().size() == 500);
}

TEST_CASE("An Idempotency-Key too long, not UTF-8 or with a control is refused before the body") {
  Api api;
  for (const std::string& key : {std::string(256, 'k'), std::string("key-\xff"),
                                 std::string("cut \xe2\x82"), std::string("a\tb")}) {
    CAPTURE(key);
    const auto refused = api.send("POST", "/v1/jobs", api.alice, fairlane::write_pdf({"x"}),
                                  {{"Content-Type", "application/pdf"}, {"Idempotency-Key", key}});
    CHECK(refused.status == 400);
    CHECK(Api::body(refused).at("error").at("message").as_string().starts_with(
        "an Idempotency-Key is 1 to 255 bytes of UTF-8 text without control characters"));
    CHECK_FALSE(refused.document.has_value());
  }
}

TEST_CASE("An upload with a Content-Encoding is refused from its headers, naming it") {
  // A gzipped body was received whole, then refused as "not valid JSON (syntax error at
  // byte 1)", or, as a PDF, took a reader's slot and process before its 400.
  Api api;
  for (const std::string type : {"application/json", "application/pdf"}) {
    CAPTURE(type);
    const auto refused = api.send("POST", "/v1/jobs", api.alice, Api::pages_json(1),
                                  {{"Content-Type", type}, {"Content-Encoding", "gzip"}});
    CHECK(refused.status == 415);
    CHECK_FALSE(refused.document.has_value());
    const auto error = Api::body(refused).at("error");
    CHECK(error.at("type") == "unsupported_media_type");
    CHECK(error.at("message") ==
          "a body sent with Content-Encoding gzip is not taken: send it uncompressed");
  }
  // identity is no encoding.
  CHECK(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(1),
                 {{"Content-Type", "application/json"}, {"Content-Encoding", "Identity"}})
            .status == 202);
}

TEST_CASE("A query that gives a parameter twice is refused, naming it") {
  // The first counted, and a proxy or a log that reads the last saw another request.
  Api api;
  for (const std::string& target :
       {std::string("/v1/estimate?pages=1&pages=100000"),
        std::string("/v1/jobs?limit=5&limit=5000"),
        std::string("/v1/jobs?max_tokens=10&name=a&max_tokens=900000")}) {
    CAPTURE(target);
    const std::string method = target.starts_with("/v1/jobs?max") ? "POST" : "GET";
    const auto answer =
        api.send(method, target, api.alice, method == "POST" ? Api::pages_json(1) : "");
    CHECK(answer.status == 400);
    const std::string message(Api::body(answer).at("error").at("message").as_string());
    const std::string name =
        target.substr(target.find('?') + 1, target.find('=') - target.find('?') - 1);
    CHECK(message == "the query gives " + name + " more than once: send each parameter once");
  }
  CHECK(api.dispatcher->scheduler().size() == 0);
  CHECK(api.send("GET", "/v1/estimate?pages=1&tokens_per_page=100", api.alice).status == 200);
}

TEST_CASE("A job id or a cursor that is not text names no job, in an answer that is JSON") {
  Api api;
  // %FF and %00 in the path or the query: a byte that is no UTF-8, and a NUL.
  for (const std::string_view id : {"job_%FF", "job_%00", "job_%E2%82"}) {
    for (const std::string& target :
         {"/v1/jobs/" + std::string(id), "/v1/jobs/" + std::string(id) + "/result"}) {
      CAPTURE(target);
      const auto answer = api.send("GET", target, api.alice);
      CHECK(answer.status == 404);
      // Api::body parses the JSON, which Boost.JSON refuses when it is not UTF-8.
      const std::string message(Api::body(answer).at("error").at("message").as_string());
      CHECK(message.starts_with("you have no job job_\xef\xbf\xbd"));
    }
  }
  const auto cancel = api.send("DELETE", "/v1/jobs/job_%FF", api.alice);
  CHECK(cancel.status == 404);
  for (const std::string_view cursor : {"%FF", "a%00b"}) {
    CAPTURE(cursor);
    const auto list = api.send("GET", "/v1/jobs?cursor=" + std::string(cursor), api.alice);
    CHECK(list.status == 400);
    CHECK(std::string(Api::body(list).at("error").at("message").as_string())
              .ends_with("' is not a cursor from an earlier list of your jobs, or names a "
                         "job since pruned: list your jobs again without a cursor"));
  }
  // A path that is no route is named in its 404, storable: it was echoed as decoded, so
  // the error itself was not JSON a strict client could read.
  for (const std::string& target : {std::string("/%FF"), std::string("/v1/jobs/job_x/%FF")}) {
    CAPTURE(target);
    const auto answer = api.send("GET", target, api.alice);
    CHECK(answer.status == 404);
    const std::string message(Api::body(answer).at("error").at("message").as_string());
    CHECK(message.find("\xef\xbf\xbd") != std::string::npos);
  }
}

TEST_CASE("Hostile job names and idempotency keys come back from the API as sent") {
  Api api;
  for (const std::string& hostile :
       {std::string("'; DROP TABLE jobs; --"), std::string("\" OR 1=1 -- \\\" {} %s"),
        std::string("日本語 ✓ 🚀 \u202eRTL")}) {
    CAPTURE(hostile);
    const std::string body = json::serialize(
        json::object{{"name", hostile}, {"pages", json::array{json::string(hostile)}}});
    const auto first =
        api.send("POST", "/v1/jobs", api.alice, body, {{"Idempotency-Key", hostile}});
    REQUIRE(first.status == 202);
    const auto job = Api::body(first);
    CHECK(job.at("name").as_string() == hostile);
    const std::string id(job.at("id").as_string());
    // The same key finds the same job; the view and the list show the name as sent.
    const auto again =
        api.send("POST", "/v1/jobs", api.alice, body, {{"Idempotency-Key", hostile}});
    CHECK(Api::body(again).at("id").as_string() == id);
    CHECK(Api::body(api.send("GET", "/v1/jobs/" + id, api.alice)).at("name").as_string() ==
          hostile);
    // A hostile user name is refused with the rule, nothing else.
    const auto user = api.send("POST", "/v1/users", "admin-secret",
                               json::serialize(json::object{{"name", hostile}}));
    CHECK(user.status == 400);
  }
  CHECK(api.dispatcher->scheduler().size() == 3);
  CHECK(Api::body(api.send("GET", "/v1/jobs", api.alice)).at("jobs").as_array().size() == 3);
}

TEST_CASE("Events of a job that has ended: 204, which tells EventSource clients to stop") {
  Api api;
  const std::string id(
      Api::body(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(2))).at("id").as_string());
  REQUIRE(api.send("DELETE", "/v1/jobs/" + id, api.alice).status == 202);
  const ApiResponse stream = api.send("GET", "/v1/jobs/" + id + "/events", api.alice);
  CHECK(stream.status == 204);
  CHECK(stream.body.empty());
  CHECK_FALSE(stream.events.has_value());
}

TEST_CASE("A user holds 16 live-event streams at most: the 17th gets 429 until one is released") {
  Api api;
  const std::string id(
      Api::body(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(2))).at("id").as_string());
  const std::string events = "/v1/jobs/" + id + "/events";
  std::vector<ApiResponse> open;
  for (int i = 0; i < 16; ++i) {
    CAPTURE(i);
    open.push_back(api.send("GET", events, api.alice));
    REQUIRE(open.back().status == 200);
    REQUIRE(open.back().events.has_value());
  }
  const auto refused = api.send("GET", events, api.alice);
  CHECK(refused.status == 429);
  CHECK_FALSE(refused.events.has_value());
  // A HEAD, routed as its GET (as the transport does), opens no stream and takes no slot:
  // it was refused 429 with all 16 open.
  ApiRequest head{"GET", events, {{"Authorization", "Bearer " + api.alice}}, ""};
  head.head_only = true;
  const auto headed = answered(*api.router, api.router->handle(head));
  CHECK(headed.status == 200);
  CHECK(headed.content_type == "text/event-stream");
  CHECK_FALSE(headed.events.has_value());
  const auto error = Api::body(refused).at("error");
  CHECK(error.at("type") == "too_many_streams");
  CHECK(error.at("message").as_string().find("16") != std::string::npos);
  // The cap is per user: Bob opens his, on a job of his own, while Alice holds hers.
  const std::string bobs(
      Api::body(api.send("POST", "/v1/jobs", api.bob, Api::pages_json(1))).at("id").as_string());
  CHECK(api.send("GET", "/v1/jobs/" + bobs + "/events", api.bob).status == 200);

  // A stream that ends gives its slot back (the transport drops its handle): one more opens,
  // and then the cap holds again.
  open.front().events->slot.reset();
  const auto again = api.send("GET", events, api.alice);
  CHECK(again.status == 200);
  CHECK(again.events.has_value());
  CHECK(api.send("GET", events, api.alice).status == 429);
}

TEST_CASE("PDFs past the pending-documents cap get 503 busy with Retry-After: 5 until one ends") {
  Api api;
  RouterConfig config{"admin-secret", "Extract.", 200, 1'000, 2'000'000};
  config.max_pending_documents = 3;
  config.max_pending_documents_per_user = 3;  // the cap on all, from one user
  Router router(*api.store, *api.dispatcher, config);
  const std::string pdf = fairlane::write_pdf({"One."});
  const auto upload = [&] {
    return answered(router, router.handle(ApiRequest{"POST",
                                                     "/v1/jobs?name=book.pdf",
                                                     {{"Authorization", "Bearer " + api.alice},
                                                      {"Content-Type", "application/pdf"}},
                                                     pdf}));
  };
  // Three are begun and none is finished: each holds its reading slot.
  std::vector<ApiResponse> reading;
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    reading.push_back(upload());
    REQUIRE(reading.back().document.has_value());
  }
  const auto busy = upload();
  CHECK(busy.status == 503);
  CHECK_FALSE(busy.document.has_value());
  CHECK(header(busy, "Retry-After") == "5");
  const auto error = Api::body(busy).at("error");
  CHECK(error.at("type") == "busy");
  CHECK(error.at("message").as_string().find("3 other documents") != std::string::npos);
  // JSON pages hold no reading slot: they are taken while the PDFs wait.
  CHECK(answered(router, router.handle(ApiRequest{"POST",
                                                  "/v1/jobs",
                                                  {{"Authorization", "Bearer " + api.alice},
                                                   {"Content-Type", "application/json"}},
                                                  Api::pages_json(1)}))
            .status == 202);

  // One read ends (the transport drops the document, slot and all): the next PDF is taken,
  // and read and finished it is queued.
  reading.front().document->slot.reset();
  auto taken = upload();
  REQUIRE(taken.document.has_value());
  CHECK(upload().status == 503);
  const auto accepted = router.finish_upload(
      taken.document->upload, fairlane::service::upload_read(fairlane::service::read_document(
                                  "application/pdf", taken.document->body)));
  CHECK(accepted.status == 202);
  CHECK(api.dispatcher->scheduler().size() == 2);
}

TEST_CASE("One user's PDFs take at most half the reading slots: another's are still read") {
  Api api;
  RouterConfig config{"admin-secret", "Extract.", 200, 1'000, 2'000'000};
  config.max_pending_documents = 4;  // of one user's, at most 2 (the default share)
  Router router(*api.store, *api.dispatcher, config);
  const std::string carol = [&] {
    const auto r = api.send("POST", "/v1/users", "admin-secret", R"({"name": "carol"})");
    return std::string(Api::body(r).at("key").as_string());
  }();
  const std::string pdf = fairlane::write_pdf({"One."});
  const auto upload = [&](const std::string& key) {
    return answered(router, router.handle(ApiRequest{"POST",
                                                     "/v1/jobs?name=book.pdf",
                                                     {{"Authorization", "Bearer " + key},
                                                      {"Content-Type", "application/pdf"}},
                                                     pdf}));
  };
  std::vector<ApiResponse> reading;
  reading.push_back(upload(api.alice));
  reading.push_back(upload(api.alice));
  // Alice's third waits for one of hers: the slots left are for the others.
  const auto hers = upload(api.alice);
  CHECK(hers.status == 503);
  CHECK(header(hers, "Retry-After") == "5");
  CHECK(Api::body(hers).at("error").at("message").as_string().find("2 of your documents") !=
        std::string::npos);
  reading.push_back(upload(api.bob));
  reading.push_back(upload(api.bob));
  for (const auto& r : reading) REQUIRE(r.document.has_value());
  // All four taken: anyone waits.
  const auto full = upload(carol);
  CHECK(full.status == 503);
  CHECK(Api::body(full).at("error").at("message").as_string().find("4 other documents") !=
        std::string::npos);
  // One of Alice's read: she may send another.
  reading.front().document->slot.reset();
  CHECK(upload(api.alice).document.has_value());
}

// A PDF's body is received only to be read by a reader: when its user's share of the reading
// slots, or every slot, is taken, it is refused from its headers. Before, a body of 100 MB
// was received whole only to be told 503. Admission takes no slot: a body that trickles in
// holds no reader from the others (the slot is taken once it has come).
TEST_CASE("A PDF upload is refused 503 from its headers while its reading slots are taken") {
  Api api;
  RouterConfig config{"admin-secret", "Extract.", 200, 1'000, 2'000'000};
  config.max_pending_documents = 2;
  config.max_pending_documents_per_user = 1;
  Router router(*api.store, *api.dispatcher, config);
  const std::string carol = [&] {
    const auto r = api.send("POST", "/v1/users", "admin-secret", R"({"name": "carol"})");
    return std::string(Api::body(r).at("key").as_string());
  }();
  const auto head = [](const std::string& key, const std::string& type) {
    return ApiRequest{"POST",
                      "/v1/jobs?name=book.pdf",
                      {{"Authorization", "Bearer " + key}, {"Content-Type", type}},
                      ""};
  };
  const std::string pdf = fairlane::write_pdf({"One."});
  const auto begin = [&](const std::string& key) {
    ApiRequest whole = head(key, "application/pdf");
    whole.body = pdf;
    return answered(router, router.handle(std::move(whole)));
  };
  // Bob's PDFs on their way take nothing: as many as he likes are admitted.
  const auto bobs = router.admit(head(api.bob, "application/pdf"));
  CHECK(std::holds_alternative<Caller>(bobs));
  CHECK(std::holds_alternative<Caller>(router.admit(head(api.bob, "application/pdf"))));
  // Alice's first is being read: her next is refused from its headers, naming her share,
  // a multipart one too; her JSON pages take no slot.
  auto hers = begin(api.alice);
  REQUIRE(hers.document.has_value());
  CHECK(
      busy_message(router.admit(head(api.alice, "application/pdf"))).find("1 of your documents") !=
      std::string::npos);
  CHECK(busy_message(router.admit(head(api.alice, "multipart/form-data; boundary=x")))
            .find("1 of your documents") != std::string::npos);
  CHECK(std::holds_alternative<Caller>(router.admit(head(api.alice, "application/json"))));
  // Bob's is read too: every slot is taken, and Carol is refused naming them.
  auto his = begin(api.bob);
  REQUIRE(his.document.has_value());
  CHECK(busy_message(router.admit(head(carol, "application/pdf"))).find("2 other documents") !=
        std::string::npos);
  // One read ends: Carol's comes in, and Alice's once hers has.
  his.document->slot.reset();
  CHECK(std::holds_alternative<Caller>(router.admit(head(carol, "application/pdf"))));
  CHECK(std::holds_alternative<ApiResponse>(router.admit(head(api.alice, "application/pdf"))));
  hers.document->slot.reset();
  CHECK(std::holds_alternative<Caller>(router.admit(head(api.alice, "application/pdf"))));
}

// Bodies on their way are held in memory until read: before, nothing bounded them but
// --max-connections (1,000 bodies of up to 100 MB each). Counted from the headers, past the
// cap an upload is told 503 before its body is sent.
TEST_CASE("Upload bodies on their way are capped in bytes from their headers, one user's at half") {
  Api api;
  RouterConfig config{"admin-secret", "Extract.", 200, 1'000, 2'000'000};
  constexpr std::size_t kMb = 1024 * 1024;
  config.max_receiving_bytes = 10 * kMb;
  config.max_body_bytes = 4 * kMb;  // a chunked body counts as this much
  Router router(*api.store, *api.dispatcher, config);
  const auto user = [&](const std::string& name) {
    const auto r = api.send("POST", "/v1/users", "admin-secret", R"({"name": ")" + name + "\"}");
    return std::string(Api::body(r).at("key").as_string());
  };
  const std::string carol = user("carol");
  const std::string dave = user("dave");
  const auto head = [](const std::string& key, const std::string& length_header,
                       const std::string& value) {
    return ApiRequest{"POST",
                      "/v1/jobs",
                      {{"Authorization", "Bearer " + key},
                       {"Content-Type", "application/json"},
                       {length_header, value}},
                      ""};
  };
  const auto mb3 = [&](const std::string& key) {
    return router.admit(head(key, "Content-Length", std::to_string(3 * kMb)));
  };
  auto alices = mb3(api.alice);
  REQUIRE(std::holds_alternative<Caller>(alices));
  // Her second would hold 6 MB of hers, past her share of 5.
  CHECK(busy_message(mb3(api.alice)).find("3.0 MB of your uploads already") != std::string::npos);
  auto bobs = mb3(api.bob);
  auto carols = mb3(carol);
  REQUIRE(std::holds_alternative<Caller>(bobs));
  REQUIRE(std::holds_alternative<Caller>(carols));
  // 9 MB held: Dave's 3 would pass the 10 of all, as would a chunked body (4).
  CHECK(busy_message(mb3(dave)).find("9.0 MB of uploads already") != std::string::npos);
  CHECK(busy_message(router.admit(head(dave, "Transfer-Encoding", "chunked")))
            .find("at most 10.0 MB at once") != std::string::npos);
  // A Content-Length it cannot read (a list of equal values, which HTTP allows) counts as
  // the largest body too, not as none.
  CHECK(std::holds_alternative<ApiResponse>(router.admit(head(dave, "Content-Length", "1, 1"))));
  // The transport's parser says the size when it read the headers: that is what counts.
  ApiRequest parsed = head(dave, "Content-Length", "1, 1");
  parsed.announced_bytes = 1;
  CHECK(std::holds_alternative<Caller>(router.admit(parsed)));
  // A request without a body holds none, and is let through.
  CHECK(std::holds_alternative<Caller>(router.admit(head(dave, "Content-Length", "0"))));
  // Alice's body read (the transport lets go of its bytes): Dave's chunked one comes in.
  std::get<Caller>(alices).on_its_way.reset();
  CHECK(std::holds_alternative<Caller>(router.admit(head(dave, "Transfer-Encoding", "chunked"))));
}

TEST_CASE("/metrics says fairlane_store_ok 0 while a commit fails, and 1 once one goes through") {
  fairlane::testing::FaultyVfs::install();
  fairlane::testing::TempDir dir;
  Api api(60.0, dir.file("metrics.db"), fairlane::testing::FaultyVfs::kName);
  const auto store_ok = [&] {
    const std::string body = api.send("GET", "/metrics", "admin-secret").body;
    INFO(body);
    const auto at = body.find("\nfairlane_store_ok ");
    REQUIRE(at != std::string::npos);
    return body.substr(at + 19, body.find('\n', at + 1) - at - 19);
  };
  const std::string id(
      Api::body(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(2))).at("id").as_string());
  const std::string other(
      Api::body(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(2))).at("id").as_string());
  CHECK(store_ok() == "1");
  // A cancel commits through the dispatcher's group commit at once: on a full disk it fails.
  fairlane::testing::FaultyVfs::fill_disk();
  CHECK(api.send("DELETE", "/v1/jobs/" + id, api.alice).status == 507);
  CHECK(store_ok() == "0");
  fairlane::testing::FaultyVfs::heal();
  CHECK(api.send("DELETE", "/v1/jobs/" + other, api.alice).status == 202);
  CHECK(store_ok() == "1");
}

TEST_CASE(
    "A job carries the door's promise, and when work arriving ahead breaks it, it is revised") {
  Api api(1e6);  // the door accepts any wait: the others' books all get in
  const auto accepted = api.send("POST", "/v1/jobs", api.alice, Api::pages_json(100));
  REQUIRE(accepted.status == 202);
  const auto job = Api::body(accepted);
  const std::string id(job.at("id").as_string());
  // The promise is the acceptance plus the ETA the 202 gave.
  REQUIRE(job.at("promised_eta_at").is_string());
  CHECK(job.at("eta_revised_at").is_null());
  CHECK(job.at("eta_revised_reason").is_null());
  api.router->tick();
  CHECK(Api::body(api.send("GET", "/v1/jobs/" + id, api.alice)).at("eta_revised_at").is_null());
  // Alice queues a second book behind it: a user with a shelf is not helped by newer work's
  // turns (the PromiseOrder), she shares.
  REQUIRE(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(2)).status == 202);
  // Forty users' books of 100 pages arrive: fair order puts 100 pages of each ahead of
  // Alice's last page, far more than the promise allowed for.
  for (int i = 0; i < 40; ++i) {
    const std::string key = api.add_user(fmt::format("reader{}", i));
    REQUIRE(api.send("POST", "/v1/jobs", key, Api::pages_json(100)).status == 202);
  }
  // Alice's job is first looked at again a second after it was promised.
  api.wall_time.advance(std::chrono::seconds(2));
  api.router->tick();
  const auto revised = Api::body(api.send("GET", "/v1/jobs/" + id, api.alice));
  REQUIRE(revised.at("eta_revised_at").is_string());
  CHECK(revised.at("eta_revised_reason") == "more work arrived ahead of this job than expected");
  CHECK(revised.at("promised_eta_at") == job.at("promised_eta_at"));  // what was said stays
  CHECK(std::string(revised.at("eta_revised_at").as_string()) >
        std::string(job.at("promised_eta_at").as_string()));
  CHECK(api.router->promises().watched() == 42);
  // Announced once: nothing new, no new revision.
  api.router->tick();
  CHECK(Api::body(api.send("GET", "/v1/jobs/" + id, api.alice)).at("eta_revised_at") ==
        revised.at("eta_revised_at"));
  // A cancelled job is no longer watched, and counts in no accuracy figure.
  REQUIRE(api.send("DELETE", "/v1/jobs/" + id, api.alice).status == 202);
  api.wall_time.advance(std::chrono::hours(1));  // its next look is due
  api.router->tick();
  CHECK(api.router->promises().watched() == 41);
  const auto queue = Api::body(api.send("GET", "/v1/queue", api.alice));
  CHECK(queue.at("promises").at("finished") == 0);
  CHECK(queue.at("promises").at("actual_over_promised_p50").is_null());
}

TEST_CASE("An image page reserves its dialect's image tokens, a blank page nothing and no call") {
  for (const auto dialect : {fairlane::Dialect::openai, fairlane::Dialect::anthropic}) {
    CAPTURE(fairlane::to_string(dialect));
    Api api;
    RouterConfig config{"admin-secret", "Extract.", 200, 1'000, 2'000'000};
    config.dialect = dialect;
    Router router(*api.store, *api.dispatcher, config);
    const fairlane::service::Upload upload{
        api.store->find_user_by_key(api.alice)->id, 1, "scan.pdf", true, 200, std::nullopt};
    const fairlane::PageImage image{"image/png", 1024, 1024, "png bytes"};
    const auto answer = router.finish_upload(
        upload,
        fairlane::service::Document{"",
                                    {},
                                    {},
                                    {fairlane::DocumentPage{fairlane::PageKind::image, "", image},
                                     fairlane::DocumentPage{fairlane::PageKind::blank, "", {}},
                                     fairlane::DocumentPage{fairlane::PageKind::text, "abc", {}}}});
    REQUIRE(answer.status == 202);
    const json::value job = json::parse(answer.body);
    CHECK(job.at("pages").at("total") == 3);
    CHECK(job.at("pages").at("images") == 1);
    CHECK(job.at("pages").at("blank") == 1);
    CHECK(job.at("pages").at("done") == 1);
    CHECK(job.at("pages").at("queued") == 2);
    // Only the two pages that make a call wait, with what they reserve: the prompt and the
    // image's text part (8 + 22 bytes: 8 tokens) + max_tokens + the image (OpenAI: 4 tiles,
    // 765; Anthropic: 1024 x 1024 / 750, 1,399), and the text page's (8 + 3 bytes: 3) + 200.
    CHECK(api.dispatcher->scheduler().size() == 2);
    const auto lanes = api.store->load_lanes().value();
    REQUIRE(lanes.size() == 1);
    REQUIRE(lanes[0].pages.size() == 2);
    const std::int64_t image_tokens = dialect == fairlane::Dialect::openai ? 765 : 1'399;
    CHECK(lanes[0].pages[0].estimated_tokens == 8 + 200 + image_tokens);
    CHECK(lanes[0].pages[1].estimated_tokens == 3 + 200);
  }
}

TEST_CASE(
    "An upload accepted while another is read waits out its promise window, and is "
    "promised with it") {
  Api api;
  fairlane::FakeClock clock;
  api.use_promise_window(clock);
  // The service's wall clock is not the machine's (as a test's is not): a promise is said in
  // the store's time, the door's and the one made again alike.
  api.wall_time.advance(std::chrono::hours(24 * 30));

  // Two books of 450 pages sent together: both bodies are being read (each holds a reading
  // slot) before either is answered. 200 calls go at once, then 100 a second: alone the
  // first would take a few seconds, the two together seconds more.
  const auto begin = [&](const std::string& key) {
    ApiRequest request{"POST",
                       "/v1/jobs",
                       {{"Authorization", "Bearer " + key}, {"Content-Type", "application/json"}},
                       Api::pages_json(450)};
    ApiResponse reading = api.router->handle(request);
    REQUIRE(reading.document.has_value());
    return std::move(*reading.document);
  };
  const auto finish = [&](fairlane::service::DocumentUpload document) {
    const auto who = document.upload;
    return api.router->finish_upload(who, fairlane::service::read_upload(std::move(document)));
  };
  // As the transport does: each is on its way from its headers until its body is read.
  auto alice_coming = api.router->upload_on_its_way(ApiRequest{"POST", "/v1/jobs", {}, ""});
  auto bob_coming = api.router->upload_on_its_way(ApiRequest{"POST", "/v1/jobs", {}, ""});
  REQUIRE(alice_coming != nullptr);
  CHECK(api.router->upload_on_its_way(ApiRequest{"GET", "/v1/jobs", {}, ""}) == nullptr);
  auto alice_upload = begin(api.alice);
  auto bob_upload = begin(api.bob);
  alice_coming.reset();  // read

  // Alice's is accepted while Bob's is still being read: committed and queued with the
  // door's promise, and her answer waits.
  const auto first = finish(std::move(alice_upload));
  REQUIRE(first.promise_hold.has_value());
  CHECK(first.promise_hold->wait == 250ms);
  CHECK(first.body.empty());  // nothing is said before the window ends
  const fairlane::JobId alice_job = first.promise_hold->job;
  const auto door_alice = api.store->job(alice_job)->promised_eta_at;
  REQUIRE(door_alice.has_value());

  // Bob's, the last, has nothing on its way: answered at once, promised with Alice's book
  // in the lanes.
  bob_coming.reset();
  const auto second = finish(std::move(bob_upload));
  REQUIRE(second.status == 202);
  CHECK_FALSE(second.promise_hold.has_value());
  const auto bob_id = api.store->find_user_by_name("bob")->id;
  const auto bob_view =
      api.store->job_of(std::string(Api::body(second).at("id").as_string()), bob_id).value();
  REQUIRE(bob_view.promised_eta_at.has_value());
  CHECK(api.dispatcher->scheduler().size() == 900);
  CHECK(*bob_view.promised_eta_at - *door_alice > 2s);  // Alice was quoted the provider alone

  clock.advance(250ms);
  const auto alice_answer = api.router->close_promise(*first.promise_hold);
  REQUIRE(alice_answer.status == 202);
  const auto alice_view = api.store->job(alice_job).value();
  // Bob's book came in her window and shares the provider with hers: she is promised the end
  // they reach together, later than the door first said; the 202 says what is stored, and a
  // promise made is not a revision.
  REQUIRE(alice_view.promised_eta_at.has_value());
  CHECK(*alice_view.promised_eta_at - *door_alice > 2s);
  CHECK(*alice_view.promised_eta_at - *door_alice < 60s);
  CHECK(*bob_view.promised_eta_at - *alice_view.promised_eta_at < 1s);
  CHECK(*alice_view.promised_eta_at - *bob_view.promised_eta_at < 1s);
  CHECK_FALSE(alice_view.eta_revised_at.has_value());
  const auto alice_now = api.send("GET", "/v1/jobs/" + alice_view.public_id, api.alice);
  CHECK(Api::body(alice_answer).at("promised_eta_at") ==
        Api::body(alice_now).at("promised_eta_at"));
  // Bob's promise stands as it was said.
  CHECK(api.store->job(bob_view.id)->promised_eta_at == bob_view.promised_eta_at);
}

namespace {

// A store whose job view cannot be read while `failing` is set, as a server database's read
// can fail when its connection breaks.
class FailingJobReads final : public fairlane::testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  fairlane::Result<fairlane::JobView> job(fairlane::JobId job) override {
    if (failing) return fairlane::Status{fairlane::StatusCode::io_error, "reading a job: broken"};
    return ForwardingStore::job(job);
  }
  bool failing = false;
};

}  // namespace

TEST_CASE("An upload held for its promise window is answered 202 even if its job cannot be read") {
  FailingJobReads* reads = nullptr;
  Api api(60.0, ":memory:", "", kLabLimits, [&](std::unique_ptr<fairlane::Store> inner) {
    auto wrapped = std::make_unique<FailingJobReads>(std::move(inner));
    reads = wrapped.get();
    return std::unique_ptr<fairlane::Store>(std::move(wrapped));
  });
  fairlane::FakeClock clock;
  api.use_promise_window(clock);
  auto bob_coming = api.router->upload_on_its_way(ApiRequest{"POST", "/v1/jobs", {}, ""});
  const auto held = api.send("POST", "/v1/jobs", api.alice, Api::pages_json(2));
  REQUIRE(held.promise_hold.has_value());

  // The window ends while the store cannot be read: the job was committed, so its answer is
  // its 202 as committed, with the door's promise. Before, a 503, which a client without an
  // Idempotency-Key would have answered by uploading the book again.
  clock.advance(250ms);
  reads->failing = true;
  const auto answer = api.router->close_promise(*held.promise_hold);
  reads->failing = false;
  REQUIRE(answer.status == 202);
  const auto stored = api.store->job(held.promise_hold->job).value();
  CHECK(Api::body(answer).at("id") == json::value(stored.public_id));
  CHECK(Api::body(answer).at("promised_eta_at").is_string());
  CHECK(api.dispatcher->scheduler().size() == 2);
}

TEST_CASE("A job pruned before its promise's next look is no longer watched") {
  Api api(1e6);
  const auto first = api.send("POST", "/v1/jobs", api.alice, Api::pages_json(2));
  REQUIRE(first.status == 202);
  REQUIRE(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(2)).status == 202);
  CHECK(api.router->promises().watched() == 2);
  // The first job ends (cancelled: nothing of it was out) and is pruned (retention) before
  // anyone looks at its promise again.
  const std::string id(Api::body(first).at("id").as_string());
  REQUIRE(api.send("DELETE", "/v1/jobs/" + id, api.alice).status == 202);
  const auto pruned =
      api.store->prune(std::chrono::system_clock::now() + std::chrono::hours(1), 1'000);
  REQUIRE(pruned.ok());
  REQUIRE(pruned->jobs == 1);
  api.wall_time.advance(std::chrono::hours(1));  // its next look is due
  api.router->tick();
  CHECK(api.router->promises().watched() == 1);
}

namespace {

// A store pruned (retention, from another process) between a job's view and its results.
class PrunedBeforeResults final : public fairlane::testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  fairlane::Result<std::vector<fairlane::PageResult>> results_from(fairlane::JobId job,
                                                                   std::int64_t from_seq,
                                                                   std::int64_t limit) override {
    const auto later = std::chrono::system_clock::now() + std::chrono::hours(1);
    if (fairlane::Status s = ForwardingStore::prune(later, 1'000).status(); !s.ok()) return s;
    return ForwardingStore::results_from(job, from_seq, limit);
  }
};

}  // namespace

TEST_CASE(
    "A job's result is answered a range of pages at a time, from ?from= for ?limit= pages or "
    "up to the bytes of text an answer holds, with the page to go on from") {
  // Before, the whole result was built in memory at each ask: a 10,000-page job, some 40 MB
  // of text, held three times over while a slow reader took it.
  Api api;
  api.reconfigure([](RouterConfig& config) { config.result_bytes = 250; });
  const auto accepted = api.send("POST", "/v1/jobs", api.alice, Api::pages_json(5));
  REQUIRE(accepted.status == 202);
  const std::string id(Api::body(accepted).at("id").as_string());
  // Pages 1 to 4 done, with 100 bytes of text each; page 5 still queued.
  std::vector<fairlane::PageTransition> ended;
  for (const auto& lane : api.store->load_lanes().value()) {
    for (const auto& page : lane.pages) {
      if (ended.size() == 8) break;
      ended.push_back(fairlane::PageTransition::dispatched(page.page_id, 300));
      ended.push_back(
          fairlane::PageTransition::completed(page.page_id, std::string(100, 'x'), {100, 50}));
    }
  }
  REQUIRE(ended.size() == 8);
  REQUIRE(api.store->apply(ended).ok());
  const auto pages_of = [&](const std::string& query) {
    const auto answer = api.send("GET", "/v1/jobs/" + id + "/result" + query, api.alice);
    REQUIRE(answer.status == 200);
    const auto body = Api::body(answer);
    std::vector<std::int64_t> numbers;
    for (const auto& page : body.at("pages").as_array()) {
      numbers.push_back(page.at("page").as_int64());
    }
    const json::value& next = body.at("next_from");
    return std::pair{numbers, next.is_null() ? std::int64_t{0} : next.as_int64()};
  };
  using Pages = std::vector<std::int64_t>;
  // 250 bytes: the third page of text passes them, and is the last of its answer.
  CHECK(pages_of("") == std::pair{Pages{1, 2, 3}, std::int64_t{4}});
  CHECK(pages_of("?from=4") == std::pair{Pages{4, 5}, std::int64_t{0}});
  CHECK(pages_of("?limit=2") == std::pair{Pages{1, 2}, std::int64_t{3}});
  CHECK(pages_of("?from=2&limit=1") == std::pair{Pages{2}, std::int64_t{3}});
  CHECK(pages_of("?from=5&limit=1") == std::pair{Pages{5}, std::int64_t{0}});
  // Past the last page: none, and nowhere to go on.
  CHECK(pages_of("?from=6") == std::pair{Pages{}, std::int64_t{0}});
  // Text over the bytes in one page still goes: an answer always holds a page.
  api.reconfigure([](RouterConfig& config) { config.result_bytes = 10; });
  CHECK(pages_of("?from=3") == std::pair{Pages{3}, std::int64_t{4}});
  for (const std::string bad : {"?from=0", "?from=x", "?limit=0", "?limit=1001", "?limit=-1"}) {
    CAPTURE(bad);
    const auto refused = api.send("GET", "/v1/jobs/" + id + "/result" + bad, api.alice);
    CHECK(refused.status == 400);
    CHECK(Api::body(refused).at("error").at("type") == "invalid_request");
  }
}

TEST_CASE("A job pruned between its view and its results answers 404, not an empty result") {
  Api api(60.0, ":memory:", "", kLabLimits, [](std::unique_ptr<fairlane::Store> inner) {
    return std::unique_ptr<fairlane::Store>(
        std::make_unique<PrunedBeforeResults>(std::move(inner)));
  });
  const auto first = api.send("POST", "/v1/jobs", api.alice, Api::pages_json(2));
  REQUIRE(first.status == 202);
  REQUIRE(api.send("POST", "/v1/jobs", api.alice, Api::pages_json(1)).status == 202);
  const std::string id(Api::body(first).at("id").as_string());
  REQUIRE(api.send("DELETE", "/v1/jobs/" + id, api.alice).status == 202);  // ended
  const auto answer = api.send("GET", "/v1/jobs/" + id + "/result", api.alice);
  CHECK(answer.status == 404);
  CHECK(Api::body(answer).at("error").at("type") == "not_found");
}

TEST_CASE("A job that ends inside its promise window is measured against its promise") {
  Api api;
  fairlane::FakeClock clock;
  api.use_promise_window(clock);
  // Alice's two pages are accepted while Bob's upload is on its way: her answer waits.
  auto bob_coming = api.router->upload_on_its_way(ApiRequest{"POST", "/v1/jobs", {}, ""});
  REQUIRE(bob_coming != nullptr);
  const auto held = api.send("POST", "/v1/jobs", api.alice, Api::pages_json(2));
  REQUIRE(held.promise_hold.has_value());
  const fairlane::JobId job = held.promise_hold->job;
  // Its pages are sent and answered within the window (a fast provider).
  std::vector<fairlane::PageTransition> ended;
  for (const auto& lane : api.store->load_lanes().value()) {
    for (const auto& page : lane.pages) {
      if (page.job_id != job) continue;
      ended.push_back(fairlane::PageTransition::dispatched(page.page_id, 300));
      ended.push_back(fairlane::PageTransition::completed(page.page_id, "text", {100, 50}));
    }
  }
  REQUIRE(ended.size() == 4);
  REQUIRE(api.store->apply(ended).ok());
  REQUIRE(api.store->job(job)->state == fairlane::JobState::done);

  clock.advance(250ms);
  CHECK(api.router->close_promise(*held.promise_hold).status == 202);
  const auto accuracy = api.router->promises().accuracy();
  CHECK(accuracy.finished == 1);
  REQUIRE(accuracy.ratio_p50.has_value());
  CHECK(*accuracy.ratio_p50 < 1.0);  // ended well within what it was promised
  CHECK(api.router->promises().watched() == 0);
}

TEST_CASE("An upload accepted while no other is read is answered at once, window or not") {
  Api api;
  fairlane::FakeClock clock;
  api.use_promise_window(clock);
  const auto answer = api.send("POST", "/v1/jobs", api.alice, Api::pages_json(3));
  CHECK(answer.status == 202);
  CHECK_FALSE(answer.promise_hold.has_value());
  CHECK(Api::body(answer).at("promised_eta_at").is_string());
}

TEST_CASE("Without a promise window an upload is answered and promised at once") {
  Api api;  // RouterConfig's promise_window is 0 unless set
  const auto answer = api.send("POST", "/v1/jobs", api.alice, Api::pages_json(3));
  CHECK(answer.status == 202);
  CHECK_FALSE(answer.promise_hold.has_value());
  CHECK(Api::body(answer).at("promised_eta_at").is_string());
}

TEST_CASE("A document read while the service stops is unavailable, to be sent again") {
  // As a reader stopped midway (pdf_reader_test): not the PDF's fault, and not a bug. It
  // was 500 internal here, before a reader was even started.
  fairlane::ReaderProcesses processes;
  processes.stop();
  const std::string pdf = fairlane::write_pdf({"First page."});
  const auto document = fairlane::service::read_document(
      "application/pdf", pdf, fairlane::service::DocumentReading{}, &processes);
  REQUIRE_FALSE(document.ok());
  CHECK(document.status().code() == fairlane::StatusCode::unavailable);
}
