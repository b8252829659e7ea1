// Lease: one admitted provider call's hold on a Budget: its request is spent, it holds an
// in-flight permit and a reservation of its estimated tokens.
//
// End it exactly once: settle(actual_tokens) when the provider reported usage, or cancel()
// when the call failed before any (a 5xx, timeout or reset). Either returns the in-flight
// permit; cancel also returns the reserved tokens, but not the request, which the provider
// has counted. Later calls do nothing. Dropping an open lease returns the permit and keeps
// the reserved tokens spent, the safe side when nobody knows what the provider counted.
//
// The Budget must outlive its leases. Move-only; a moved-from lease is closed.
// Thread safety: none; only the Budget's owning thread touches a lease.
#pragma once

#include <cstdint>
#include <utility>

#include "fairlane/core/in_flight_cap.hpp"
#include "fairlane/core/token_bucket.hpp"

namespace fairlane {

class Lease {
 public:
  Lease(Lease&&) noexcept = default;
  Lease& operator=(Lease&&) noexcept = default;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() = default;

  [[nodiscard]] bool open() const { return tokens_.open(); }
  [[nodiscard]] std::int64_t reserved_tokens() const { return tokens_.reserved(); }

  // Corrects the tokens bucket with the provider's usage and returns the permit.
  void settle(std::int64_t actual_tokens);

  // Returns the reserved tokens and the permit; the request stays spent.
  void cancel();

 private:
  friend class Budget;
  Lease(TokenBucket::Reservation tokens, InFlightCap::Permit permit)
      : tokens_(std::move(tokens)), permit_(std::move(permit)) {}

  TokenBucket::Reservation tokens_;
  InFlightCap::Permit permit_;
};

}  // namespace fairlane
