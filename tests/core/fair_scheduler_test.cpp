#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "fairlane/fair_scheduler.hpp"

using fairlane::FairScheduler;
using fairlane::QueuedPage;

namespace {

constexpr fairlane::UserId kA = 1;
constexpr fairlane::UserId kB = 2;
constexpr fairlane::UserId kC = 3;

// Adds `count` pages of `cost` for `user` in `job`, with page ids job*100 + 1, + 2, ...
void add_pages(FairScheduler& scheduler, fairlane::UserId user, fairlane::JobId job, int count,
               std::int64_t cost = 100) {
  for (int i = 1; i <= count; ++i) scheduler.add(QueuedPage{job * 100 + i, job, user, cost});
}

// The users of the next `count` pages taken, as a string like "ABCABC".
std::string take_users(FairScheduler& scheduler, int count) {
  static const std::map<fairlane::UserId, char> kNames{{kA, 'A'}, {kB, 'B'}, {kC, 'C'}};
  std::string order;
  for (int i = 0; i < count; ++i) {
    const auto page = scheduler.take();
    if (!page) break;
    order.push_back(kNames.at(page->user_id));
  }
  return order;
}

}  // namespace

TEST_CASE("Equal costs give plain round robin: A x5, B x5, C x5 dispatch A,B,C,A,B,C,...") {
  FairScheduler scheduler;
  add_pages(scheduler, kA, 1, 5);
  add_pages(scheduler, kB, 2, 5);
  add_pages(scheduler, kC, 3, 5);
  CHECK(scheduler.size() == 15);
  CHECK(scheduler.lane_count() == 3);
  CHECK(take_users(scheduler, 20) == "ABCABCABCABCABC");
  CHECK(scheduler.size() == 0);
  CHECK(scheduler.lane_count() == 0);
  CHECK(scheduler.peek() == nullptr);
}

TEST_CASE("Pages within a lane leave in the order they came") {
  FairScheduler scheduler;
  add_pages(scheduler, kA, 1, 3);
  add_pages(scheduler, kA, 2, 2);
  std::vector<fairlane::PageId> order;
  while (auto page = scheduler.take()) order.push_back(page->page_id);
  CHECK(order == std::vector<fairlane::PageId>{101, 102, 103, 201, 202});
}

TEST_CASE("Weights 2:1 give 2:1 tokens") {
  FairScheduler scheduler;
  scheduler.set_weight(kA, 2);
  add_pages(scheduler, kA, 1, 20);
  add_pages(scheduler, kB, 2, 20);
  CHECK(take_users(scheduler, 12) == "AABAABAABAAB");
}

TEST_CASE("Unequal costs give equal tokens: 8,000-token pages against 800-token pages") {
  FairScheduler scheduler;
  add_pages(scheduler, kA, 1, 50, 8'000);
  add_pages(scheduler, kB, 2, 500, 800);
  std::map<fairlane::UserId, std::int64_t> tokens;
  // 40 pages of A and 400 of B were sent while both stayed backlogged.
  for (int i = 0; i < 440; ++i) {
    const auto page = scheduler.take();
    REQUIRE(page);
    tokens[page->user_id] += page->cost;
  }
  CHECK(tokens[kA] == 320'000);
  CHECK(tokens[kB] == 320'000);
}

TEST_CASE("A page put back after a 429 is the next one out, as if it had never left") {
  FairScheduler scheduler;
  add_pages(scheduler, kA, 1, 3);
  add_pages(scheduler, kB, 2, 3);
  const auto first = scheduler.take();  // A's first page
  REQUIRE(first);
  CHECK(first->page_id == 101);
  scheduler.put_back(*first);
  CHECK(scheduler.peek()->page_id == 101);
  CHECK(take_users(scheduler, 6) == "ABABAB");

  SUBCASE("even when its lane had emptied meanwhile") {
    FairScheduler other;
    add_pages(other, kA, 1, 1);
    add_pages(other, kB, 2, 3);
    const auto only = other.take();
    REQUIRE(only);
    CHECK(only->user_id == kA);
    CHECK(other.lane_count() == 1);
    other.put_back(*only);
    CHECK(other.peek()->page_id == 101);
    CHECK(take_users(other, 4) == "ABBB");
  }
}

TEST_CASE("Peek names the page take will take, however often it is asked") {
  FairScheduler scheduler;
  add_pages(scheduler, kA, 1, 2);
  add_pages(scheduler, kB, 2, 2);
  const auto* peeked = scheduler.peek();
  REQUIRE(peeked != nullptr);
  const auto expected = peeked->page_id;
  for (int i = 0; i < 5; ++i) CHECK(scheduler.peek()->page_id == expected);
  CHECK(scheduler.take()->page_id == expected);
}

TEST_CASE("Cancelling a job removes its queued pages only, and its lane goes when empty") {
  FairScheduler scheduler;
  add_pages(scheduler, kA, 1, 3);
  add_pages(scheduler, kA, 2, 2);
  add_pages(scheduler, kB, 3, 2);
  const auto removed = scheduler.remove_job(kA, 1);
  CHECK(removed.size() == 3);
  CHECK(scheduler.size() == 4);
  CHECK(scheduler.lane_length(kA) == 2);
  CHECK(scheduler.remove_job(kA, 1).empty());
  CHECK(scheduler.remove_job(kC, 9).empty());

  CHECK(scheduler.remove_job(kB, 3).size() == 2);
  CHECK(scheduler.lane_count() == 1);
  std::vector<fairlane::PageId> order;
  while (auto page = scheduler.take()) order.push_back(page->page_id);
  CHECK(order == std::vector<fairlane::PageId>{201, 202});
}

TEST_CASE("A job's place in its lane follows takes, returns and cancellations") {
  FairScheduler scheduler;
  add_pages(scheduler, kA, 1, 3);
  add_pages(scheduler, kA, 2, 4);
  auto place = scheduler.job_place(kA, 2);
  REQUIRE(place);
  CHECK(place->next_index == 4);
  CHECK(place->last_index == 7);

  const auto first = scheduler.take();
  REQUIRE(first);
  CHECK(scheduler.job_place(kA, 1)->next_index == 1);
  CHECK(scheduler.job_place(kA, 1)->last_index == 2);
  CHECK(scheduler.job_place(kA, 2)->last_index == 6);

  scheduler.put_back(*first);
  CHECK(scheduler.job_place(kA, 1)->last_index == 3);
  CHECK(scheduler.job_place(kA, 2)->next_index == 4);

  scheduler.remove_job(kA, 1);
  place = scheduler.job_place(kA, 2);
  CHECK(place->next_index == 1);
  CHECK(place->last_index == 4);

  // A job whose pages have all left has no place.
  for (int i = 0; i < 4; ++i) scheduler.take();
  CHECK_FALSE(scheduler.job_place(kA, 2).has_value());
}

TEST_CASE("A lane that joins waits for the lanes already in the round") {
  FairScheduler scheduler;
  add_pages(scheduler, kA, 1, 4);
  add_pages(scheduler, kB, 2, 4);
  CHECK(take_users(scheduler, 3) == "ABA");
  add_pages(scheduler, kC, 3, 4);
  CHECK(take_users(scheduler, 6) == "BCABCA");
}
