#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

#include "fairlane/core/send_order.hpp"

using namespace std::chrono_literals;
using fairlane::SendOrder;

namespace {

// What a SendOrder passes on: the latencies, in seconds, in the order they came.
struct Learned {
  void operator()(const SendOrder::Settled& call) {
    seconds.push_back(std::chrono::duration_cast<std::chrono::seconds>(call.latency).count());
  }
  std::vector<std::int64_t> seconds;
};

SendOrder::Settled took(std::chrono::seconds latency) {
  return SendOrder::Settled{.used = 100, .reserved = 1'000, .latency = latency};
}

}  // namespace

TEST_CASE("Calls that end out of order are passed on in the order they were sent") {
  SendOrder order;
  Learned learned;
  const std::uint64_t first = order.sent();
  const std::uint64_t second = order.sent();
  const std::uint64_t third = order.sent();
  // The last one sent answers first (1 s): held back by the two before it.
  order.ended(third, took(1s), learned);
  CHECK(learned.seconds.empty());
  CHECK(order.held() == 3);
  // The first (5 s) goes on; the third still waits for the second.
  order.ended(first, took(5s), learned);
  CHECK(learned.seconds == std::vector<std::int64_t>{5});
  order.ended(second, took(3s), learned);
  CHECK(learned.seconds == std::vector<std::int64_t>{5, 3, 1});
  CHECK(order.held() == 0);
}

TEST_CASE("A call that ended without an answer lets the ones after it go, and teaches nothing") {
  SendOrder order;
  Learned learned;
  const std::uint64_t failed = order.sent();
  const std::uint64_t answered = order.sent();
  order.ended(answered, took(2s), learned);
  CHECK(learned.seconds.empty());
  order.ended(failed, std::nullopt, learned);
  CHECK(learned.seconds == std::vector<std::int64_t>{2});
  // Tickets go on from where they were.
  const std::uint64_t next = order.sent();
  CHECK(next == answered + 1);
  order.ended(next, took(4s), learned);
  CHECK(learned.seconds == std::vector<std::int64_t>{2, 4});
}

TEST_CASE("A ticket never given, or ended twice, is refused") {
  SendOrder order;
  Learned learned;
  CHECK_THROWS_AS(order.ended(0, took(1s), learned), std::invalid_argument);
  const std::uint64_t held_back = order.sent();
  const std::uint64_t ticket = order.sent();
  order.ended(ticket, took(1s), learned);
  // Ended while a call before it holds it back, then again.
  CHECK_THROWS_AS(order.ended(ticket, took(1s), learned), std::invalid_argument);
  CHECK_THROWS_AS(order.ended(ticket + 1, took(1s), learned), std::invalid_argument);
  order.ended(held_back, std::nullopt, learned);
  CHECK(learned.seconds == std::vector<std::int64_t>{1});
}

TEST_CASE("A call whose end never comes stops holding the others back after kHeldAtMost") {
  SendOrder order;
  Learned learned;
  const std::uint64_t lost = order.sent();
  for (std::size_t i = 0; i < SendOrder::kHeldAtMost - 1; ++i)
    order.ended(order.sent(), took(2s), learned);
  CHECK(learned.seconds.empty());
  CHECK(order.held() == SendOrder::kHeldAtMost);
  // One more: the lost call is given up on, and every answer behind it goes on.
  order.ended(order.sent(), took(3s), learned);
  CHECK(learned.seconds.size() == SendOrder::kHeldAtMost);
  CHECK(learned.seconds.back() == 3);
  CHECK(order.held() == 0);
  // Its end, should it come after all, changes nothing.
  order.ended(lost, took(9s), learned);
  CHECK(learned.seconds.size() == SendOrder::kHeldAtMost);
}
