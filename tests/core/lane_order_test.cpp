#include <doctest/doctest.h>

#include <cstdint>
#include <iterator>
#include <map>
#include <random>
#include <utility>

#include "fairlane/core/lane_order.hpp"

using fairlane::LaneOrder;

TEST_CASE("LaneOrder sums the tokens of the jobs filed after a page") {
  LaneOrder order;
  order.insert(10, 1, 100);
  order.insert(30, 3, 300);
  order.insert(20, 2, 200);
  CHECK(order.size() == 3);
  CHECK(order.tokens() == 600);
  CHECK(order.tokens_after(0) == 600);
  CHECK(order.tokens_after(10) == 500);
  CHECK(order.tokens_after(15) == 500);
  CHECK(order.tokens_after(20) == 300);
  CHECK(order.tokens_after(30) == 0);

  CHECK(order.add_tokens(20, 2, -50));
  CHECK(order.tokens_after(10) == 450);
  CHECK_FALSE(order.add_tokens(20, 3, 1));  // filed under another page
  CHECK(order.erase(10, 1));
  CHECK_FALSE(order.erase(10, 1));
  CHECK(order.size() == 2);
  CHECK(order.tokens_after(0) == 450);
  order.insert(5, 1, 7);  // the node erased is reused
  CHECK(order.tokens_after(0) == 457);
  CHECK(order.tokens_after(5) == 450);
}

TEST_CASE("Property: LaneOrder agrees with a sorted map under random inserts, erases and changes") {
  std::mt19937_64 rng(11);
  for (int run = 0; run < 20; ++run) {
    LaneOrder order;
    std::map<std::pair<fairlane::PageId, fairlane::JobId>, std::int64_t> model;
    for (int step = 0; step < 2'000; ++step) {
      const auto op = rng() % 4;
      if (op < 2 || model.empty()) {
        const auto page = static_cast<fairlane::PageId>(rng() % 500);
        const auto job = static_cast<fairlane::JobId>(rng() % 4);
        const auto tokens = static_cast<std::int64_t>(rng() % 1'000);
        if (model.emplace(std::pair{page, job}, tokens).second) order.insert(page, job, tokens);
      } else {
        auto it = std::next(model.begin(), static_cast<std::ptrdiff_t>(rng() % model.size()));
        if (op == 2) {
          REQUIRE(order.erase(it->first.first, it->first.second));
          model.erase(it);
        } else {
          const auto delta = static_cast<std::int64_t>(rng() % 200) - 100;
          REQUIRE(order.add_tokens(it->first.first, it->first.second, delta));
          it->second += delta;
        }
      }
      const auto page = static_cast<fairlane::PageId>(rng() % 520) - 10;
      std::int64_t after = 0, total = 0;
      for (const auto& [key, tokens] : model) {
        total += tokens;
        if (key.first > page) after += tokens;
      }
      INFO("run ", run, " step ", step, " page ", page);
      REQUIRE(order.size() == static_cast<std::int64_t>(model.size()));
      CHECK(order.tokens() == total);
      CHECK(order.tokens_after(page) == after);
    }
  }
}
