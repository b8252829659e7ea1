// Watchers: the parked listeners of the live events (GET /v1/jobs/{id}/events). Any change
// can move every job's position and ETA (a page done in one lane moves everyone behind
// it), so notify() wakes every parked watcher, once; a woken watcher renders its job,
// sends it if it differs from what it sent last, and parks again. Watchers coalesce on
// their side (the HTTP server waits a short interval after a wake), so a busy dispatcher
// costs each watcher a few renders a second, not one per page.
//
// Thread safety: the io_context's thread, like the router and the dispatcher.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>

namespace fairlane::service {

class Watchers {
 public:
  using Wake = std::function<void()>;
  using Ticket = std::uint64_t;

  // `wake` runs once, at the next notify(), unless unpark() comes first.
  Ticket park(Wake wake);
  // Forgets a parked watcher; a ticket already woken or unknown is ignored.
  void unpark(Ticket ticket);
  // Wakes every parked watcher (each leaves the parked set) and counts one change.
  void notify();

  [[nodiscard]] std::size_t parked() const { return parked_.size(); }
  // Changes notified so far.
  [[nodiscard]] std::uint64_t changes() const { return changes_; }

 private:
  std::unordered_map<Ticket, Wake> parked_;
  Ticket next_ticket_ = 1;
  std::uint64_t changes_ = 0;
};

}  // namespace fairlane::service
