#include "fairlane/core/lane_lengths.hpp"

#include <cmath>

namespace fairlane {

void LaneLengths::update(std::int64_t weight, std::int64_t before, std::int64_t after) {
  update(weight, before, before, after, after);
}

void LaneLengths::update(std::int64_t weight, std::int64_t before, std::int64_t before_value,
                         std::int64_t after, std::int64_t after_value) {
  if (before == after && before_value == after_value) return;
  Fenwick& tree = by_weight_[weight];
  if (before > 0) tree.add(before, -1, -before_value);
  if (after > 0) tree.add(after, +1, after_value);
  if (tree.lanes() == 0) by_weight_.erase(weight);
}

double LaneLengths::sum_min(std::int64_t weight, double threshold, std::int64_t unit) const {
  const auto it = by_weight_.find(weight);
  if (it == by_weight_.end() || threshold <= 0) return 0.0;
  const Fenwick& tree = it->second;
  // Lanes no longer than floor(t) count whole; every longer lane counts t.
  const double floor_t = std::floor(threshold / static_cast<double>(unit));
  const std::int64_t cut = floor_t >= static_cast<double>(tree.size())
                               ? tree.size()
                               : static_cast<std::int64_t>(floor_t);
  const std::int64_t short_lanes = tree.count_up_to(cut);
  return static_cast<double>(tree.sum_up_to(cut)) +
         threshold * static_cast<double>(tree.lanes() - short_lanes);
}

std::vector<std::int64_t> LaneLengths::weights() const {
  std::vector<std::int64_t> result;
  result.reserve(by_weight_.size());
  for (const auto& [weight, tree] : by_weight_) result.push_back(weight);
  return result;
}

void LaneLengths::Fenwick::grow(std::int64_t length) {
  std::int64_t size = std::max<std::int64_t>(64, this->size());
  while (size < length) size *= 2;
  lanes_at_.resize(static_cast<std::size_t>(size) + 1, 0);
  values_at_.resize(static_cast<std::size_t>(size) + 1, 0);
  count_.assign(static_cast<std::size_t>(size) + 1, 0);
  sum_.assign(static_cast<std::size_t>(size) + 1, 0);
  // Rebuild in O(size): each node adds itself to its parent.
  for (std::int64_t i = 1; i <= size; ++i) {
    const auto ui = static_cast<std::size_t>(i);
    count_[ui] += lanes_at_[ui];
    sum_[ui] += values_at_[ui];
    const std::int64_t parent = i + (i & -i);
    if (parent <= size) {
      count_[static_cast<std::size_t>(parent)] += count_[ui];
      sum_[static_cast<std::size_t>(parent)] += sum_[ui];
    }
  }
}

void LaneLengths::Fenwick::add(std::int64_t length, std::int64_t lanes, std::int64_t value) {
  if (length > size()) grow(length);
  lanes_at_[static_cast<std::size_t>(length)] += lanes;
  values_at_[static_cast<std::size_t>(length)] += value;
  lanes_ += lanes;
  for (std::int64_t i = length; i <= size(); i += i & -i) {
    count_[static_cast<std::size_t>(i)] += lanes;
    sum_[static_cast<std::size_t>(i)] += value;
  }
}

std::int64_t LaneLengths::Fenwick::count_up_to(std::int64_t length) const {
  std::int64_t total = 0;
  for (std::int64_t i = length; i > 0; i -= i & -i) total += count_[static_cast<std::size_t>(i)];
  return total;
}

std::int64_t LaneLengths::Fenwick::sum_up_to(std::int64_t length) const {
  std::int64_t total = 0;
  for (std::int64_t i = length; i > 0; i -= i & -i) total += sum_[static_cast<std::size_t>(i)];
  return total;
}

}  // namespace fairlane
