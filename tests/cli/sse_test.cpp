#include "cli/sse.hpp"

#include <doctest/doctest.h>

#include <string>

using fairlane::cli::SseParser;

TEST_CASE("SSE: events come out when their blank line arrives, whatever the chunks") {
  const std::string stream =
      "retry: 2000\n\nevent: job\ndata: {\"a\":1}\n\n: heartbeat\n\nevent: job\ndata: "
      "{\"a\":2}\n\n";
  // Fed whole, and fed one byte at a time: the same two events.
  for (const std::size_t chunk : {stream.size(), std::size_t{1}, std::size_t{7}}) {
    SseParser parser;
    std::vector<fairlane::cli::SseEvent> events;
    for (std::size_t i = 0; i < stream.size(); i += chunk) {
      for (auto& e : parser.feed(std::string_view(stream).substr(i, chunk))) events.push_back(e);
    }
    REQUIRE(events.size() == 2);
    CHECK(events[0].type == "job");
    CHECK(events[0].data == "{\"a\":1}");
    CHECK(events[1].data == "{\"a\":2}");
    CHECK(parser.retry_ms() == 2000);
  }
}

TEST_CASE("SSE: CRLF and CR line ends, multi-line data, default type, unknown fields") {
  SseParser parser;
  const auto events = parser.feed("data: one\r\ndata:two\r\nid: 7\r\n\r\nevent: x\rdata\r\r");
  REQUIRE(events.size() == 2);
  CHECK(events[0].type == "message");
  CHECK(events[0].data == "one\ntwo");
  CHECK(events[1].type == "x");
  CHECK(events[1].data.empty());
}

TEST_CASE("SSE: an event without data is not dispatched, and a partial event waits") {
  SseParser parser;
  CHECK(parser.feed("event: job\n\n").empty());
  CHECK(parser.feed("data: half").empty());
  const auto events = parser.feed("\n\n");
  REQUIRE(events.size() == 1);
  CHECK(events[0].data == "half");
}

TEST_CASE("SSE: a retry is digits only, and kept between half a second and a minute") {
  // The SSE standard ignores a retry that is not all digits; taken as given, `retry: 0` or
  // `retry: -5` from a proxy made every reconnect of a watch fire at once, and a large one
  // would have it wait for hours.
  SseParser parser;
  (void)parser.feed("retry: -5\n\n");
  CHECK_FALSE(parser.retry_ms().has_value());
  (void)parser.feed("retry: +700\n\n");
  CHECK_FALSE(parser.retry_ms().has_value());
  (void)parser.feed("retry: 0\n\n");
  CHECK(parser.retry_ms() == 500);
  (void)parser.feed("retry: 99999999999\n\n");
  CHECK(parser.retry_ms() == 60'000);
  (void)parser.feed("retry: 1500\n\n");
  CHECK(parser.retry_ms() == 1'500);
}
