#include "service/watchers.hpp"

#include <doctest/doctest.h>

#include <vector>

using fairlane::service::Watchers;

TEST_CASE("Watchers: a notify wakes every parked watcher once, and counts the change") {
  Watchers watchers;
  std::vector<int> woken;
  watchers.park([&] { woken.push_back(1); });
  watchers.park([&] { woken.push_back(2); });
  CHECK(watchers.parked() == 2);
  watchers.notify();
  CHECK(woken.size() == 2);
  CHECK(watchers.parked() == 0);
  CHECK(watchers.changes() == 1);
  watchers.notify();  // nobody parked any more
  CHECK(woken.size() == 2);
  CHECK(watchers.changes() == 2);
}

TEST_CASE("Watchers: an unparked watcher is not woken, and a stale ticket is ignored") {
  Watchers watchers;
  int woken = 0;
  const Watchers::Ticket gone = watchers.park([&] { woken += 10; });
  const Watchers::Ticket stays = watchers.park([&] { woken += 1; });
  watchers.unpark(gone);
  watchers.notify();
  CHECK(woken == 1);
  watchers.unpark(stays);  // already woken: nothing happens
  watchers.unpark(12345);
  CHECK(watchers.parked() == 0);
}

TEST_CASE("Watchers: a watcher that parks again while woken waits for the next change") {
  Watchers watchers;
  int woken = 0;
  std::function<void()> wake = [&] {
    ++woken;
    watchers.park(wake);
  };
  watchers.park(wake);
  watchers.notify();
  CHECK(woken == 1);
  CHECK(watchers.parked() == 1);
  watchers.notify();
  CHECK(woken == 2);
}
