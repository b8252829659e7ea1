// Metrics: what the service has done, in the Prometheus text format (GET /metrics).
//
// Histogram keeps the per-bucket counts of a fixed set of upper bounds; render_metrics
// writes every counter, gauge and histogram of docs/api.md's metrics table from the
// dispatcher and the door's refusals. All names start with fairlane_.
//
// Thread safety: none; everything lives on the io_context thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace fairlane::service {

class Dispatcher;
class Promises;
class Retention;

class Histogram {
 public:
  // `upper_bounds` ascending (a +Inf bucket is implied).
  explicit Histogram(std::vector<double> upper_bounds);

  void observe(double value);

  // Appends HELP, TYPE, the cumulative _bucket lines, _sum and _count of `name`.
  void render(std::string& out, std::string_view name, std::string_view help) const;

  [[nodiscard]] std::int64_t count() const { return count_; }
  [[nodiscard]] double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<std::int64_t> counts_;  // one per bound, then +Inf; not cumulative
  double sum_ = 0.0;
  std::int64_t count_ = 0;
};

// Door refusals by reason ("busy", "user_queue_full", "request_too_large").
using RefusalCounts = std::map<std::string, std::int64_t, std::less<>>;

// The uploads between their headers and their pages read (the Router's counts).
struct UploadGauges {
  std::size_t on_their_way = 0;       // any upload: its body or its pages not read yet
  std::size_t documents_reading = 0;  // the PDFs among them, each in its reading slot
  std::size_t bytes = 0;              // their bodies' bytes, as announced (--max-receiving-mb)
};

// The whole exposition: text/plain; version=0.0.4.
// `leading`: whether this instance dispatches (fairlane_leader; always on a single node).
// `retention`: serve --retain's pruning (nullptr: none, its counters 0).
[[nodiscard]] std::string render_metrics(const Dispatcher& dispatcher,
                                         const RefusalCounts& door_refusals,
                                         const Promises& promises, bool leading = true,
                                         const Retention* retention = nullptr,
                                         UploadGauges uploads = {});

}  // namespace fairlane::service
