#include "service/watchers.hpp"

#include <utility>

namespace fairlane::service {

Watchers::Ticket Watchers::park(Wake wake) {
  const Ticket ticket = next_ticket_++;
  parked_.emplace(ticket, std::move(wake));
  return ticket;
}

void Watchers::unpark(Ticket ticket) {
  parked_.erase(ticket);
}

void Watchers::notify() {
  ++changes_;
  // A wake may park again at once: it joins the next round, not this one.
  auto woken = std::exchange(parked_, {});
  for (auto& [ticket, wake] : woken) wake();
}

}  // namespace fairlane::service
