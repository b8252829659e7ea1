// What `fairlane serve` gives each piece from its options.
#include "cli/serve_config.hpp"

#include <doctest/doctest.h>

using fairlane::cli::provider_config;
using fairlane::cli::ServeOptions;

TEST_CASE("The provider client opens as many connections as calls may be in flight") {
  ServeOptions options;
  options.max_in_flight = 50;
  CHECK(provider_config(options, fairlane::Dialect::openai).max_connections == 50);
  // 0 is no cap on calls in flight: no cap on connections either. One connection for all of
  // them queued every call behind the one before in libcurl, where its timeout ran out.
  options.max_in_flight = 0;
  CHECK(provider_config(options, fairlane::Dialect::openai).max_connections == 0);
}
