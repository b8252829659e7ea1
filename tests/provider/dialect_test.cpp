#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <variant>

#include "provider/dialect.hpp"

using fairlane::Dialect;
using fairlane::OutcomeKind;
using fairlane::ProviderRequest;
using fairlane::RateLimitHeaders;
namespace outcome = fairlane::outcome;
namespace provider = fairlane::provider;
namespace json = boost::json;

namespace {

const ProviderRequest kRequest{"Extract the text.", "Page \"one\"\nline two", "model-x", 240};

}  // namespace

TEST_CASE("An OpenAI call: chat completions with the prompt as system message") {
  CHECK(provider::path_of(Dialect::openai) == "/v1/chat/completions");
  const json::value body = json::parse(provider::request_body(Dialect::openai, kRequest));
  CHECK(body.at("model") == "model-x");
  CHECK(body.at("max_tokens") == 240);
  const auto& messages = body.at("messages").as_array();
  REQUIRE(messages.size() == 2);
  CHECK(messages[0].at("role") == "system");
  CHECK(messages[0].at("content") == "Extract the text.");
  CHECK(messages[1].at("role") == "user");
  CHECK(messages[1].at("content") == "Page \"one\"\nline two");
}

TEST_CASE("An Anthropic call: messages with the prompt as system") {
  CHECK(provider::path_of(Dialect::anthropic) == "/v1/messages");
  const json::value body = json::parse(provider::request_body(Dialect::anthropic, kRequest));
  CHECK(body.at("system") == "Extract the text.");
  const auto& messages = body.at("messages").as_array();
  REQUIRE(messages.size() == 1);
  CHECK(messages[0].at("role") == "user");
  CHECK(messages[0].at("content") == "Page \"one\"\nline two");
}

TEST_CASE("An image page: the user message holds a text part and the image, in each dialect") {
  ProviderRequest request{"Extract the text.", "", "model-x", 240,
                          fairlane::PageImage{"image/png", 3, 2, std::string("\x89PNG\0", 5)}};
  const std::string base64 = "iVBORwA=";  // the five bytes above

  const json::value openai = json::parse(provider::request_body(Dialect::openai, request));
  const auto& o = openai.at("messages").as_array();
  REQUIRE(o.size() == 2);
  CHECK(o[0].at("content") == "Extract the text.");
  const auto& o_parts = o[1].at("content").as_array();
  REQUIRE(o_parts.size() == 2);
  CHECK(o_parts[0].at("type") == "text");
  CHECK(o_parts[0].at("text").as_string() == fairlane::kImagePageText);
  CHECK(o_parts[1].at("type") == "image_url");
  CHECK(o_parts[1].at("image_url").at("url").as_string() == "data:image/png;base64," + base64);

  request.image->media_type = "image/jpeg";
  const json::value anthropic = json::parse(provider::request_body(Dialect::anthropic, request));
  CHECK(anthropic.at("system") == "Extract the text.");
  const auto& a = anthropic.at("messages").as_array();
  REQUIRE(a.size() == 1);
  const auto& a_parts = a[0].at("content").as_array();
  REQUIRE(a_parts.size() == 2);
  CHECK(a_parts[0].at("type") == "text");
  CHECK(a_parts[1].at("type") == "image");
  CHECK(a_parts[1].at("source").at("type") == "base64");
  CHECK(a_parts[1].at("source").at("media_type") == "image/jpeg");
  CHECK(a_parts[1].at("source").at("data").as_string() == base64);
}

TEST_CASE("Answers in both dialects give the output and the usage") {
  const auto openai = provider::parse_answer(
      Dialect::openai,
      R"({"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":)"
      R"({"role":"assistant","content":"# Page one"},"finish_reason":"stop"}],)"
      R"("usage":{"prompt_tokens":57,"completion_tokens":12,"total_tokens":69}})");
  REQUIRE(openai.ok());
  CHECK(openai->output == "# Page one");
  CHECK(openai->input_tokens == 57);
  CHECK(openai->output_tokens == 12);

  const auto anthropic = provider::parse_answer(
      Dialect::anthropic,
      R"({"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"# Page"},)"
      R"({"type":"text","text":" one"}],"stop_reason":"end_turn","usage":{"input_tokens":57,"output_tokens":12}})");
  REQUIRE(anthropic.ok());
  CHECK(anthropic->output == "# Page one");
  CHECK(anthropic->input_tokens == 57);
  CHECK(anthropic->output_tokens == 12);
}

TEST_CASE("A malformed answer is a bad response naming what is wrong") {
  CHECK(provider::parse_answer(Dialect::openai, "{\"choices\": [")
            .status()
            .message()
            .find("not JSON") != std::string::npos);
  CHECK(provider::parse_answer(Dialect::openai, "[1,2]").status().message().find("object") !=
        std::string::npos);
  CHECK(provider::parse_answer(Dialect::openai, R"({"choices":[],"usage":{}})")
            .status()
            .message()
            .find("choices[0]") != std::string::npos);
  CHECK(
      provider::parse_answer(
          Dialect::openai,
          R"({"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":"many","completion_tokens":1}})")
          .status()
          .message()
          .find("usage.prompt_tokens") != std::string::npos);
  CHECK(provider::parse_answer(Dialect::anthropic, R"({"content":[{"type":"text","text":"x"}]})")
            .status()
            .message()
            .find("usage") != std::string::npos);
  CHECK(provider::parse_answer(Dialect::anthropic, R"({"content":"x","usage":{}})")
            .status()
            .message()
            .find("content") != std::string::npos);
}

TEST_CASE("Statuses map to outcomes") {
  RateLimitHeaders limits;
  limits.retry_after = std::chrono::seconds(7);
  const auto is = [&](int status, std::string_view body) {
    return provider::classify(Dialect::openai, status, body, limits);
  };
  const OutcomeKind limited = is(429, R"({"error":{"message":"slow down"}})");
  REQUIRE(std::holds_alternative<outcome::RateLimited>(limited));
  CHECK(std::get<outcome::RateLimited>(limited).retry_after == std::chrono::seconds(7));
  CHECK(std::holds_alternative<outcome::Overloaded>(is(503, "")));
  CHECK(std::holds_alternative<outcome::Overloaded>(is(529, "")));
  const OutcomeKind server = is(500, R"({"error":{"message":"boom"}})");
  REQUIRE(std::holds_alternative<outcome::ServerError>(server));
  CHECK(std::get<outcome::ServerError>(server).detail == "boom");
  const OutcomeKind client = is(400, R"({"error":{"message":"max_tokens is too large"}})");
  REQUIRE(std::holds_alternative<outcome::ClientError>(client));
  CHECK(std::get<outcome::ClientError>(client).status == 400);
  CHECK(std::get<outcome::ClientError>(client).detail == "max_tokens is too large");
  CHECK(std::get<outcome::ClientError>(client).remedy.empty());  // the page's own
  CHECK(std::holds_alternative<outcome::BadResponse>(is(200, "not json")));
  CHECK(fairlane::outcome_name(is(200, "not json")) == "bad_response");
  CHECK(fairlane::outcome_name(limited) == "rate_limited");
}

TEST_CASE("A refusal of fairlane itself, not of the page, names what the operator should check") {
  const RateLimitHeaders limits;
  const auto remedy = [&](Dialect dialect, int status, std::string_view body) {
    const OutcomeKind kind = provider::classify(dialect, status, body, limits);
    const auto* refused = std::get_if<outcome::ClientError>(&kind);
    return refused != nullptr ? refused->remedy : std::string("(not a refusal)");
  };
  CHECK(remedy(Dialect::openai, 401, "invalid key") == "check the key --api-key-env names");
  CHECK(remedy(Dialect::anthropic, 402, "") == "check the provider account's payment");
  CHECK(remedy(Dialect::openai, 407, "") == "check the proxy's login (libcurl's proxy variables)");
  // OpenAI's account out of quota is a 429 that no wait helps. Before, it was a rate limit:
  // every page was put back 100 times, each pause a minute, then failed as "gave up after
  // 101 refusals by the provider's rate limit", never naming the quota.
  const std::string out_of_quota =
      R"({"error":{"message":"You exceeded your current quota, please check your plan and )"
      R"(billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}})";
  CHECK(remedy(Dialect::openai, 429, out_of_quota) ==
        "the provider account has no quota left: check its plan and billing");
  CHECK(
      std::get<outcome::ClientError>(provider::classify(Dialect::openai, 429, out_of_quota, limits))
          .detail.starts_with("You exceeded your current quota"));
  // Anthropic's account out of credit is a 400. Before, every page of every user failed.
  CHECK(remedy(Dialect::anthropic, 400,
               R"({"type":"error","error":{"type":"invalid_request_error","message":"Your )"
               R"(credit balance is too low to access the Anthropic API. Please go to Plans )"
               R"(& Billing to upgrade or purchase credits."}})") ==
        "the provider account has no credit left: check its plan and billing");
  // A rate limit is a rate limit; 403 and 404 may be the page's own.
  CHECK(remedy(Dialect::openai, 429, R"({"error":{"code":"rate_limit_exceeded"}})") ==
        "(not a refusal)");
  CHECK(remedy(Dialect::openai, 403, "blocked").empty());
  CHECK(remedy(Dialect::openai, 404, "no such model").empty());
  // fairlane does not follow redirects: one is of its --provider-url, never of a page.
  // Before, every page failed at once as "the provider answered 301".
  for (const int status : {301, 302, 307, 308}) {
    CAPTURE(status);
    CHECK(remedy(Dialect::openai, status, "") ==
          "the provider redirects fairlane elsewhere: set --provider-url to the URL it names");
  }
}

TEST_CASE("A refusal by the model is a refusal of the page, with its text and its usage") {
  const RateLimitHeaders limits;
  // OpenAI: no content, the refusal in message.refusal. Before: unreadable, retried.
  const OutcomeKind openai =
      provider::classify(Dialect::openai, 200,
                         R"({"choices":[{"message":{"role":"assistant","content":null,)"
                         R"("refusal":"I can't help with that."},"finish_reason":"stop"}],)"
                         R"("usage":{"prompt_tokens":900,"completion_tokens":12}})",
                         limits);
  const auto* declined = std::get_if<outcome::ClientError>(&openai);
  REQUIRE(declined != nullptr);
  CHECK(declined->status == 200);
  CHECK(declined->detail == "the model declined the page: I can't help with that.");
  CHECK(declined->remedy.empty());  // the page's own
  CHECK(declined->used_tokens == 912);
  // Content "" (as proxies write null) is no text: the refusal stands. A refusal of no
  // words is none: the answer is unreadable (retried), as before.
  const auto openai_with = [&](const std::string& message) {
    return provider::classify(Dialect::openai, 200,
                              R"({"choices":[{"message":)" + message +
                                  R"(}],"usage":{"prompt_tokens":9,"completion_tokens":1}})",
                              limits);
  };
  CHECK(std::holds_alternative<outcome::ClientError>(
      openai_with(R"({"content":"","refusal":"I can't help"})")));
  CHECK(std::holds_alternative<outcome::BadResponse>(
      openai_with(R"({"content":null,"refusal":""})")));
  CHECK(std::holds_alternative<outcome::Ok>(openai_with(R"({"content":"text","refusal":null})")));
  // Anthropic: stop_reason "refusal", whatever text came before it. Before: done, no text.
  const OutcomeKind anthropic = provider::classify(
      Dialect::anthropic, 200,
      R"({"content":[],"stop_reason":"refusal","usage":{"input_tokens":900,"output_tokens":0}})",
      limits);
  declined = std::get_if<outcome::ClientError>(&anthropic);
  REQUIRE(declined != nullptr);
  CHECK(declined->detail == "the model declined the page (stop_reason refusal)");
  CHECK(declined->used_tokens == 900);
  // An answer that ends otherwise is an answer.
  CHECK(std::holds_alternative<outcome::Ok>(
      provider::classify(Dialect::anthropic, 200,
                         R"({"content":[{"type":"text","text":"x"}],"stop_reason":"end_turn",)"
                         R"("usage":{"input_tokens":9,"output_tokens":1}})",
                         limits)));
}

TEST_CASE("Text no database takes as it is, in an answer or an error, comes out storable") {
  const std::string replacement = "\xef\xbf\xbd";  // U+FFFD
  // JSON's \u0000 is a NUL in the text: PostgreSQL's text cannot hold it.
  const auto openai = provider::parse_answer(
      Dialect::openai, R"({"choices":[{"message":{"content":"p-1\u0000 after"}}],)"
                       R"("usage":{"prompt_tokens":5,"completion_tokens":2}})");
  REQUIRE(openai.ok());
  CHECK(openai->output == "p-1" + replacement + " after");
  const auto anthropic = provider::parse_answer(
      Dialect::anthropic,
      R"({"content":[{"type":"text","text":"a\u0000"},{"type":"text","text":"\u0000b"}],)"
      R"("usage":{"input_tokens":5,"output_tokens":2}})");
  REQUIRE(anthropic.ok());
  CHECK(anthropic->output == "a" + replacement + replacement + "b");
  // A raw error body: a NUL byte, and a UTF-8 sequence cut short at its end.
  const std::string raw("internal error\0 then a cut \xe2\x82", 29);
  CHECK(provider::error_detail(raw) ==
        "internal error" + replacement + " then a cut " + replacement);
  // The provider's sentence, with a NUL.
  CHECK(provider::error_detail(R"({"error":{"message":"boom\u0000"}})") == "boom" + replacement);
  // At most 300 bytes, cut at a character's start: a character cut at the 300th byte, and
  // replacements that grow the text past 300 bytes, are left out whole.
  std::string long_body(299, 'x');
  long_body += "\xc3\xa9 and more";
  CHECK(provider::error_detail(long_body) == std::string(299, 'x'));
  const std::string nuls(300, '\0');
  CHECK(provider::error_detail(nuls).size() == 300);  // a hundred U+FFFD
  CHECK(provider::error_detail(std::string(298, 'x') + std::string(2, '\0')) ==
        std::string(298, 'x'));
}
