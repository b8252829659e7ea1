// The client commands' checks of their flags, made before anything is sent.
#include "cli/commands.hpp"

#include <doctest/doctest.h>

#include <string>

using fairlane::cli::idempotency_key_problem;

TEST_CASE("An idempotency key is 1 to 255 bytes of UTF-8 text, not only spaces") {
  CHECK_FALSE(idempotency_key_problem("0f8c6d8e-5b1a-4a8e-9d59-3c2f1e0b7a64").has_value());
  CHECK_FALSE(idempotency_key_problem(" padded key ").has_value());
  CHECK_FALSE(idempotency_key_problem("clé-été").has_value());
  CHECK_FALSE(idempotency_key_problem(std::string(255, 'k')).has_value());
  // Until 2026-12-07 an empty or blank key was taken, and libcurl then sent no header at all.
  for (const auto& [key, why] : {std::pair<std::string, std::string>{"", "it is empty"},
                                 {"   ", "it is only spaces"},
                                 {std::string(256, 'k'), "it has 256 bytes"},
                                 {"tab\there", "it holds a control character"},
                                 {"del\x7f", "it holds a control character"},
                                 {"bad\xff", "it is not UTF-8"}}) {
    const auto problem = idempotency_key_problem(key);
    REQUIRE(problem.has_value());
    CHECK(problem->find(why) != std::string::npos);
    CHECK(problem->find("--idempotency-key is 1 to 255 bytes") == 0);
    CHECK(problem->find("leave the flag out") != std::string::npos);
  }
}
