// The stand-in's reading of a call's body: text as before, image parts in both dialects
// (sized from their headers, billed by the dialect's rule, digested into the page), and
// the refusals of a malformed part, each naming what is wrong.
#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <string>
#include <string_view>

#include "call_body.hpp"
#include "fairlane/core/base64.hpp"
#include "fairlane/document/image.hpp"
#include "fairlane/provider/image_tokens.hpp"

using fairlane::base64_encode;
using fairlane::Dialect;
using fairlane::StatusCode;
using fairlane::provider_sim::CallBody;
using fairlane::provider_sim::read_call_body;
namespace json = boost::json;

namespace {

// A PNG's signature and IHDR (300 x 200, gray): all the stand-in reads of it. Its SHA-256,
// from Python's hashlib.
constexpr std::string_view kPng300x200(
    "\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\x01\x2c\0\0\0\xc8\x08\0\0\0\0\x77\xb4\x83\x89", 33);
constexpr std::string_view kPngSha256 =
    "a766d270bd04c68ceb368822c818baa3a73096b5db5f71cf0f2069e1b3c85351";
// A JPEG's SOI and a baseline frame of 300 x 200.
constexpr std::string_view kJpeg300x200("\xff\xd8\xff\xc0\0\x0b\x08\0\xc8\x01\x2c\x01\x01\x11\0",
                                        15);
constexpr std::string_view kJpegSha256 =
    "d1aeef1e67c3dd62b1fd9ae2c2ede4b7dc8d597e1e6abbeec513424fcf400d24";

json::object openai_image(std::string_view media_type, std::string_view bytes) {
  return json::object{{"type", "image_url"},
                      {"image_url", json::object{{"url", "data:" + std::string(media_type) +
                                                             ";base64," + base64_encode(bytes)}}}};
}

json::object anthropic_image(std::string_view media_type, std::string_view bytes) {
  return json::object{{"type", "image"},
                      {"source", json::object{{"type", "base64"},
                                              {"media_type", media_type},
                                              {"data", base64_encode(bytes)}}}};
}

json::object text_part(std::string_view text) {
  return json::object{{"type", "text"}, {"text", text}};
}

// A call's body in `dialect` with the prompt and a user message of `parts`.
std::string body_with(Dialect dialect, json::array parts) {
  json::array messages;
  json::object body{{"model", "m"}, {"max_tokens", 100}};
  if (dialect == Dialect::openai) {
    messages.push_back(json::object{{"role", "system"}, {"content", "Read the page."}});
  } else {
    body["system"] = "Read the page.";
  }
  messages.push_back(json::object{{"role", "user"}, {"content", std::move(parts)}});
  body["messages"] = std::move(messages);
  return json::serialize(body);
}

json::object image_part(Dialect dialect, std::string_view media_type, std::string_view bytes) {
  return dialect == Dialect::openai ? openai_image(media_type, bytes)
                                    : anthropic_image(media_type, bytes);
}

CallBody read(Dialect dialect, const std::string& body) {
  auto call = read_call_body(dialect, body, false);
  REQUIRE_MESSAGE(call.ok(), call.status().message());
  return std::move(call).value();
}

// The refusal of `body`: its message.
std::string refusal(Dialect dialect, const std::string& body) {
  const auto call = read_call_body(dialect, body, false);
  REQUIRE_FALSE(call.ok());
  CHECK(call.status().code() == StatusCode::invalid_argument);
  return call.status().message();
}

}  // namespace

TEST_CASE("A text call reads as it always did: the user's text is the page") {
  const std::string body = R"({"model":"m","max_tokens":240,"messages":[)"
                           R"({"role":"system","content":"Extract the text."},)"
                           R"({"role":"user","content":"It was a bright cold day in April."}]})";
  const CallBody call = read(Dialect::openai, body);
  CHECK(call.model == "m");
  CHECK(call.max_tokens == 240);
  CHECK(call.page == "It was a bright cold day in April.");
  CHECK(call.images.empty());
  // ceil((17 + 34 bytes) / 4)
  CHECK(call.text_tokens == 13);
  CHECK(call.input_tokens() == 13);
  CHECK(read(Dialect::openai, R"({"max_tokens":1,"messages":[]})").model == "stand-in");
}

TEST_CASE("An image part in each dialect: sized, billed by the dialect's rule, digested") {
  for (const Dialect dialect : {Dialect::openai, Dialect::anthropic}) {
    CAPTURE(fairlane::to_string(dialect));
    const CallBody call = read(
        dialect, body_with(dialect, json::array{text_part("Page 7."),
                                                image_part(dialect, "image/png", kPng300x200)}));
    REQUIRE(call.images.size() == 1);
    const auto& image = call.images[0];
    CHECK(image.media_type == "image/png");
    CHECK(image.width == 300);
    CHECK(image.height == 200);
    CHECK(image.sha256_hex == kPngSha256);
    CHECK(image.in_user_message);
    CHECK(image.tokens == fairlane::image_tokens(dialect, 300, 200));
    // The text is what it was ("Read the page." and "Page 7.": 21 bytes, 6 tokens); the
    // image comes on top.
    CHECK(call.text_tokens == 6);
    CHECK(call.input_tokens() == 6 + image.tokens);
    CHECK(call.image_tokens() == image.tokens);
    CHECK(call.page == "Page 7.\nimage sha256:" + std::string(kPngSha256) + " 300x200");
  }
  // 300 x 200 is one tile for OpenAI; 60,000 / 750 for Anthropic.
  CHECK(fairlane::image_tokens(Dialect::openai, 300, 200) == 255);
  CHECK(fairlane::image_tokens(Dialect::anthropic, 300, 200) == 80);
}

TEST_CASE("A JPEG part, an image alone, and images between texts, in order") {
  for (const Dialect dialect : {Dialect::openai, Dialect::anthropic}) {
    CAPTURE(fairlane::to_string(dialect));
    const CallBody alone = read(
        dialect, body_with(dialect, json::array{image_part(dialect, "image/jpeg", kJpeg300x200)}));
    REQUIRE(alone.images.size() == 1);
    CHECK(alone.images[0].media_type == "image/jpeg");
    CHECK(alone.page == "image sha256:" + std::string(kJpegSha256) + " 300x200");

    const CallBody mixed = read(
        dialect,
        body_with(dialect,
                  json::array{text_part("one"), image_part(dialect, "image/png", kPng300x200),
                              text_part("two"), image_part(dialect, "image/jpeg", kJpeg300x200),
                              image_part(dialect, "image/png", kPng300x200)}));
    CHECK(mixed.images.size() == 3);
    CHECK(mixed.page == "one\nimage sha256:" + std::string(kPngSha256) +
                            " 300x200\ntwo\nimage sha256:" + std::string(kJpegSha256) +
                            " 300x200\nimage sha256:" + std::string(kPngSha256) + " 300x200");
    CHECK(mixed.image_tokens() == 3 * fairlane::image_tokens(dialect, 300, 200));
  }
}

TEST_CASE("A real PNG from the encoder is read the same way") {
  std::string pixels(std::size_t{64} * 40, '\x80');
  const auto png = fairlane::encode_png(
      fairlane::GrayPixels{reinterpret_cast<const unsigned char*>(pixels.data()), 64, 40, 64});
  REQUIRE(png.ok());
  const CallBody call =
      read(Dialect::anthropic,
           body_with(Dialect::anthropic, json::array{anthropic_image("image/png", *png)}));
  REQUIRE(call.images.size() == 1);
  CHECK(call.images[0].width == 64);
  CHECK(call.images[0].height == 40);
  CHECK(call.images[0].sha256_hex.size() == 64);
}

TEST_CASE("An image outside the user's message is billed but is not the page") {
  json::object body{
      {"max_tokens", 10},
      {"messages",
       json::array{json::object{{"role", "assistant"},
                                {"content", json::array{openai_image("image/png", kPng300x200)}}},
                   json::object{{"role", "user"}, {"content", "text"}}}}};
  const CallBody call = read(Dialect::openai, json::serialize(body));
  REQUIRE(call.images.size() == 1);
  CHECK_FALSE(call.images[0].in_user_message);
  CHECK(call.page == "text");
  CHECK(call.input_tokens() == 1 + 255);
}

TEST_CASE("A malformed image part is refused, naming the part and what is wrong") {
  for (const Dialect dialect : {Dialect::openai, Dialect::anthropic}) {
    CAPTURE(fairlane::to_string(dialect));
    const auto refused = [&](json::object part) {
      return refusal(dialect, body_with(dialect, json::array{text_part("t"), std::move(part)}));
    };
    // (messages[1] in openai's body, after the system message; messages[0] in anthropic's.)
    const std::string where =
        dialect == Dialect::openai ? "messages[1].content[1]" : "messages[0].content[1]";

    json::object bad_base64 = image_part(dialect, "image/png", kPng300x200);
    if (dialect == Dialect::openai) {
      bad_base64["image_url"].as_object()["url"] = "data:image/png;base64,iVBOR!w0K";
    } else {
      bad_base64["source"].as_object()["data"] = "iVBOR!w0K";
    }
    CHECK(refused(bad_base64) == where + ": the image data is not valid base64");

    CHECK(refused(image_part(dialect, "image/png", "GIF89a, not a PNG")) ==
          where + ": the image data is not a PNG or JPEG image");
    CHECK(refused(image_part(dialect, "image/png", kJpeg300x200)) ==
          where + " says image/png but the image data is image/jpeg");
    CHECK(refused(image_part(dialect, "image/jpeg", kPng300x200)) ==
          where + " says image/jpeg but the image data is image/png");
    CHECK(refused(image_part(dialect, "image/gif", kPng300x200)).find("media type 'image/gif'") !=
          std::string::npos);
    // The other dialect's image part.
    const json::object other = dialect == Dialect::openai
                                   ? anthropic_image("image/png", kPng300x200)
                                   : openai_image("image/png", kPng300x200);
    CHECK(refused(other).find(dialect == Dialect::openai
                                  ? "has the type 'image'"
                                  : "has the type 'image_url'") != std::string::npos);
    CHECK(refused(json::object{{"type", "text"}}) == where + " is a text part without text");
    CHECK(refused(json::object{{"text", "no type"}}) == where + " needs a type");
  }
}

TEST_CASE("The stand-in fetches no URL: only base64 data is taken") {
  const std::string openai =
      refusal(Dialect::openai,
              body_with(Dialect::openai,
                        json::array{json::object{
                            {"type", "image_url"},
                            {"image_url", json::object{{"url", "https://example.com/p.png"}}}}}));
  CHECK(openai.find("not a base64 data URL") != std::string::npos);
  CHECK(refusal(Dialect::openai,
                body_with(Dialect::openai, json::array{json::object{{"type", "image_url"}}}))
            .find("needs image_url.url") != std::string::npos);
  const std::string anthropic = refusal(
      Dialect::anthropic,
      body_with(
          Dialect::anthropic,
          json::array{json::object{
              {"type", "image"},
              {"source", json::object{{"type", "url"}, {"url", "https://example.com/p.png"}}}}}));
  CHECK(anthropic.find("needs a source of type base64") != std::string::npos);
  json::object no_data = anthropic_image("image/png", kPng300x200);
  no_data["source"].as_object().erase("data");
  CHECK(refusal(Dialect::anthropic, body_with(Dialect::anthropic, json::array{no_data}))
            .find("needs source.media_type and source.data") != std::string::npos);
}

TEST_CASE("A body that is not a call is refused as before, and content must be text or parts") {
  for (const std::string_view body :
       {R"(not json)", R"([])", R"({"messages":[]})", R"({"max_tokens":0,"messages":[]})",
        R"({"max_tokens":5,"messages":{}})"}) {
    CAPTURE(body);
    CHECK(refusal(Dialect::openai, std::string(body)) ==
          "the body needs max_tokens (at least 1) and a list of messages");
  }
  CHECK(
      refusal(Dialect::anthropic, R"({"max_tokens":5,"messages":[{"role":"user","content":7}]})") ==
      "messages[0].content must be a string or a list of parts");
  CHECK(refusal(Dialect::anthropic,
                R"({"max_tokens":5,"messages":[{"role":"user","content":[7]}]})") ==
        "messages[0].content[0] needs a type");
}
