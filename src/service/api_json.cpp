#include "service/api_json.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

namespace fairlane::service {
namespace json = boost::json;

std::string iso_time(WallTime t) {
  const auto ms = std::chrono::floor<std::chrono::milliseconds>(t);
  const auto days = std::chrono::floor<std::chrono::days>(ms);
  const std::chrono::year_month_day date{days};
  const std::chrono::hh_mm_ss time{ms - days};
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", static_cast<int>(date.year()),
                     static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                     time.hours().count(), time.minutes().count(), time.seconds().count(),
                     time.subseconds().count());
}

json::object job_json(const JobView& job, std::optional<JobEstimate> estimate,
                      double avg_latency_s) {
  const bool ended = job.state == JobState::done || job.state == JobState::failed ||
                     job.state == JobState::cancelled;
  json::object o;
  o["id"] = job.public_id;
  o["name"] = job.name;
  o["user"] = job.user_name;
  o["state"] = to_string(job.state);
  o["pages"] = json::object{{"total", job.pages.total},         {"queued", job.pages.queued},
                            {"in_flight", job.pages.in_flight}, {"done", job.pages.done},
                            {"failed", job.pages.failed},       {"cancelled", job.pages.cancelled},
                            {"images", job.pages.images},       {"blank", job.pages.blank}};
  if (ended) {
    o["position"] = nullptr;
    o["eta_seconds"] = nullptr;
  } else if (estimate) {
    o["position"] = estimate->position;
    o["eta_seconds"] = std::round(estimate->eta_seconds * 10.0) / 10.0;
  } else {
    // Nothing queued: only calls in flight are left.
    o["position"] = 0;
    o["eta_seconds"] = std::round(avg_latency_s * 10.0) / 10.0;
  }
  o["usage"] = json::object{{"input_tokens", job.usage.input_tokens},
                            {"output_tokens", job.usage.output_tokens},
                            {"cost_usd", std::round(job.cost_usd * 1e6) / 1e6}};
  o["created_at"] = iso_time(job.created_at);
  if (job.finished_at) {
    o["finished_at"] = iso_time(*job.finished_at);
  } else {
    o["finished_at"] = nullptr;
  }
  // What the door promised, and the later finish announced once that could not be kept.
  const auto time_or_null = [](const std::optional<WallTime>& t) -> json::value {
    if (!t) return nullptr;
    return json::value(iso_time(*t));
  };
  o["promised_eta_at"] = time_or_null(job.promised_eta_at);
  o["eta_revised_at"] = time_or_null(job.eta_revised_at);
  if (job.eta_revised_reason) {
    o["eta_revised_reason"] = *job.eta_revised_reason;
  } else {
    o["eta_revised_reason"] = nullptr;
  }
  return o;
}

json::object error_json(std::string_view type, std::string_view message) {
  return json::object{{"error", json::object{{"type", type}, {"message", message}}}};
}

namespace {

// A failure on the service's side, in the caller's terms (empty: the caller's own mistake,
// said as the Status says it).
std::string_view callers_terms(StatusCode code) {
  switch (code) {
    case StatusCode::busy:
      return "the service's job store is busy just now. Retry in a second.";
    case StatusCode::disk_full:
      return "the service has no room left to store work; nothing accepted before is lost. Retry "
             "later: its operator must free space, and the service's log says where.";
    case StatusCode::read_only:
      return "the service may not write to its job store. Retry later: its operator must let "
             "it, and the service's log says what stops it.";
    case StatusCode::io_error:
      return "the service could not reach or write its job store just now; nothing accepted "
             "before is lost. Retry in a few seconds (an upload sent again with the same "
             "Idempotency-Key is not taken twice); if it lasts, tell the service's operator, "
             "whose log says why.";
    case StatusCode::outcome_unknown:
      return "the service lost its job store's connection while storing this request, so "
             "whether it was stored is unknown. Retry it: an upload sent again with the same "
             "Idempotency-Key is answered with the job it made, if it made one, and a "
             "cancellation that was stored is not made twice.";
    case StatusCode::fenced:
      return "this instance stopped leading its cluster while answering and wrote nothing of "
             "this request. Retry: the instance that leads now answers it.";
    case StatusCode::corrupt:
      return "the service's job store reports damaged data. Tell the service's operator, whose "
             "log says where.";
    case StatusCode::version_too_new:
      return "the service's job store was written by a newer fairlane. Tell the service's "
             "operator, whose log says which.";
    case StatusCode::unavailable:
      return "the service could not do this just now, for a reason of its own: nothing in the "
             "request was at fault. Retry in a few seconds (an upload sent again with the same "
             "Idempotency-Key is not taken twice); if it lasts, tell the service's operator, "
             "whose log says why.";
    case StatusCode::internal:
      return "the service failed on its side. Retry later; if it lasts, tell the service's "
             "operator, whose log says why.";
    default:
      return {};
  }
}

}  // namespace

ApiAnswer answer_for(const Status& status) {
  struct Row {
    StatusCode code;
    int http;
  };
  static constexpr Row kTable[] = {
      {StatusCode::invalid_argument, 400},
      {StatusCode::payload_too_large, 413},
      {StatusCode::not_found, 404},
      {StatusCode::already_exists, 409},
      {StatusCode::busy, 503},
      {StatusCode::disk_full, 507},
      {StatusCode::read_only, 503},
      {StatusCode::io_error, 503},
      {StatusCode::outcome_unknown, 503},
      {StatusCode::fenced, 503},
      {StatusCode::unavailable, 503},
      {StatusCode::corrupt, 500},
      {StatusCode::version_too_new, 500},
      {StatusCode::internal, 500},
  };
  const std::string_view told = callers_terms(status.code());
  ApiAnswer answer{500,
                   error_json(to_string(status.code()), told.empty() ? status.message() : told),
                   std::nullopt, told.empty() ? std::string() : status.message()};
  for (const Row& row : kTable) {
    if (row.code == status.code()) answer.status = row.http;
  }
  if (status.code() == StatusCode::busy) answer.retry_after_s = 1;
  // A reader process failing is not over in a second: as long as a full reading queue.
  if (status.code() == StatusCode::unavailable) answer.retry_after_s = 5;
  return answer;
}

std::string_view refusal_reason(const DoorDecision& decision) {
  if (std::holds_alternative<DoorBusy>(decision)) return "busy";
  if (std::holds_alternative<DoorUserQueueFull>(decision)) return "user_queue_full";
  if (std::holds_alternative<DoorRequestTooLarge>(decision)) return "request_too_large";
  if (std::holds_alternative<DoorJobTooLarge>(decision)) return "job_too_large";
  return {};
}

std::optional<ApiAnswer> answer_for(const DoorDecision& decision, Refused of) {
  const bool any_page = of == Refused::any_page;
  if (const auto* busy = std::get_if<DoorBusy>(&decision)) {
    json::object body = error_json(
        refusal_reason(decision),
        fmt::format("the work queued ahead would make {} wait about {:.0f} s (it would "
                    "finish in about {:.0f} s), longer than the {:.0f} s fairlane accepts; {} "
                    "pages are ahead of it. Retry in {} s{}.",
                    any_page ? "even one page" : "this job", busy->estimated_wait_s, busy->eta_s,
                    busy->max_wait_s, busy->position, busy->retry_after_s,
                    any_page ? " at the earliest (a job of more pages may need longer)"
                             : ", or send fewer pages"));
    json::object& error = body["error"].as_object();
    error["position"] = busy->position;
    error["estimated_wait_seconds"] = std::round(busy->estimated_wait_s * 10.0) / 10.0;
    error["max_wait_seconds"] = busy->max_wait_s;
    error["retry_after_seconds"] = busy->retry_after_s;
    error["eta_seconds"] = std::round(busy->eta_s * 10.0) / 10.0;
    return ApiAnswer{503, std::move(body), busy->retry_after_s};
  }
  if (const auto* full = std::get_if<DoorUserQueueFull>(&decision)) {
    json::object body = error_json(
        refusal_reason(decision),
        any_page ? fmt::format("you have {} pages queued, the limit of {} a user: no page more "
                               "is taken. Wait for some to finish, or cancel a job.",
                               full->queued, full->limit)
                 : fmt::format("you have {} pages queued and this job adds {}: the limit is {} a "
                               "user. Wait for some to finish, or cancel a job.",
                               full->queued, full->adding, full->limit));
    json::object& error = body["error"].as_object();
    error["queued"] = full->queued;
    error["limit"] = full->limit;
    return ApiAnswer{429, std::move(body), std::nullopt};
  }
  if (const auto* large = std::get_if<DoorRequestTooLarge>(&decision)) {
    json::object body = error_json(
        refusal_reason(decision),
        fmt::format("page {} needs about {} tokens, more than the provider allows in a minute "
                    "({}): split the page, or lower max_tokens.",
                    large->page, large->tokens, large->ceiling));
    json::object& error = body["error"].as_object();
    error["page"] = large->page;
    error["tokens"] = large->tokens;
    error["ceiling"] = large->ceiling;
    return ApiAnswer{422, std::move(body), std::nullopt};
  }
  if (const auto* job = std::get_if<DoorJobTooLarge>(&decision)) {
    const std::string remedy =
        job->max_pages > 0
            ? fmt::format("split it into {} jobs of at most {} pages.", job->parts, job->max_pages)
            : std::string(
                  "even one page takes longer than that at the provider's pace, so no "
                  "split helps: the service's --max-job-seconds is too low for its "
                  "provider (tell its operator).");
    json::object body = error_json(
        refusal_reason(decision),
        fmt::format("these {} pages alone would take about {:.0f} s at the provider's limits, "
                    "longer than the {:.0f} s a job may take; retrying cannot help: {}",
                    job->pages, job->alone_s, job->max_job_s, remedy));
    json::object& error = body["error"].as_object();
    error["pages"] = job->pages;
    error["alone_seconds"] = std::round(job->alone_s * 10.0) / 10.0;
    error["max_job_seconds"] = job->max_job_s;
    error["max_pages"] = job->max_pages;
    error["parts"] = job->parts;
    return ApiAnswer{422, std::move(body), std::nullopt};
  }
  return std::nullopt;
}

ApiAnswer bad_max_tokens(std::int64_t default_max_tokens) {
  return ApiAnswer{
      400,
      error_json("invalid_request", fmt::format("max_tokens is a whole number of output tokens per "
                                                "page, 1 to {}: leave it out for the service's {}",
                                                kMaxTokensCeiling, default_max_tokens)),
      std::nullopt};
}

}  // namespace fairlane::service
