#include "cli/prune.hpp"

#include <fmt/format.h>

#include <ostream>
#include <thread>

#include "cli/commands.hpp"
#include "fairlane/store/store.hpp"

namespace fairlane::cli {

int prune(Store& store, const PruneOptions& options, std::ostream& out, std::ostream& err) {
  const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(options.older_than_s));
  const WallTime cutoff = std::chrono::system_clock::now() - age;
  const std::string when =
      fmt::format("finished more than {:g} h ago", options.older_than_s / 3600);
  if (options.dry_run) {
    auto due = store.prunable(cutoff);
    if (!due.ok()) {
      err << "fairlane: " << due.status().message() << '\n';
      return kExitFailure;
    }
    out << fmt::format("jobs due to be pruned: {}, pages: {}; {}\n", due->jobs, due->pages, when);
    return kExitOk;
  }
  Pruned total;
  for (;;) {
    auto batch = store.prune(cutoff, options.batch_pages);
    if (!batch.ok()) {
      err << fmt::format("fairlane: {} (jobs pruned before it: {})\n", batch.status().message(),
                         total.jobs);
      return kExitFailure;
    }
    total.jobs += batch->jobs;
    total.pages += batch->pages;
    if (!batch->more) break;
    std::this_thread::sleep_for(options.pause);
  }
  out << fmt::format("jobs pruned: {}, pages: {}; {}\n", total.jobs, total.pages, when);
  return kExitOk;
}

}  // namespace fairlane::cli
