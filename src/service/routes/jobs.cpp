// A user's jobs: the list, one job, its cancel, its live events and its result; and the
// estimate, which asks the door about a job not sent.
#include <fmt/format.h>

#include <boost/json.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "fairlane/core/dispatch_policy.hpp"
#include "fairlane/core/promise_watch.hpp"
#include "fairlane/core/text.hpp"
#include "fairlane/provider/image_tokens.hpp"
#include "service/routes.hpp"
#include "store/checks.hpp"

namespace fairlane::service {
namespace json = boost::json;

ApiResponse with_store(RouteContext& context, std::function<ReadThen(Store&)> read) {
  if (context.config.readers == nullptr) return read(context.store)();
  ApiResponse deferred;
  deferred.read = std::make_shared<const StoreRead>(StoreRead{std::move(read)});
  return deferred;
}

ReadThen at_once(ApiResponse response) {
  return [response = std::move(response)] { return response; };
}

json::object job_object(const RouteContext& context, const JobView& job) {
  const Estimator& estimator = context.dispatcher.estimator();
  std::optional<JobEstimate> estimate = estimator.job(job.user_id, job.id);
  // Its ETA after a pause of all dispatch, and a backoff its pages wait out, as its promise
  // is revised (PromiseWatch): the two say the same.
  using Seconds = std::chrono::duration<double>;
  const DispatchPolicy& policy = context.dispatcher.policy();
  const auto held = policy.held_back(job.id);
  const std::optional<double> finish = seconds_to_finish(
      estimate ? std::optional(estimate->eta_seconds) : std::nullopt,
      Seconds(policy.paused_for()).count(),
      held ? std::optional(Seconds(*held).count()) : std::nullopt, estimator.avg_latency_s());
  if (finish) {
    if (!estimate) estimate.emplace();  // its pages are all out or held: none is ahead of it
    estimate->eta_seconds = *finish;
  }
  return job_json(job, estimate, estimator.avg_latency_s());
}

std::int64_t estimate_tokens(const RouteContext& context, std::string_view page_text,
                             std::int64_t max_tokens) {
  const auto bytes = static_cast<std::int64_t>(context.config.prompt.size() + page_text.size());
  return (bytes + 3) / 4 + max_tokens;
}

std::int64_t estimate_tokens(const RouteContext& context, const DocumentPage& page,
                             std::int64_t max_tokens) {
  switch (page.kind) {
    case PageKind::text:
      return estimate_tokens(context, page.text, max_tokens);
    case PageKind::image:
      return estimate_tokens(context, kImagePageText, max_tokens) +
             image_tokens(context.config.dialect, page.image->width, page.image->height);
    case PageKind::blank:
      return 0;
  }
  return 0;
}

namespace routes {
namespace {

// 404 for a job the caller does not have: never had, another user's, or pruned.
ApiResponse no_job(std::string_view public_id) {
  return error_response(404, "not_found", fmt::format("you have no job {}", public_id));
}

// DELETE /v1/jobs/{id}: answered once the cancel is committed, with the job as it is then.
ApiResponse cancel(RouteContext& context, const User& user, const JobView& job) {
  // Nothing to cancel once it has ended: no commit, nothing to remember.
  if (is_terminal(job.state)) return json_response(200, job_object(context, job));
  // The commit wakes the watchers.
  if (Status cancelled = context.dispatcher.cancel(user.id, job.id); !cancelled.ok()) {
    return response_for(answer_for(cancelled));
  }
  auto after = context.store.job(job.id);
  if (!after.ok()) return response_for(answer_for(after.status()));
  return json_response(202, job_object(context, after.value()));
}

// GET /v1/jobs/{id}/events: a stream for the transport, 204 for a job that has ended.
// `head_only`: a HEAD's, told the stream's headers with no stream, so it takes no slot.
ApiResponse events(RouteContext& context, const User& user, const JobView& job, bool head_only) {
  // EventSource clients reconnect after a stream ends, unless the answer is 204.
  if (is_terminal(job.state)) {
    ApiResponse ended;
    ended.status = 204;
    ended.content_type.clear();
    return ended;
  }
  if (head_only) {
    ApiResponse headers;
    headers.content_type = "text/event-stream";
    return headers;
  }
  auto slot = context.streams.take(user.id);
  if (!slot) {
    return error_response(429, "too_many_streams",
                          fmt::format("you have {} live-event streams open already: close one "
                                      "first",
                                      context.streams.per_user()));
  }
  ApiResponse response;
  response.content_type = "text/event-stream";
  response.events = EventStream{user.id, job.id, std::move(slot)};
  return response;
}

// ?from=P&limit=N of a result, read: P a page number, N the most pages to answer.
struct ResultRange {
  std::int64_t from = 1;
  std::int64_t limit = kResultPagesAtMost;
  std::size_t bytes = 0;  // RouterConfig::result_bytes
};

std::variant<ResultRange, ApiResponse> result_range(const ResultAsked& asked, std::size_t bytes) {
  ResultRange range;
  range.bytes = bytes;
  if (asked.from) {
    const auto from = whole_number(*asked.from);
    if (!from || *from < 1) {
      return error_response(400, "invalid_request",
                            "from is the page number to start at: a whole number, 1 or more");
    }
    range.from = *from;
  }
  if (asked.limit) {
    const auto limit = whole_number(*asked.limit);
    if (!limit || *limit < 1 || *limit > kResultPagesAtMost) {
      return error_response(400, "invalid_request",
                            fmt::format("limit is 1 to {} pages", kResultPagesAtMost));
    }
    range.limit = *limit;
  }
  return range;
}

// GET /v1/jobs/{id}/result: the pages in order, with their output or error, `range.limit` at
// most from page `range.from`, and no further page once `range.bytes` of text are in;
// next_from is the page to ask from next, null after the last. Made where it is read: it
// needs nothing of the io thread's.
ApiResponse result(Store& store, const JobView& job, const ResultRange& range) {
  const std::int64_t from_seq = range.from - 1;
  auto results = store.results_from(job.id, from_seq, range.limit);
  if (!results.ok()) return response_for(answer_for(results.status()));
  // A job has pages: none where it has some means it was pruned (retention) since its view
  // was read. Past its last page there are none to answer.
  if (results->empty() && from_seq < job.pages.total) {
    return no_job(job.public_id);
  }
  json::array pages;
  std::int64_t after = from_seq;  // the 0-based page after the last one answered
  std::size_t text_bytes = 0;
  for (const PageResult& page : results.value()) {
    if (!pages.empty() && text_bytes >= range.bytes) break;
    json::object p{{"page", page.seq + 1}, {"state", to_string(page.state)}};
    if (page.output) p["output"] = *page.output;
    if (page.error) p["error"] = *page.error;
    p["kind"] = to_string(page.kind);
    text_bytes += (page.output ? page.output->size() : 0) + (page.error ? page.error->size() : 0);
    pages.push_back(std::move(p));
    after = page.seq + 1;
  }
  // A job's pages are numbered from 0 to its total, fixed at its upload.
  const json::value next_from =
      after < job.pages.total && !pages.empty() ? json::value(after + 1) : json::value(nullptr);
  return json_response(200, json::object{{"id", job.public_id},
                                         {"state", to_string(job.state)},
                                         {"pages", std::move(pages)},
                                         {"next_from", next_from}});
}

}  // namespace

ApiResponse list_jobs(RouteContext& context, const User& user,
                      const std::optional<std::string>& limit_text,
                      const std::optional<std::string>& cursor) {
  std::size_t limit = 20;
  if (limit_text) {
    const auto n = whole_number(*limit_text);
    if (!n || *n < 1 || *n > 1'000)
      return error_response(400, "invalid_request", "limit is 1 to 1000");
    limit = static_cast<std::size_t>(*n);
  }
  if (cursor) {
    if (!is_storable_text(*cursor)) {
      // As the stores answer a cursor they never gave.
      return response_for(answer_for(store::unknown_cursor(storable_text(*cursor))));
    }
  }
  return with_store(
      context, [&context, user_id = user.id, limit, cursor](Store& store) -> ReadThen {
        auto list = store.jobs_of(user_id, limit,
                                  cursor ? std::optional<std::string_view>(*cursor) : std::nullopt);
        if (!list.ok()) return at_once(response_for(answer_for(list.status())));
        return [&context, list = std::move(list).value()] {
          json::array jobs;
          for (const JobView& job : list.jobs) jobs.push_back(job_object(context, job));
          json::object body{{"jobs", std::move(jobs)}};
          if (list.next_cursor) {
            body["next_cursor"] = *list.next_cursor;
          } else {
            body["next_cursor"] = nullptr;
          }
          return json_response(200, body);
        };
      });
}

std::optional<ApiResponse> job(RouteContext& context, const User& user, std::string_view method,
                               std::string_view public_id, std::string_view tail, bool head_only,
                               const ResultAsked& asked) {
  const bool get = method == "GET";
  const bool known = (tail.empty() && (get || method == "DELETE")) ||
                     (get && (tail == "events" || tail == "result"));
  if (!known) return std::nullopt;
  ResultRange range;
  if (tail == "result") {
    auto read = result_range(asked, context.config.result_bytes);
    if (auto* refused = std::get_if<ApiResponse>(&read)) return std::move(*refused);
    range = std::get<ResultRange>(read);
  }
  // An id fairlane made is text: bytes that are not (%FF, %00 in the path) name no job, and
  // go to no store (PostgreSQL's text refuses them) nor into the answer's JSON as they are.
  if (!is_storable_text(public_id)) {
    return no_job(storable_text(public_id));
  }
  return with_store(
      context,
      [&context, user, method = std::string(method), public_id = std::string(public_id),
       tail = std::string(tail), head_only, range](Store& store) -> ReadThen {
        auto job = store.job_of(public_id, user.id);
        if (!job.ok()) {
          if (job.status().code() == StatusCode::not_found) {
            return at_once(no_job(public_id));
          }
          return at_once(response_for(answer_for(job.status())));
        }
        if (tail == "result") return at_once(result(store, job.value(), range));
        return [&context, user, method, tail, head_only, job = std::move(job).value()] {
          if (tail == "events") return events(context, user, job, head_only);
          if (method == "DELETE") return cancel(context, user, job);
          return json_response(200, job_object(context, job));
        };
      });
}

ApiResponse estimate(RouteContext& context, const User& user,
                     const std::optional<std::string>& pages_text,
                     const std::optional<std::string>& tokens_text) {
  const std::int64_t max_pages = context.config.max_pages;
  const auto pages = pages_text ? whole_number(*pages_text) : std::nullopt;
  if (!pages || *pages < 1 || *pages > max_pages) {
    return error_response(
        400, "invalid_request",
        fmt::format("ask /v1/estimate?pages=N (and &tokens_per_page=T), N from 1 to {}: an "
                    "upload of more pages is refused (--max-pages)",
                    max_pages));
  }
  // Without tokens_per_page, a page of 3,000 bytes (a dense printed page).
  const auto asked = tokens_text ? whole_number(*tokens_text) : std::nullopt;
  if (tokens_text && (!asked || *asked < 1)) {
    return error_response(400, "invalid_request",
                          "tokens_per_page is what one page reserves, input and output "
                          "together: a whole number of 1 or more");
  }
  const std::int64_t tokens =
      asked.value_or(estimate_tokens(context, std::string(3'000, ' '), context.config.max_tokens));
  const DoorDecision decision = context.dispatcher.door().estimate(user.id, *pages, tokens);
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

}  // namespace routes
}  // namespace fairlane::service
