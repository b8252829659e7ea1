#include "service/api.hpp"

#include <algorithm>
#include <boost/json/serialize.hpp>
#include <cctype>
#include <charconv>

#include "fairlane/core/text.hpp"

namespace fairlane::service {

std::optional<std::string> ApiRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (iequals(key, name)) return value;
  }
  return std::nullopt;
}

std::string media_type(std::string_view content_type) {
  std::string media(content_type.substr(0, content_type.find(';')));
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.pop_back();
  std::transform(media.begin(), media.end(), media.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return media;
}

std::optional<std::int64_t> whole_number(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || err != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

ApiResponse json_response(int status, const boost::json::object& body) {
  ApiResponse r;
  r.status = status;
  r.body = boost::json::serialize(body);
  return r;
}

ApiResponse error_response(int status, std::string_view type, std::string_view message) {
  return json_response(status, error_json(type, message));
}

ApiResponse method_not_allowed(std::string_view method, std::string_view path,
                               std::string_view allow) {
  ApiResponse refused = error_response(
      405, "method_not_allowed",
      storable_text(path) + " takes " + std::string(allow) + ", not " + storable_text(method));
  refused.headers.emplace_back("Allow", std::string(allow));
  return refused;
}

ApiResponse response_for(const ApiAnswer& answer) {
  ApiResponse r = json_response(answer.status, answer.body);
  r.log = answer.detail;
  if (answer.retry_after_s) {
    r.headers.emplace_back("Retry-After", std::to_string(*answer.retry_after_s));
  }
  return r;
}

}  // namespace fairlane::service
