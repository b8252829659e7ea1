#include "service/metrics.hpp"

#include <doctest/doctest.h>

#include <string>

using fairlane::service::Histogram;

TEST_CASE("A histogram renders cumulative buckets, le inclusive, with sum and count") {
  Histogram h({0.1, 1, 10});
  h.observe(0.1);  // on a bound: counts in that bucket ("le")
  h.observe(0.5);
  h.observe(0.75);
  h.observe(100);  // past every bound: only +Inf
  std::string out;
  h.render(out, "x_seconds", "Some seconds.");
  CHECK(out ==
        "# HELP x_seconds Some seconds.\n"
        "# TYPE x_seconds histogram\n"
        "x_seconds_bucket{le=\"0.1\"} 1\n"
        "x_seconds_bucket{le=\"1\"} 3\n"
        "x_seconds_bucket{le=\"10\"} 3\n"
        "x_seconds_bucket{le=\"+Inf\"} 4\n"
        "x_seconds_sum 101.35\n"
        "x_seconds_count 4\n");
  CHECK(h.count() == 4);
}

TEST_CASE("An empty histogram still renders every bucket at zero") {
  Histogram h({1});
  std::string out;
  h.render(out, "y", "Y.");
  CHECK(out.find("y_bucket{le=\"1\"} 0\ny_bucket{le=\"+Inf\"} 0\ny_sum 0\ny_count 0\n") !=
        std::string::npos);
}
