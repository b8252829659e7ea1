#include "fairlane/group_commit.hpp"

#include <utility>

namespace fairlane {

GroupCommit::GroupCommit(Store& store, const Clock& clock, GroupCommitOptions options)
    : store_(store), clock_(clock), options_(options) {}

void GroupCommit::submit(PageTransition transition, Committed committed) {
  if (transitions_.empty()) oldest_ = clock_.now();
  transitions_.push_back(std::move(transition));
  callbacks_.push_back(std::move(committed));
}

bool GroupCommit::due() const {
  if (transitions_.empty()) return false;
  return transitions_.size() >= options_.max_batch || clock_.now() >= oldest_ + options_.max_delay;
}

std::optional<Clock::time_point> GroupCommit::deadline() const {
  if (transitions_.empty()) return std::nullopt;
  return oldest_ + options_.max_delay;
}

Status GroupCommit::flush() {
  if (transitions_.empty()) return {};
  auto changed = store_.apply(transitions_);
  if (!changed.ok()) return changed.status();
  // Take the batch out before running callbacks, which may submit more.
  std::vector<Committed> callbacks = std::exchange(callbacks_, {});
  transitions_.clear();
  for (std::size_t i = 0; i < callbacks.size(); ++i) {
    if (callbacks[i]) callbacks[i](changed.value()[i]);
  }
  return {};
}

}  // namespace fairlane
