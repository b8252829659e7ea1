#include "fairlane/core/lease.hpp"

namespace fairlane {

void Lease::settle(std::int64_t actual_tokens) {
  tokens_.settle(actual_tokens);
  permit_.release();
}

void Lease::cancel() {
  tokens_.cancel();
  permit_.release();
}

}  // namespace fairlane
