#include "service/router.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>
#include <limits>
#include <thread>
#include <unordered_set>

#include "fairlane/core/text.hpp"
#include "service/target.hpp"

namespace fairlane::service {
namespace {

ApiResponse bad_target() {
  return error_response(400, "invalid_request",
                        "the request's target is neither a path (/v1/jobs) nor an http(s) URL "
                        "with a host (http://host/v1/jobs)");
}

// 400 for a query that gives a parameter twice (?pages=1&pages=100000): which one counts
// is each reader's guess, and a proxy's may differ from fairlane's.
std::optional<ApiResponse> repeated_param(const Target& target) {
  std::unordered_set<std::string> seen;
  for (const auto& param : target.url.params()) {
    if (seen.insert(std::string(param.key)).second) continue;
    return error_response(400, "invalid_request",
                          fmt::format("the query gives {} more than once: send each parameter once",
                                      storable_text(param.key)));
  }
  return std::nullopt;
}

bool is_ui(const Target& target, const ApiRequest& request) {
  return (target.path == "/ui" || target.path == "/ui/") && request.method == "GET";
}

constexpr std::string_view kJobs = "/v1/jobs/";

// The methods a resource takes, as bits; a HEAD reaches the router as its GET.
enum MethodBit : unsigned { kGet = 1U, kPost = 2U, kDelete = 4U };

unsigned method_bit(std::string_view method) {
  if (method == "GET") return kGet;
  if (method == "POST") return kPost;
  if (method == "DELETE") return kDelete;
  return 0;
}

// The methods the resource at `path` takes; 0 for a path that is no resource (404). The
// probes answer their own (routes::probe).
unsigned allowed_methods(std::string_view path) {
  if (path == "/v1/users") return kPost;
  if (path == "/v1/jobs") return kGet | kPost;
  if (path == "/v1/queue" || path == "/v1/estimate" || path == "/metrics" || path == "/ui" ||
      path == "/ui/") {
    return kGet;
  }
  if (path.rfind(kJobs, 0) != 0) return 0;
  // /v1/jobs/{id}: GET, DELETE; /v1/jobs/{id}/result and /events: GET (routes::job).
  const std::string_view rest = path.substr(kJobs.size());
  const auto slash = rest.find('/');
  if (rest.empty() || slash == 0) return 0;  // no id: no job, 404
  if (slash == std::string_view::npos) return kGet | kDelete;
  const std::string_view tail = rest.substr(slash + 1);
  return tail == "result" || tail == "events" ? unsigned{kGet} : 0U;
}

// The methods as a 405's Allow header names them.
std::string allow_header(unsigned methods) {
  std::string allow;
  const auto add = [&allow](std::string_view method) {
    if (!allow.empty()) allow += ", ";
    allow += method;
  };
  if ((methods & kGet) != 0) {
    add("GET");
    add("HEAD");
  }
  if ((methods & kPost) != 0) add("POST");
  if ((methods & kDelete) != 0) add("DELETE");
  return allow;
}

// Whether `method` `path` is one of the routes handle() serves (the probes aside).
bool is_route(std::string_view method, std::string_view path) {
  return (allowed_methods(path) & method_bit(method)) != 0;
}

// Only an upload and a new user carry a body.
bool takes_body(std::string_view method, std::string_view path) {
  return method == "POST" && (path == "/v1/jobs" || path == "/v1/users");
}

bool announces_body(const ApiRequest& head) {
  if (head.announced_bytes) return *head.announced_bytes > 0;  // as the parser read it
  const auto length = head.header("Content-Length");
  return head.header("Transfer-Encoding").has_value() || (length && *length != "0");
}

ApiResponse no_such_route(std::string_view method, std::string_view path) {
  // The path as decoded may hold any byte: named storable, the answer stays JSON.
  return error_response(404, "not_found",
                        fmt::format("there is no {} {}", method, storable_text(path)));
}

}  // namespace

Router::Router(Store& store, Dispatcher& dispatcher, RouterConfig config)
    : store_(store),
      dispatcher_(dispatcher),
      config_(std::move(config)),
      auth_(store, config_.admin_key, config_.key_memory,
            config_.clock != nullptr ? config_.clock : &steady_),
      streams_(config_.max_event_streams_per_user),
      reads_(config_.max_pending_documents > 0
                 ? config_.max_pending_documents
                 : 2 * std::max<std::size_t>(1, std::thread::hardware_concurrency()),
             config_.max_pending_documents_per_user),
      receiving_(config_.max_receiving_bytes > 0 ? config_.max_receiving_bytes
                                                 : std::numeric_limits<std::size_t>::max(),
                 std::max(config_.max_receiving_bytes / 2,
                          std::min(config_.max_receiving_bytes, config_.max_body_bytes))),
      on_their_way_(std::numeric_limits<std::size_t>::max()),
      promises_(store_, dispatcher_, config_.wall_clock),
      windows_(config_.clock != nullptr ? *config_.clock : steady_, config_.promise_window),
      context_{store_,         dispatcher_, watchers_, config_,
               door_refusals_, streams_,    promises_, windows_} {
  dispatcher_.on_job_changed([this](JobId) { watchers_.notify(); });
  // Jobs promised before a restart are projected again, and revised when late, as new ones.
  for (const JobView& job : dispatcher_.restored_promises()) promises_.promised(job);
}

Router::~Router() {
  dispatcher_.on_job_changed({});
}

void Router::watch(const JobView& job) {
  if (job.promised_eta_at) promises_.promised(job);
}

void Router::promise_moved(const JobView& job) {
  if (!job.promised_eta_at) return;
  const auto known = promises_.promised_at(job.id);
  // The store keeps a promise to the millisecond; the one this instance's own window made is
  // watched as it was made.
  const auto ms = [](WallTime t) { return std::chrono::floor<std::chrono::milliseconds>(t); };
  if (!known || ms(*known) == ms(*job.promised_eta_at)) return;
  dispatcher_.promise(job);
  promises_.promised(job);
}

void Router::tick() {
  close_promise_windows(context_);
  if (!promises_.check().empty()) watchers_.notify();
}

std::shared_ptr<const void> Router::upload_on_its_way(const ApiRequest& head) {
  const auto target = target_of(head.target);
  if (head.method != "POST" || !target || target->path != "/v1/jobs") return nullptr;
  return on_their_way_.take();
}

ApiResponse Router::close_promise(const PromiseHold& hold) {
  return service::close_promise(context_, hold);
}

std::variant<Caller, ApiResponse> Router::admit(const ApiRequest& head) {
  const auto target = target_of(head.target);
  if (!target) return bad_target();
  if (auto twice = repeated_param(*target)) return std::move(*twice);
  // Open: the probes of an orchestrator, which carry no key.
  if (auto probe = routes::probe(context_, head.method, target->path)) return std::move(*probe);

  // Everything else needs a key: a user's, or the admin's.
  auto authenticated = auth_.authenticate(head, is_ui(*target, head));
  if (auto* refused = std::get_if<ApiResponse>(&authenticated)) return std::move(*refused);
  Caller caller = std::get<Caller>(std::move(authenticated));
  const std::string& path = target->path;
  // A resource asked with a method it does not take, whoever asks and whatever the body.
  if (const unsigned methods = allowed_methods(path);
      methods != 0 && (methods & method_bit(head.method)) == 0) {
    return method_not_allowed(head.method, path, allow_header(methods));
  }
  if (path == "/metrics" && head.method == "GET" && !caller.admin) {
    return error_response(403, "forbidden",
                          "/metrics needs the admin key (a scraper sends it as 'Authorization: "
                          "Bearer <key>'); this key is a user's");
  }
  if (path == "/v1/users" && head.method == "POST" && !caller.admin) {
    return error_response(403, "forbidden",
                          "adding users needs the admin key; this key is a user's");
  }
  const bool anyones = is_ui(*target, head) || (path == "/v1/queue" && head.method == "GET");
  const bool admins = (path == "/metrics" && head.method == "GET") ||
                      (path == "/v1/users" && head.method == "POST");
  if (caller.admin && !anyones && !admins) {
    return error_response(403, "forbidden",
                          "the admin key opens /v1/users, /v1/queue, /metrics and /ui; jobs and "
                          "estimates are a user's: use a user's key");
  }
  // A body where none is taken is answered from the headers, unread (Headers first): a
  // client must not make fairlane read 100 MB to be told there is no such route.
  if (announces_body(head) && !takes_body(head.method, path)) {
    if (!is_route(head.method, path)) return no_such_route(head.method, path);
    return error_response(
        400, "invalid_request",
        fmt::format("{} {} takes no body: send it without one", head.method, storable_text(path)));
  }
  if (!caller.admin) {
    // The door counts the user's weight from the first request, before any lane of theirs.
    dispatcher_.set_weight(caller.user.id, caller.user.weight);
    if (path == "/v1/jobs" && head.method == "POST") {
      if (auto refusal = check_upload_headers(context_, head, caller.user)) {
        return std::move(*refusal);
      }
      if (auto busy = check_reading_slot(reads_, head, caller.user)) return std::move(*busy);
      auto bytes = take_body_bytes(receiving_, head, caller.user, config_.max_body_bytes);
      if (auto* busy = std::get_if<ApiResponse>(&bytes)) return std::move(*busy);
      // One handle for both: they are given back together.
      caller.on_its_way = std::make_shared<
          const std::pair<std::shared_ptr<const void>, std::shared_ptr<const void>>>(
          upload_on_its_way(head), std::get<std::shared_ptr<const void>>(std::move(bytes)));
    }
  }
  return caller;
}

ApiResponse Router::handle(ApiRequest request) {
  auto admitted = admit(request);
  if (auto* answer = std::get_if<ApiResponse>(&admitted)) return std::move(*answer);
  return handle(std::move(request), std::get<Caller>(admitted));
}

ApiResponse Router::handle(ApiRequest request, const Caller& caller) {
  const auto target = target_of(request.target);
  if (!target) return bad_target();
  if (auto probe = routes::probe(context_, request.method, target->path)) {
    return std::move(*probe);
  }
  const std::string& path = target->path;
  const std::string& method = request.method;

  if (is_ui(*target, request)) {
    // A static page; its script sends the key typed into it (or given after # in the
    // address) as a Bearer header on every call it makes.
    ApiResponse page;
    page.content_type = "text/html; charset=utf-8";
    page.body = std::string(ui_page());
    return page;
  }
  if (path == "/v1/queue" && method == "GET") return routes::queue(context_, caller.admin);
  if (caller.admin) {
    if (path == "/metrics" && method == "GET") {
      return routes::metrics(context_, {on_their_way_.taken(), reads_.taken(), receiving_.taken()});
    }
    if (path == "/v1/users" && method == "POST") return routes::add_user(context_, request);
    return error_response(403, "forbidden", "this needs a user's key");
  }
  const User& user = caller.user;
  if (path == "/v1/jobs" && method == "POST") {
    return begin_upload(context_, reads_, std::move(request), user);
  }
  if (path == "/v1/jobs" && method == "GET") {
    return routes::list_jobs(context_, user, target->param("limit"), target->param("cursor"));
  }
  if (path.rfind(kJobs, 0) == 0) {
    std::string_view rest = std::string_view(path).substr(kJobs.size());
    std::string_view tail;
    if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
      tail = rest.substr(slash + 1);
      rest = rest.substr(0, slash);
    }
    const routes::ResultAsked asked{target->param("from"), target->param("limit")};
    if (auto answer = routes::job(context_, user, method, rest, tail, request.head_only, asked)) {
      return std::move(*answer);
    }
  }
  if (path == "/v1/estimate" && method == "GET") {
    return routes::estimate(context_, user, target->param("pages"),
                            target->param("tokens_per_page"));
  }
  return no_such_route(method, path);
}

ApiResponse Router::finish_upload(const Upload& upload, UploadRead read) {
  // The uploads still being read come with this one: its promise waits for them.
  return service::finish_upload(context_, upload, std::move(read), &on_their_way_);
}

std::optional<JobEvent> Router::job_event(const EventStream& stream) {
  return job_event(stream, store_.job(stream.job));
}

std::optional<JobEvent> Router::job_event(const EventStream& stream, const Result<JobView>& job) {
  if (!job.ok() || job->user_id != stream.user) return std::nullopt;
  return JobEvent{boost::json::serialize(job_object(context_, job.value())),
                  is_terminal(job->state)};
}

std::int64_t Router::estimate_tokens(std::string_view page_text, std::int64_t max_tokens) const {
  return service::estimate_tokens(context_, page_text, max_tokens);
}

}  // namespace fairlane::service
