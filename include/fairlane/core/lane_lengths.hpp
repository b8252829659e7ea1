// LaneLengths: the lengths of all lanes, grouped by weight, indexed so that
// sum over lanes v of min(q_v, t) is answered in O(log max length) per weight class. The
// estimator's "pages ahead" sums come from here instead of a walk over the lanes.
//
// Thread safety: none, by design; it lives with the FairScheduler on one thread.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace fairlane {

class LaneLengths {
 public:
  // A lane of `weight` changed length from `before` to `after` (0 = no lane).
  void update(std::int64_t weight, std::int64_t before, std::int64_t after);
  // The same for an index of values filed under coarser keys (a lane's tokens under
  // ceil(tokens / unit)): the lane leaves key `before` with value `before_value` and joins
  // `after` with `after_value` (key 0 = no lane). sum_min then sums the exact values of the
  // lanes whose key is at most the threshold's floor, and counts the threshold for the rest:
  // a lane within one key below the threshold counts the threshold, above its value.
  void update(std::int64_t weight, std::int64_t before, std::int64_t before_value,
              std::int64_t after, std::int64_t after_value);

  // Sum over the lanes of `weight` of min(length, threshold); threshold may be fractional.
  // With values filed under keys of `unit` (the second update), the threshold is a value:
  // lanes under keys up to floor(threshold / unit) count their values, the rest the threshold.
  [[nodiscard]] double sum_min(std::int64_t weight, double threshold, std::int64_t unit = 1) const;

  // Distinct weights with at least one lane, for callers that sum over every class.
  [[nodiscard]] std::vector<std::int64_t> weights() const;

 private:
  // A Fenwick tree over lane lengths (keys) 1..size: how many lanes have each, and the sum
  // of their values (the lengths themselves, for lengths), each as prefix sums in O(log size).
  class Fenwick {
   public:
    void add(std::int64_t length, std::int64_t lanes, std::int64_t value);
    [[nodiscard]] std::int64_t count_up_to(std::int64_t length) const;
    [[nodiscard]] std::int64_t sum_up_to(std::int64_t length) const;
    [[nodiscard]] std::int64_t lanes() const { return lanes_; }
    [[nodiscard]] std::int64_t size() const { return static_cast<std::int64_t>(count_.size()) - 1; }

   private:
    void grow(std::int64_t length);

    std::vector<std::int64_t> count_{0};  // 1-based Fenwick arrays
    std::vector<std::int64_t> sum_{0};
    std::vector<std::int64_t> lanes_at_;   // plain lane count per length, to rebuild on growth
    std::vector<std::int64_t> values_at_;  // and the lanes' values there
    std::int64_t lanes_ = 0;
  };

  std::map<std::int64_t, Fenwick> by_weight_;
};

}  // namespace fairlane
