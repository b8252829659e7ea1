#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "fairlane/core/lane_lengths.hpp"

using fairlane::LaneLengths;

TEST_CASE("sum_min adds whole short lanes and the threshold for long ones") {
  LaneLengths lengths;
  lengths.update(1, 0, 3);
  lengths.update(1, 0, 10);
  lengths.update(1, 0, 20);
  lengths.update(2, 0, 7);
  // min(3, 5) + min(10, 5) + min(20, 5) = 13
  CHECK(lengths.sum_min(1, 5.0) == 13.0);
  // min(3, 2.5) + 2.5 + 2.5 = 7.5
  CHECK(lengths.sum_min(1, 2.5) == 7.5);
  CHECK(lengths.sum_min(1, 1'000.0) == 33.0);
  CHECK(lengths.sum_min(2, 4.0) == 4.0);
  CHECK(lengths.sum_min(3, 4.0) == 0.0);
  CHECK(lengths.weights() == std::vector<std::int64_t>{1, 2});

  lengths.update(2, 7, 0);
  CHECK(lengths.weights() == std::vector<std::int64_t>{1});
  lengths.update(1, 20, 200);  // past the first size of the tree
  CHECK(lengths.sum_min(1, 100.0) == 113.0);
}

TEST_CASE("sum_min agrees with a plain sum over random lanes") {
  std::mt19937_64 rng(42);
  LaneLengths lengths;
  std::vector<std::pair<std::int64_t, std::int64_t>> lanes;  // weight, length
  for (int step = 0; step < 5'000; ++step) {
    if (lanes.empty() || rng() % 3 == 0) {
      const auto weight = static_cast<std::int64_t>(1 + rng() % 3);
      const auto length = static_cast<std::int64_t>(1 + rng() % 300);
      lanes.emplace_back(weight, length);
      lengths.update(weight, 0, length);
    } else {
      auto& lane = lanes[rng() % lanes.size()];
      const auto after = static_cast<std::int64_t>(rng() % 400);
      lengths.update(lane.first, lane.second, after);
      lane.second = after;
      if (after == 0) {
        lane = lanes.back();
        lanes.pop_back();
      }
    }
    const auto weight = static_cast<std::int64_t>(1 + rng() % 3);
    const double threshold = static_cast<double>(rng() % 4'000) / 10.0;
    double expected = 0.0;
    for (const auto& [w, q] : lanes) {
      if (w == weight) expected += std::min(static_cast<double>(q), threshold);
    }
    REQUIRE(lengths.sum_min(weight, threshold) == doctest::Approx(expected));
  }
}
