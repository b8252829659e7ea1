// What the client commands read from an answer's headers.
#include "cli/http_client.hpp"

#include <doctest/doctest.h>

using fairlane::cli::retry_after_of;

TEST_CASE("Retry-After is read as delta-seconds from its header line, in any case") {
  CHECK(retry_after_of("Retry-After: 5\r\n") == 5);
  CHECK(retry_after_of("retry-after:12") == 12);
  CHECK(retry_after_of("RETRY-AFTER: \t0 \r\n") == 0);
  // Another header, an HTTP-date, a negative or a number with something after it: none.
  CHECK_FALSE(retry_after_of("Content-Length: 5\r\n").has_value());
  CHECK_FALSE(retry_after_of("Retry-After: Wed, 21 Oct 2026 07:28:00 GMT\r\n").has_value());
  CHECK_FALSE(retry_after_of("Retry-After: -3\r\n").has_value());
  CHECK_FALSE(retry_after_of("Retry-After: 5s\r\n").has_value());
  CHECK_FALSE(retry_after_of("Retry-After:\r\n").has_value());
}
