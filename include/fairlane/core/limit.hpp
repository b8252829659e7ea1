// Limit: which of the provider's three limits a page is waiting for.
#pragma once

#include <string_view>

namespace fairlane {

enum class Limit {
  requests,     // requests per minute (RPM)
  concurrency,  // calls in flight at once
  tokens,       // tokens per minute (TPM)
};

// "requests", "concurrency" or "tokens": the names the HTTP API and metrics use.
[[nodiscard]] std::string_view to_string(Limit limit);

}  // namespace fairlane
