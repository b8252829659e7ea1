#include "service/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "service/dispatcher.hpp"
#include "service/promises.hpp"
#include "service/retention.hpp"

namespace fairlane::service {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  // The first bucket whose bound is >= value (Prometheus buckets are "le").
  const auto at = std::lower_bound(bounds_.begin(), bounds_.end(), value);
  ++counts_[static_cast<std::size_t>(std::distance(bounds_.begin(), at))];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, std::string_view name, std::string_view help) const {
  auto it = std::back_inserter(out);
  fmt::format_to(it, "# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  std::int64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    fmt::format_to(it, "{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  fmt::format_to(it, "{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name,
                 sum_, name, count_);
}

namespace {

struct Writer {
  std::string& out;

  void header(std::string_view name, std::string_view type, std::string_view help) {
    fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  template <typename Value>
  void sample(std::string_view name, Value value, std::string_view labels = {}) {
    if (labels.empty()) {
      fmt::format_to(std::back_inserter(out), "{} {}\n", name, value);
    } else {
      fmt::format_to(std::back_inserter(out), "{}{{{}}} {}\n", name, labels, value);
    }
  }
  template <typename Value>
  void one(std::string_view name, std::string_view type, std::string_view help, Value value) {
    header(name, type, help);
    sample(name, value);
  }
};

}  // namespace

std::string render_metrics(const Dispatcher& dispatcher, const RefusalCounts& door_refusals,
                           const Promises& promises, bool leading, const Retention* retention,
                           UploadGauges uploads) {
  std::string out;
  Writer w{out};
  const DispatcherCounters& c = dispatcher.counters();

  w.one("fairlane_leader", "gauge",
        "1 while this instance is the one that dispatches (the cluster's leader).",
        leading ? 1 : 0);
  w.one("fairlane_pages_queued", "gauge", "Pages waiting in the lanes.",
        dispatcher.scheduler().size());
  w.one("fairlane_pages_held", "gauge", "Pages held back until their retry backoff ends.",
        dispatcher.held());
  w.one("fairlane_pages_in_flight", "gauge", "Calls to the provider not yet answered.",
        dispatcher.in_flight());
  w.one("fairlane_inherited_in_flight", "gauge",
        "Places under the in-flight cap held for calls a previous process left at the provider.",
        dispatcher.inherited_in_flight());
  w.one("fairlane_lanes", "gauge", "Users with pages queued.", dispatcher.scheduler().lane_count());
  w.one(
      "fairlane_dispatch_paused", "gauge",
      "1 while a provider 429 or 503, an unreachable provider, or one that refuses fairlane's key, "
      "pauses dispatch.",
      dispatcher.paused_until().has_value() ? 1 : 0);
  w.one("fairlane_store_ok", "gauge", "0 while results cannot be committed to the store.",
        dispatcher.store_error().ok() ? 1 : 0);

  w.header("fairlane_bucket_level", "gauge",
           "What the requests and tokens buckets hold now (absent when unlimited).");
  const Budget& budget = dispatcher.budget();
  if (!budget.requests().unlimited())
    w.sample("fairlane_bucket_level", budget.requests().level(), "bucket=\"requests\"");
  if (!budget.tokens().unlimited())
    w.sample("fairlane_bucket_level", budget.tokens().level(), "bucket=\"tokens\"");

  w.one("fairlane_pages_dispatched_total", "counter", "Calls made to the provider.", c.dispatched);
  w.one("fairlane_pages_done_total", "counter", "Pages done with a result.", c.done);
  w.one("fairlane_pages_failed_total", "counter", "Pages failed for good, with a reason.",
        c.failed);
  w.one("fairlane_pages_requeued_total", "counter",
        "Pages put back, no attempt spent: after a provider 429 or 503, with the provider "
        "unreachable, or with the store unable to give a page's text.",
        c.requeued);
  w.one("fairlane_pages_retried_total", "counter", "Failed attempts that will be retried.",
        c.retried);

  w.header("fairlane_provider_throttled_total", "counter",
           "Provider answers that refused a call for its limits, by status.");
  w.sample("fairlane_provider_throttled_total", c.provider_429, "status=\"429\"");
  w.sample("fairlane_provider_throttled_total", c.provider_503, "status=\"503\"");

  w.one("fairlane_provider_unreachable_pauses_total", "counter",
        "Times all dispatch paused because the provider could not be reached, or refused "
        "fairlane itself (401, 402, 407: its key, its account, a proxy's login).",
        c.outage_pauses);
  w.one("fairlane_pages_out_of_turn_total", "counter",
        "Pages sent in the turns of work newer than a promise at risk, to keep it (0 with "
        "--order fair).",
        dispatcher.out_of_turn());
  w.one("fairlane_store_refused_changes_total", "counter",
        "Page changes the store refused for what they held: each failed its page instead, or "
        "was dropped.",
        c.store_refused);

  w.header("fairlane_call_outcomes_total", "counter", "Provider calls by outcome.");
  for (const auto& [outcome, count] : c.outcomes) {
    w.sample("fairlane_call_outcomes_total", count, fmt::format("outcome=\"{}\"", outcome));
  }

  w.header("fairlane_door_refusals_total", "counter", "Uploads the door refused, by reason.");
  for (const std::string_view reason :
       {"busy", "user_queue_full", "request_too_large", "job_too_large"}) {
    const auto it = door_refusals.find(reason);
    w.sample("fairlane_door_refusals_total", it == door_refusals.end() ? 0 : it->second,
             fmt::format("reason=\"{}\"", reason));
  }

  c.queue_wait_seconds.render(
      out, "fairlane_queue_wait_seconds",
      "Seconds from a page joining its lane (upload or restart) to its first call.");
  c.call_latency_seconds.render(out, "fairlane_call_latency_seconds",
                                "Seconds from a call's dispatch to the provider's answer.");
  promises.ratio().render(out, "fairlane_eta_actual_over_promised",
                          "A finished job's time from upload to finish over the time the door "
                          "promised.");
  promises.lateness().render(out, "fairlane_eta_lateness_seconds",
                             "Seconds a finished job ended after the finish the door promised "
                             "(negative: early).");
  w.one("fairlane_eta_revisions_pending", "gauge",
        "Jobs running whose promise is watched for revision.", promises.watched());
  w.one("fairlane_uploads_on_their_way", "gauge",
        "Uploads admitted by their headers whose body or pages are not read yet.",
        uploads.on_their_way);
  w.one("fairlane_documents_reading", "gauge",
        "PDF uploads holding a reading slot: being read, or waiting for a worker.",
        uploads.documents_reading);
  w.one("fairlane_upload_bytes_on_their_way", "gauge",
        "Bytes of those uploads' bodies, as announced (a chunked one: --max-body-mb).",
        uploads.bytes);
  w.one("fairlane_pruned_jobs_total", "counter",
        "Finished jobs this process pruned under --retain, with their pages.",
        retention != nullptr ? retention->pruned_jobs() : 0);
  w.one("fairlane_pruned_pages_total", "counter",
        "Pages of the jobs this process pruned under --retain.",
        retention != nullptr ? retention->pruned_pages() : 0);
  return out;
}

}  // namespace fairlane::service
