// SseParser: reads a text/event-stream (the WHATWG HTML "Server-sent events" format) as
// it arrives, in chunks of any size, and hands out each event when its blank line comes:
// its type ("message" unless an `event:` line named one) and its data (the `data:` lines
// joined by '\n'). Comment lines (": heartbeat") and unknown fields are skipped; `retry:`
// is kept for the reconnecting client.
//
// Thread safety: none; one per stream.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fairlane::cli {

struct SseEvent {
  std::string type = "message";
  std::string data;
};

class SseParser {
 public:
  // Feeds the next bytes; returns the events they completed, in order.
  std::vector<SseEvent> feed(std::string_view bytes);

  // The last `retry:` the stream sent, in milliseconds, kept from kMinRetryMs to kMaxRetryMs
  // (a retry of 0 from a proxy would have every reconnect fire at once); one that is not all
  // digits is ignored, as the SSE standard says.
  [[nodiscard]] std::optional<std::int64_t> retry_ms() const { return retry_ms_; }
  static constexpr std::int64_t kMinRetryMs = 500;
  static constexpr std::int64_t kMaxRetryMs = 60'000;

 private:
  void line(std::string_view text, std::vector<SseEvent>& out);

  std::string partial_;    // a line not yet ended
  bool after_cr_ = false;  // the last byte was CR: a following LF ends nothing
  std::optional<std::string> event_type_;
  std::optional<std::string> data_;
  std::optional<std::int64_t> retry_ms_;
};

}  // namespace fairlane::cli
