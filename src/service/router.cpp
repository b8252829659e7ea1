#include "service/router.hpp"

#include <fmt/format.h>
#include <openssl/crypto.h>

#include <algorithm>
#include <boost/json.hpp>
#include <boost/url/parse.hpp>
#include <cctype>
#include <charconv>
#include <map>
#include <stdexcept>

#include "fairlane/document.hpp"
#include "service/api_json.hpp"

namespace fairlane::service {
namespace {

namespace json = boost::json;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

ApiResponse json_response(int status, const json::object& body) {
  ApiResponse r;
  r.status = status;
  r.body = json::serialize(body);
  return r;
}

ApiResponse from(const ApiAnswer& answer) {
  ApiResponse r = json_response(answer.status, answer.body);
  if (answer.retry_after_s)
    r.headers.emplace_back("Retry-After", std::to_string(*answer.retry_after_s));
  return r;
}

ApiResponse error(int status, std::string_view type, std::string_view message) {
  return json_response(status, error_json(type, message));
}

// The 401 for a request without a key the service knows. RFC 7235 wants the scheme in
// WWW-Authenticate: Bearer for the API, Basic for the /ui page, so that a browser asks.
ApiResponse unauthorized(bool ui, std::string_view message) {
  ApiResponse r = error(401, "unauthorized", message);
  r.headers.emplace_back("WWW-Authenticate", ui ? R"(Basic realm="fairlane", charset="UTF-8")"
                                                : R"(Bearer realm="fairlane")");
  return r;
}

// Standard base64 (RFC 4648, padding optional); nullopt when it is not.
std::optional<std::string> base64_decode(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  std::string out;
  out.reserve(text.size() * 3 / 4);
  std::uint32_t bits = 0;
  int count = 0;
  for (const char c : text) {
    int v = -1;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    if (c >= '0' && c <= '9') v = c - '0' + 52;
    if (c == '+') v = 62;
    if (c == '/') v = 63;
    if (v < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<std::uint32_t>(v);
    if (++count == 4) {
      out.push_back(static_cast<char>((bits >> 16) & 0xff));
      out.push_back(static_cast<char>((bits >> 8) & 0xff));
      out.push_back(static_cast<char>(bits & 0xff));
      bits = 0;
      count = 0;
    }
  }
  if (count == 1) return std::nullopt;
  if (count == 2) out.push_back(static_cast<char>((bits >> 4) & 0xff));
  if (count == 3) {
    out.push_back(static_cast<char>((bits >> 10) & 0xff));
    out.push_back(static_cast<char>((bits >> 2) & 0xff));
  }
  return out;
}

// The key in an Authorization header: "Bearer KEY", or with `basic`, "Basic" credentials
// whose password is the key (any user name). The scheme's name is case-insensitive.
std::optional<std::string> key_in(std::string_view authorization, bool basic) {
  const auto space = authorization.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view scheme = authorization.substr(0, space);
  std::string_view credentials = authorization.substr(space + 1);
  while (!credentials.empty() && credentials.front() == ' ') credentials.remove_prefix(1);
  while (!credentials.empty() && credentials.back() == ' ') credentials.remove_suffix(1);
  if (credentials.empty()) return std::nullopt;
  if (iequals(scheme, "Bearer")) return std::string(credentials);
  if (!basic || !iequals(scheme, "Basic")) return std::nullopt;
  auto decoded = base64_decode(credentials);
  if (!decoded) return std::nullopt;
  const auto colon = decoded->find(':');
  if (colon == std::string::npos || colon + 1 == decoded->size()) return std::nullopt;
  return decoded->substr(colon + 1);
}

// "multipart/form-data" of "Multipart/Form-Data; boundary=x": lower case, no parameters.
std::string media_type(std::string_view content_type) {
  std::string media(content_type.substr(0, content_type.find(';')));
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.pop_back();
  std::transform(media.begin(), media.end(), media.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return media;
}

std::optional<std::int64_t> number(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || err != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<std::string> ApiRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (iequals(key, name)) return value;
  }
  return std::nullopt;
}

Router::Router(Store& store, Dispatcher& dispatcher, RouterConfig config)
    : store_(store), dispatcher_(dispatcher), config_(std::move(config)) {
  if (!config_.admin_key.empty()) {
    admin_digest_ = store::sha256(config_.admin_key);
    if (!admin_digest_) throw std::runtime_error("SHA-256 of the admin key failed");
  }
  dispatcher_.on_job_changed([this](JobId) { watchers_.notify(); });
}

bool Router::is_admin_key(std::string_view key) const {
  if (!admin_digest_) return false;
  const auto digest = store::sha256(key);
  return digest && CRYPTO_memcmp(digest->data(), admin_digest_->data(), digest->size()) == 0;
}

std::variant<Caller, ApiResponse> Router::authenticate(const ApiRequest& request, bool ui) {
  const auto authorization = request.header("Authorization");
  const auto key = authorization ? key_in(*authorization, ui) : std::nullopt;
  if (!key) {
    return unauthorized(ui, ui ? "this page needs an API key: give it as the password (any "
                                 "user name)"
                               : "this needs an API key: send it as 'Authorization: Bearer <key>'");
  }
  if (is_admin_key(*key)) return Caller{true, {}};
  // Found by its SHA-256 through an index: see docs/reliability.md, "Security", for why
  // the lookup's timing tells nothing useful about any key.
  auto user = store_.find_user_by_key(*key);
  if (user.ok()) return Caller{false, std::move(user).value()};
  if (user.status().code() == StatusCode::not_found) {
    return unauthorized(ui, "this API key is not known: check it, or ask for one");
  }
  return from(answer_for(user.status()));
}

Router::~Router() {
  dispatcher_.on_job_changed({});
}

std::optional<JobEvent> Router::job_event(const EventStream& stream) {
  auto job = store_.job(stream.job);
  if (!job.ok() || job->user_id != stream.user) return std::nullopt;
  return JobEvent{json::serialize(job_object(job.value())), is_terminal(job->state)};
}

std::int64_t Router::estimate_tokens(std::string_view page_text, std::int64_t max_tokens) const {
  const auto bytes = static_cast<std::int64_t>(config_.prompt.size() + page_text.size());
  return (bytes + 3) / 4 + max_tokens;
}

ApiResponse Router::queue(bool with_lanes) {
  const Budget& budget = dispatcher_.budget();
  const auto level = [](const TokenBucket& bucket) -> json::value {
    if (bucket.unlimited()) return nullptr;
    return bucket.level();
  };
  json::object body{{"lanes", dispatcher_.scheduler().lane_count()},
                    {"queued", dispatcher_.scheduler().size()},
                    {"held", dispatcher_.held()},
                    {"in_flight", dispatcher_.in_flight()},
                    {"mu", dispatcher_.estimator().mu()},
                    {"binding", to_string(dispatcher_.estimator().binding())},
                    {"buckets", json::object{{"requests", level(budget.requests())},
                                             {"tokens", level(budget.tokens())}}},
                    {"paused", dispatcher_.paused_until().has_value()}};
  if (with_lanes) {
    // Every user with pages queued or in flight; the users table is small, and the pages in
    // flight are at most the cap on calls.
    auto users = store_.users();
    if (!users.ok()) return from(answer_for(users.status()));
    auto in_flight = store_.in_flight_by_user();
    if (!in_flight.ok()) return from(answer_for(in_flight.status()));
    const std::map<UserId, std::int64_t> flying(in_flight->begin(), in_flight->end());
    const FairScheduler& scheduler = dispatcher_.scheduler();
    json::array lanes;
    for (const User& user : users.value()) {
      const std::int64_t queued = scheduler.lane_length(user.id);
      const auto it = flying.find(user.id);
      const std::int64_t calls = it == flying.end() ? 0 : it->second;
      if (queued == 0 && calls == 0) continue;
      lanes.push_back(json::object{{"user", user.name},
                                   {"weight", user.weight},
                                   {"queued", queued},
                                   {"queued_tokens", scheduler.lane_tokens(user.id)},
                                   {"in_flight", calls}});
    }
    body["users"] = std::move(lanes);
  }
  return json_response(200, body);
}

json::object Router::job_object(const JobView& job) const {
  return job_json(job, dispatcher_.estimator().job(job.user_id, job.id),
                  dispatcher_.estimator().avg_latency_s());
}

ApiResponse Router::accepted(const JobView& job) {
  ApiResponse response = json_response(202, job_object(job));
  response.headers.emplace_back("Location", "/v1/jobs/" + job.public_id);
  return response;
}

std::optional<ApiResponse> Router::uploaded_before(const Upload& upload) {
  if (!upload.idempotency_key) return std::nullopt;
  // A retried upload gets the first job back, whatever the door would say now.
  auto earlier = store_.job_by_idempotency_key(upload.user, *upload.idempotency_key);
  if (earlier.ok()) return accepted(earlier.value());
  if (earlier.status().code() != StatusCode::not_found) return from(answer_for(earlier.status()));
  return std::nullopt;
}

Result<Document> read_document(std::string_view content_type, std::string body,
                               const DocumentReading& reading, ReaderProcesses* processes) {
  if (processes != nullptr && processes->stopping()) {
    return Status(StatusCode::internal, "the service is stopping");
  }
  Document document;
  if (media_type(content_type) == "multipart/form-data") {
    auto file = multipart_file(content_type, std::move(body));
    if (!file.ok()) return file.status();
    document.filename = std::move(file->filename);
    body = std::move(file->data);
  }
  auto pages = reading.reader.command.empty() ? split_pdf(body, reading.max_pages)
                                              : read_pdf_in_child(body, reading.reader, processes);
  if (!pages.ok()) return pages.status();
  document.pages = std::move(pages).value();
  return document;
}

ApiResponse Router::finish_upload(const Upload& upload, Result<Document> document) {
  // The same upload may have been retried and committed while this one was being read.
  if (auto earlier = uploaded_before(upload)) return std::move(*earlier);
  if (!document.ok()) {
    if (document.status().code() == StatusCode::invalid_argument) {
      return error(400, "invalid_document", document.status().message());
    }
    return from(answer_for(document.status()));
  }
  Upload named = upload;
  if (!named.name_given && !document->filename.empty()) named.name = document->filename;
  return enqueue(named, std::move(document->pages));
}

ApiResponse Router::enqueue(const Upload& upload, std::vector<std::string> texts) {
  if (texts.empty()) return error(400, "invalid_document", "the upload has no pages");
  if (static_cast<std::int64_t>(texts.size()) > config_.max_pages) {
    return error(413, "payload_too_large",
                 fmt::format("the upload has {} pages; at most {} are taken at once "
                             "(--max-pages): split it",
                             texts.size(), config_.max_pages));
  }
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const auto bytes = static_cast<std::int64_t>(texts[i].size());
    if (bytes <= config_.max_page_bytes) continue;
    json::object refusal = error_json(
        "payload_too_large",
        fmt::format("page {} has {} bytes of text; a page may have at most {} (--max-page-kb): "
                    "split the page",
                    i + 1, bytes, config_.max_page_bytes));
    refusal["error"].as_object()["page"] = i + 1;
    refusal["error"].as_object()["bytes"] = bytes;
    refusal["error"].as_object()["max_page_bytes"] = config_.max_page_bytes;
    return json_response(413, refusal);
  }
  JobRequest job{upload.user, upload.name, {}, upload.max_tokens, upload.idempotency_key};
  std::vector<std::int64_t> tokens;
  tokens.reserve(texts.size());
  job.pages.reserve(texts.size());
  for (std::string& text : texts) {
    tokens.push_back(estimate_tokens(text, upload.max_tokens));
    job.pages.push_back(PageInput{std::move(text), tokens.back()});
  }
  const DoorDecision decision = dispatcher_.door().admit(upload.user, tokens);
  if (auto refusal = answer_for(decision)) {
    ++door_refusals_[std::string(refusal_reason(decision))];
    return from(*refusal);
  }
  auto enqueued = store_.enqueue_job(job);
  if (!enqueued.ok()) return from(answer_for(enqueued.status()));
  if (enqueued->created) {
    dispatcher_.add(enqueued.value(), upload.weight);
    watchers_.notify();  // the positions and ETAs of the jobs behind it move
  }
  return accepted(enqueued->job);
}

ApiResponse Router::handle(ApiRequest request) {
  const auto url = boost::urls::parse_origin_form(request.target);
  if (!url) return error(400, "invalid_request", "the request's target is not a valid path");
  const std::string path = url->path();
  const auto param = [&](std::string_view name) -> std::optional<std::string> {
    const auto it = url->params().find(name);
    if (it == url->params().end()) return std::nullopt;
    return std::string((*it).value);
  };

  // Open: the probes of an orchestrator, which carry no key.
  if (path == "/healthz") return json_response(200, json::object{{"status", "ok"}});
  if (path == "/readyz") {
    // Not ready while results cannot be committed, or while writes fail for want of a
    // disk. A store whose writes failed is tried again (one page) on every ask, so the
    // answer turns ready when space returns, without a restart.
    if (const Status& results = dispatcher_.store_error(); !results.ok()) {
      return error(503, "not_ready", results.message());
    }
    Status writes = store_.write_health();
    if (!writes.ok()) writes = store_.probe_write();
    if (!writes.ok()) return error(503, "not_ready", writes.message());
    return json_response(200, json::object{{"status", "ready"}});
  }

  // Everything else needs a key: a user's, or the admin's.
  const bool ui = (path == "/ui" || path == "/ui/") && request.method == "GET";
  auto authenticated = authenticate(request, ui);
  if (auto* refused = std::get_if<ApiResponse>(&authenticated)) return std::move(*refused);
  const Caller caller = std::get<Caller>(std::move(authenticated));

  if (ui) {
    // A static page; its script sends the key typed into it (or given after # in the
    // address) as a Bearer header on every call it makes.
    ApiResponse page;
    page.content_type = "text/html; charset=utf-8";
    page.body = std::string(ui_page());
    return page;
  }
  if (path == "/v1/queue" && request.method == "GET") return queue(caller.admin);
  if (path == "/metrics" && request.method == "GET") {
    if (!caller.admin) {
      return error(403, "forbidden",
                   "/metrics needs the admin key (a scraper sends it as 'Authorization: Bearer "
                   "<key>'); this key is a user's");
    }
    ApiResponse response;
    response.content_type = "text/plain; version=0.0.4";
    response.body = render_metrics(dispatcher_, door_refusals_);
    return response;
  }
  if (path == "/v1/users" && request.method == "POST") {
    if (!caller.admin) {
      return error(403, "forbidden", "adding users needs the admin key; this key is a user's");
    }
    boost::system::error_code parse_error;
    const json::value body = json::parse(request.body, parse_error);
    const json::object* fields = parse_error ? nullptr : body.if_object();
    const json::value* name = fields ? fields->if_contains("name") : nullptr;
    if (name == nullptr || !name->is_string()) {
      return error(400, "invalid_request", R"(send {"name": "...", "weight": 1} as JSON)");
    }
    std::int64_t weight = 1;
    if (const json::value* w = fields->if_contains("weight")) {
      if (!w->is_int64()) return error(400, "invalid_request", "weight must be a whole number");
      weight = w->as_int64();
    }
    auto added = store_.add_user(std::string(name->as_string()), weight);
    if (!added.ok()) return from(answer_for(added.status()));
    return json_response(
        201, json::object{
                 {"name", added->user.name}, {"weight", added->user.weight}, {"key", added->key}});
  }
  if (caller.admin) {
    return error(403, "forbidden",
                 "the admin key opens /v1/users, /v1/queue, /metrics and /ui; jobs and "
                 "estimates are a user's: use a user's key");
  }
  const User* user = &caller.user;
  // The door counts the user's weight from the first request, before any lane of theirs.
  dispatcher_.set_weight(user->id, user->weight);

  if (path == "/v1/jobs" && request.method == "POST") {
    const std::string type = request.header("Content-Type").value_or("");
    const std::string media = media_type(type);
    const bool json_pages = media == "application/json";
    if (!json_pages && media != "application/pdf" && media != "multipart/form-data") {
      return error(415, "unsupported_media_type",
                   "send a PDF as application/pdf (the raw file) or multipart/form-data (a "
                   "part named file), or the pages' text as application/json: "
                   "{\"name\": ..., \"pages\": [\"text\", ...]}");
    }
    Upload upload{user->id, user->weight,       json_pages ? "pages.json" : "document.pdf",
                  false,    config_.max_tokens, request.header("Idempotency-Key")};
    if (auto name = param("name"); name && !name->empty()) {
      upload.name = *name;
      upload.name_given = true;
    }
    if (const auto text = param("max_tokens")) {
      const auto n = number(*text);
      if (!n || *n < 1 || *n > kMaxTokensCeiling) return from(bad_max_tokens(config_.max_tokens));
      upload.max_tokens = *n;
    }
    if (upload.idempotency_key && (upload.idempotency_key->empty() ||
                                   upload.idempotency_key->size() > kMaxIdempotencyKeyBytes)) {
      return error(400, "invalid_request",
                   fmt::format("an Idempotency-Key is 1 to {} bytes: send a shorter one, such "
                               "as a UUID",
                               kMaxIdempotencyKeyBytes));
    }
    if (auto earlier = uploaded_before(upload)) return std::move(*earlier);
    if (!json_pages) {
      if (request.body.empty()) {
        return error(400, "invalid_document", "the body is empty: send the PDF's bytes");
      }
      // Refused at once, before any work, if even a one-page upload would be.
      const DoorDecision decision =
          dispatcher_.door().estimate(user->id, 1, estimate_tokens("", upload.max_tokens));
      if (std::holds_alternative<DoorBusy>(decision) ||
          std::holds_alternative<DoorUserQueueFull>(decision)) {
        ++door_refusals_[std::string(refusal_reason(decision))];
        return from(*answer_for(decision));
      }
      ApiResponse read;
      read.document = DocumentUpload{std::move(upload), type, std::move(request.body)};
      return read;
    }
    auto parsed = parse_json_upload(request.body, config_.max_tokens);
    if (auto* refusal = std::get_if<ApiAnswer>(&parsed)) return from(*refusal);
    auto& fields = std::get<JsonUpload>(parsed);
    if (fields.name) upload.name = std::move(*fields.name);
    if (fields.max_tokens) upload.max_tokens = *fields.max_tokens;
    return enqueue(upload, std::move(fields.pages));
  }

  if (path == "/v1/jobs" && request.method == "GET") {
    std::size_t limit = 20;
    if (const auto text = param("limit")) {
      const auto n = number(*text);
      if (!n || *n < 1 || *n > 1'000) return error(400, "invalid_request", "limit is 1 to 1000");
      limit = static_cast<std::size_t>(*n);
    }
    const auto cursor = param("cursor");
    auto list = store_.jobs_of(user->id, limit,
                               cursor ? std::optional<std::string_view>(*cursor) : std::nullopt);
    if (!list.ok()) return from(answer_for(list.status()));
    json::array jobs;
    for (const JobView& job : list->jobs) jobs.push_back(job_object(job));
    json::object body{{"jobs", std::move(jobs)}};
    if (list->next_cursor) {
      body["next_cursor"] = *list->next_cursor;
    } else {
      body["next_cursor"] = nullptr;
    }
    return json_response(200, body);
  }

  constexpr std::string_view kJobs = "/v1/jobs/";
  if (path.rfind(kJobs, 0) == 0) {
    std::string rest = path.substr(kJobs.size());
    std::string tail;
    if (const auto slash = rest.find('/'); slash != std::string::npos) {
      tail = rest.substr(slash + 1);
      rest.resize(slash);
    }
    auto job = store_.job_of(rest, user->id);
    if (!job.ok()) {
      if (job.status().code() == StatusCode::not_found) {
        return error(404, "not_found", fmt::format("you have no job {}", rest));
      }
      return from(answer_for(job.status()));
    }
    if (tail.empty() && request.method == "GET") return json_response(200, job_object(job.value()));
    if (tail.empty() && request.method == "DELETE") {
      // Nothing to cancel once it has ended: no commit, nothing to remember.
      if (is_terminal(job->state)) return json_response(200, job_object(job.value()));
      // Answered once committed (its commit wakes the watchers), with the job as it is now.
      if (Status cancelled = dispatcher_.cancel(user->id, job->id); !cancelled.ok()) {
        return from(answer_for(cancelled));
      }
      auto after = store_.job(job->id);
      if (!after.ok()) return from(answer_for(after.status()));
      return json_response(202, job_object(after.value()));
    }
    if (tail == "events" && request.method == "GET") {
      // EventSource clients reconnect after a stream ends, unless the answer is 204.
      if (is_terminal(job->state)) {
        ApiResponse ended;
        ended.status = 204;
        ended.content_type.clear();
        return ended;
      }
      ApiResponse response;
      response.content_type = "text/event-stream";
      response.events = EventStream{user->id, job->id};
      return response;
    }
    if (tail == "result" && request.method == "GET") {
      auto results = store_.results(job->id);
      if (!results.ok()) return from(answer_for(results.status()));
      json::array pages;
      for (const PageResult& page : results.value()) {
        json::object p{{"page", page.seq + 1}, {"state", to_string(page.state)}};
        if (page.output) p["output"] = *page.output;
        if (page.error) p["error"] = *page.error;
        pages.push_back(std::move(p));
      }
      return json_response(200, json::object{{"id", job->public_id},
                                             {"state", to_string(job->state)},
                                             {"pages", std::move(pages)}});
    }
  }

  if (path == "/v1/estimate" && request.method == "GET") {
    const auto as_number = [](const std::optional<std::string>& text) {
      return text ? number(*text) : std::nullopt;
    };
    const auto pages = as_number(param("pages"));
    if (!pages || *pages < 1) {
      return error(400, "invalid_request", "ask /v1/estimate?pages=N (and &tokens_per_page=T)");
    }
    // Without tokens_per_page, a page of 3,000 bytes (a dense printed page).
    const std::int64_t tokens =
        as_number(param("tokens_per_page"))
            .value_or(estimate_tokens(std::string(3'000, ' '), config_.max_tokens));
    const DoorDecision decision = dispatcher_.door().estimate(user->id, *pages, tokens);
    if (auto refusal = answer_for(decision)) {
      // The estimate succeeded, whatever it says: 200 with the refusal's numbers (a 503
      // would say the service is down, and proxies would retry it).
      json::object body{{"accepted", false}};
      for (const auto& [field, value] : refusal->body.at("error").as_object()) {
        body[field == "type" ? "reason" : field] = value;
      }
      return json_response(200, body);
    }
    const JobEstimate& e = std::get<DoorAccepted>(decision).estimate;
    return json_response(
        200,
        json::object{{"accepted", true}, {"position", e.position}, {"eta_seconds", e.eta_seconds}});
  }

  return error(404, "not_found", fmt::format("there is no {} {}", request.method, path));
}

}  // namespace fairlane::service
