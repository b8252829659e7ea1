#include "cli/sse.hpp"

#include <algorithm>
#include <charconv>

namespace fairlane::cli {

std::vector<SseEvent> SseParser::feed(std::string_view bytes) {
  std::vector<SseEvent> out;
  for (const char c : bytes) {
    if (after_cr_ && c == '\n') {  // CRLF: the CR already ended the line
      after_cr_ = false;
      continue;
    }
    after_cr_ = c == '\r';
    if (c == '\r' || c == '\n') {
      line(partial_, out);
      partial_.clear();
    } else {
      partial_ += c;
    }
  }
  return out;
}

void SseParser::line(std::string_view text, std::vector<SseEvent>& out) {
  if (text.empty()) {  // a blank line dispatches the event, if it has data
    if (data_) out.push_back(SseEvent{event_type_.value_or("message"), std::move(*data_)});
    event_type_.reset();
    data_.reset();
    return;
  }
  if (text.front() == ':') return;  // a comment: a heartbeat
  const auto colon = text.find(':');
  const std::string_view field = text.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? "" : text.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "event") {
    event_type_ = std::string(value);
  } else if (field == "data") {
    if (data_) {
      *data_ += '\n';
      *data_ += value;
    } else {
      data_ = std::string(value);
    }
  } else if (field == "retry") {
    // ASCII digits only, as the standard says (from_chars would take a sign); too many of
    // them is a minute.
    const bool digits = !value.empty() && std::all_of(value.begin(), value.end(),
                                                      [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) return;
    std::int64_t ms = kMaxRetryMs;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), ms);
    if (error != std::errc() || end != value.data() + value.size()) ms = kMaxRetryMs;
    retry_ms_ = std::clamp<std::int64_t>(ms, kMinRetryMs, kMaxRetryMs);
  }
}

}  // namespace fairlane::cli
