// `fairlane prune`: deletes the jobs that finished longer ago than --older-than from a
// database (Store::prune), a batch at a time, or with --dry-run counts them. It may run while
// serve does (docs/operations.md, "Retention").
#pragma once

#include <chrono>
#include <iosfwd>
#include <string>

namespace fairlane {
class Store;
}

namespace fairlane::cli {

struct PruneOptions {
  std::string db = "fairlane.db";
  double older_than_s = 0.0;  // at least kMinRetention
  bool dry_run = false;
  std::int64_t batch_pages = 1'000;
  // Between batches: a serve on the same SQLite file gets its turn to write.
  std::chrono::milliseconds pause{20};
};

// The shortest retention serve --retain and prune take: a job's spend counts for an hour
// (the budgets' and the estimator's warm start), and its owner needs time to fetch it.
inline constexpr std::chrono::hours kMinRetention{1};
// The longest: a hundred years, far from where a time point's arithmetic overflows.
inline constexpr std::chrono::hours kMaxRetention{24 * 36'500};

// Prunes `store` as `options` say; what it did goes to `out`, what failed to `err`.
// Returns the exit status.
int prune(Store& store, const PruneOptions& options, std::ostream& out, std::ostream& err);

}  // namespace fairlane::cli
