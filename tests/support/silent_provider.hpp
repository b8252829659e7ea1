// A provider nobody reaches: for tests whose dispatcher's loop never sends a call.
#pragma once

#include <cstddef>

#include "fairlane/provider/provider.hpp"

namespace fairlane::testing {

class SilentProvider final : public Provider {
 public:
  void call(const ProviderRequest&, Done) override {}
  [[nodiscard]] std::size_t in_flight() const override { return 0; }
};

}  // namespace fairlane::testing
