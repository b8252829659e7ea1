#include "provider/dialect.hpp"

#include <fmt/format.h>

#include <boost/json.hpp>
#include <optional>
#include <string>

#include "fairlane/core/base64.hpp"
#include "fairlane/core/text.hpp"

namespace fairlane {

std::string_view to_string(Dialect dialect) {
  return dialect == Dialect::openai ? "openai" : "anthropic";
}

std::optional<Dialect> dialect_from(std::string_view name) {
  if (name == "openai") return Dialect::openai;
  if (name == "anthropic") return Dialect::anthropic;
  return std::nullopt;
}

std::string_view outcome_name(const OutcomeKind& kind) {
  static constexpr std::string_view kNames[] = {
      "ok",           "rate_limited", "overloaded",       "server_error",
      "client_error", "timeout",      "connection_error", "bad_response"};
  return kNames[kind.index()];
}

namespace provider {
namespace {

namespace json = boost::json;

Status bad(std::string why) {
  return {StatusCode::invalid_argument, std::move(why)};
}

// The integer at `key` of `object`, or an error naming `where`.
Result<std::int64_t> count_at(const json::object& object, std::string_view key,
                              std::string_view where) {
  const json::value* v = object.if_contains(key);
  if (v == nullptr) return bad(fmt::format("{}.{} is missing", where, key));
  if (v->is_int64() && v->as_int64() >= 0) return v->as_int64();
  if (v->is_uint64() && v->as_uint64() <= static_cast<std::uint64_t>(INT64_MAX)) {
    return static_cast<std::int64_t>(v->as_uint64());
  }
  return bad(fmt::format("{}.{} is not a whole number of tokens", where, key));
}

}  // namespace

std::string_view path_of(Dialect dialect) {
  return dialect == Dialect::openai ? "/v1/chat/completions" : "/v1/messages";
}

namespace {

// The user message's content: the page's text as a string, or, for an image page, a list of
// two parts, the text (what the page is) and the image, base64 in the dialect's own shape.
json::value user_content(Dialect dialect, const ProviderRequest& request) {
  if (!request.image) return json::string(request.page_text);
  const PageImage& image = *request.image;
  const json::object text{{"type", "text"}, {"text", kImagePageText}};
  if (dialect == Dialect::openai) {
    const std::string url = "data:" + image.media_type + ";base64," + base64_encode(image.bytes);
    return json::array{
        text, json::object{{"type", "image_url"}, {"image_url", json::object{{"url", url}}}}};
  }
  return json::array{text,
                     json::object{{"type", "image"},
                                  {"source", json::object{{"type", "base64"},
                                                          {"media_type", image.media_type},
                                                          {"data", base64_encode(image.bytes)}}}}};
}

}  // namespace

std::string request_body(Dialect dialect, const ProviderRequest& request) {
  json::object body;
  body["model"] = request.model;
  body["max_tokens"] = request.max_tokens;
  json::value content = user_content(dialect, request);
  if (dialect == Dialect::openai) {
    body["messages"] = json::array{json::object{{"role", "system"}, {"content", request.prompt}},
                                   json::object{{"role", "user"}, {"content", std::move(content)}}};
  } else {
    body["system"] = request.prompt;
    body["messages"] = json::array{json::object{{"role", "user"}, {"content", std::move(content)}}};
  }
  return json::serialize(body);
}

namespace {

Result<json::value> parse_body(std::string_view text) {
  boost::system::error_code error;
  json::value root = json::parse(text, error);
  if (error) return bad(fmt::format("the body is not JSON ({})", error.message()));
  if (!root.is_object()) return bad("the body is not a JSON object");
  return root;
}

// The tokens the provider counted for an answer: its input and output, or nullopt when the
// usage cannot be read.
std::optional<std::int64_t> used_in(Dialect dialect, const json::object& body) {
  const json::value* usage_value = body.if_contains("usage");
  const json::object* usage = usage_value != nullptr ? usage_value->if_object() : nullptr;
  if (usage == nullptr) return std::nullopt;
  const bool openai = dialect == Dialect::openai;
  auto input = count_at(*usage, openai ? "prompt_tokens" : "input_tokens", "usage");
  auto output = count_at(*usage, openai ? "completion_tokens" : "output_tokens", "usage");
  if (!input.ok() || !output.ok() || input.value() > INT64_MAX - output.value()) {
    return std::nullopt;
  }
  return input.value() + output.value();
}

// A 2xx in which the model declines the page (its safety refusal): no text will come of it,
// whatever the tries, and the provider counted its tokens. OpenAI says so in
// choices[0].message.refusal, with no content; Anthropic with stop_reason "refusal".
std::optional<outcome::ClientError> declined(Dialect dialect, int status,
                                             const json::object& body) {
  if (dialect == Dialect::openai) {
    const json::value* choices = body.if_contains("choices");
    const json::array* list = choices != nullptr ? choices->if_array() : nullptr;
    if (list == nullptr || list->empty() || !list->front().is_object()) return std::nullopt;
    const json::value* message = list->front().as_object().if_contains("message");
    if (message == nullptr || !message->is_object()) return std::nullopt;
    const json::value* refusal = message->as_object().if_contains("refusal");
    const json::value* content = message->as_object().if_contains("content");
    // Words of refusal, and no text beside them (null, none, or "", as proxies write it).
    const bool text = content != nullptr && content->is_string() && !content->as_string().empty();
    if (refusal == nullptr || !refusal->is_string() || refusal->as_string().empty() || text) {
      return std::nullopt;
    }
    return outcome::ClientError{status,
                                fmt::format("the model declined the page: {}",
                                            error_detail(std::string_view(refusal->as_string()))),
                                {},
                                used_in(dialect, body)};
  }
  const json::value* stop = body.if_contains("stop_reason");
  if (stop == nullptr || !stop->is_string() || stop->as_string() != "refusal") return std::nullopt;
  return outcome::ClientError{
      status, "the model declined the page (stop_reason refusal)", {}, used_in(dialect, body)};
}

Result<outcome::Ok> answer_from(Dialect dialect, const json::object* body) {
  const json::value* usage_value = body->if_contains("usage");
  const json::object* usage = usage_value != nullptr ? usage_value->if_object() : nullptr;
  if (usage == nullptr) return bad("usage is missing");

  outcome::Ok ok;
  if (dialect == Dialect::openai) {
    const json::value* choices = body->if_contains("choices");
    const json::array* list = choices != nullptr ? choices->if_array() : nullptr;
    if (list == nullptr || list->empty() || !list->front().is_object()) {
      return bad("choices[0] is missing");
    }
    const json::value* message = list->front().as_object().if_contains("message");
    const json::value* content = message != nullptr && message->is_object()
                                     ? message->as_object().if_contains("content")
                                     : nullptr;
    if (content == nullptr || !content->is_string()) {
      return bad("choices[0].message.content is missing or not text");
    }
    ok.output = storable_text(content->as_string());
    auto input = count_at(*usage, "prompt_tokens", "usage");
    auto output = count_at(*usage, "completion_tokens", "usage");
    if (!input.ok()) return input.status();
    if (!output.ok()) return output.status();
    ok.input_tokens = input.value();
    ok.output_tokens = output.value();
  } else {
    const json::value* content = body->if_contains("content");
    const json::array* blocks = content != nullptr ? content->if_array() : nullptr;
    if (blocks == nullptr) return bad("content is missing or not a list");
    for (const json::value& block : *blocks) {
      const json::object* b = block.if_object();
      if (b == nullptr) return bad("content holds something that is not a block");
      const json::value* type = b->if_contains("type");
      if (type != nullptr && type->is_string() && type->as_string() == "text") {
        const json::value* part = b->if_contains("text");
        if (part == nullptr || !part->is_string()) return bad("a text block has no text");
        ok.output += storable_text(part->as_string());
      }
    }
    auto input = count_at(*usage, "input_tokens", "usage");
    auto output = count_at(*usage, "output_tokens", "usage");
    if (!input.ok()) return input.status();
    if (!output.ok()) return output.status();
    ok.input_tokens = input.value();
    ok.output_tokens = output.value();
  }
  return ok;
}

}  // namespace

Result<outcome::Ok> parse_answer(Dialect dialect, std::string_view text) {
  auto root = parse_body(text);
  if (!root.ok()) return root.status();
  return answer_from(dialect, root->if_object());
}

namespace {

// The string at error.<field> of an error body (both dialects put their error there), or
// std::nullopt.
std::optional<std::string> error_field(std::string_view body, std::string_view field) {
  boost::system::error_code error;
  const json::value root = json::parse(body, error);
  if (error || !root.is_object()) return std::nullopt;
  const json::value* e = root.as_object().if_contains("error");
  if (e == nullptr || !e->is_object()) return std::nullopt;
  const json::value* value = e->as_object().if_contains(field);
  if (value == nullptr || !value->is_string()) return std::nullopt;
  return std::string(value->as_string());
}

}  // namespace

std::string error_detail(std::string_view body) {
  constexpr std::size_t kMax = 300;
  // Storable, then cut to kMax bytes at a character's start: a NUL or a broken sequence
  // becomes U+FFFD, three bytes, and the text may have grown past kMax.
  const auto storable_prefix = [](std::string_view raw) {
    std::string text = storable_text(raw.substr(0, kMax));
    if (text.size() > kMax) {
      std::size_t end = kMax;
      while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0U) == 0x80U) --end;
      text.resize(end);
    }
    return text;
  };
  if (const auto message = error_field(body, "message")) return storable_prefix(*message);
  return storable_prefix(body);
}

namespace {

// What the operator should check when the provider refuses fairlane itself, never the page:
// its URL (a redirect), its key (401), its account's payment (402), a proxy's login (407); OpenAI's
// 429 of an account out of quota (error.code "insufficient_quota": no wait helps, and its pages are
// not the cause); Anthropic's 400 of an account out of credit. Empty for anything else. 403
// and 404 are not among them: they may be the page's own (a proxy refusing its text, a
// model that cannot take its image), and an outage for one page would pause every user's.
std::string remedy_for(int status, std::string_view body) {
  switch (status) {
    case 401:
      return "check the key --api-key-env names";
    case 402:
      return "check the provider account's payment";
    case 407:
      return "check the proxy's login (libcurl's proxy variables)";
    case 300:
    case 301:
    case 302:
    case 303:
    case 307:
    case 308:
      // fairlane follows no redirect (a POST would not survive every one of them).
      return "the provider redirects fairlane elsewhere: set --provider-url to the URL it names";
    case 429:
      if (error_field(body, "code") == "insufficient_quota" ||
          error_field(body, "type") == "insufficient_quota") {
        return "the provider account has no quota left: check its plan and billing";
      }
      return {};
    case 400:
      if (error_field(body, "message").value_or("").starts_with("Your credit balance is too low")) {
        return "the provider account has no credit left: check its plan and billing";
      }
      return {};
    default:
      return {};
  }
}

}  // namespace

OutcomeKind classify(Dialect dialect, int status, std::string_view body,
                     const RateLimitHeaders& limits) {
  if (status >= 200 && status < 300) {
    auto root = parse_body(body);
    if (!root.ok()) return outcome::BadResponse{root.status().message()};
    if (auto refusal = declined(dialect, status, root->as_object())) return std::move(*refusal);
    auto answer = answer_from(dialect, root->if_object());
    if (!answer.ok()) return outcome::BadResponse{answer.status().message()};
    return std::move(answer).value();
  }
  if (std::string remedy = remedy_for(status, body); !remedy.empty()) {
    return outcome::ClientError{status, error_detail(body), std::move(remedy)};
  }
  if (status == 429) return outcome::RateLimited{limits.retry_after};
  if (status == 503 || status == 529) return outcome::Overloaded{limits.retry_after};
  if (status >= 500 || status == 408) return outcome::ServerError{status, error_detail(body)};
  return outcome::ClientError{status, error_detail(body)};
}

}  // namespace provider
}  // namespace fairlane
