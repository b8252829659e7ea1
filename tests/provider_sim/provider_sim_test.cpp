// The stand-in's server with image parts, on loopback: the answer carries each image's
// digest, the usage bills it by the dialect's rule, GET /stats counts it, and a malformed
// part gets a 400 in the dialect's error format. The provider client sends no images, so a
// plain HTTP client (the command line's) posts the bodies, on a thread of its own while
// the test's thread runs the stand-in's io_context.
#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "cli/http_client.hpp"
#include "fairlane/core/base64.hpp"
#include "fairlane/document/image.hpp"
#include "fairlane/provider/image_tokens.hpp"
#include "provider_sim.hpp"
#include "store/crypto.hpp"

using namespace std::chrono_literals;
using fairlane::Dialect;
namespace json = boost::json;
namespace sim = fairlane::provider_sim;

namespace {

struct Rig {
  Rig() : server(io, quick()) {
    auto port = server.listen("127.0.0.1", 0);
    REQUIRE(port.ok());
    client = std::make_unique<fairlane::cli::HttpClient>(
        "http://127.0.0.1:" + std::to_string(port.value()), "", 10s);
  }

  static sim::Config quick() {
    sim::Config config;
    config.latency_ms = 5;
    return config;
  }

  // POSTs `body` to `path` and runs the stand-in until the answer is back.
  fairlane::cli::HttpReply post_to(std::string path, std::string body) {
    auto reply = std::async(std::launch::async, [&] {
      return client->post(path, "application/json", std::move(body));
    });
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (reply.wait_for(0s) != std::future_status::ready &&
           std::chrono::steady_clock::now() < deadline) {
      io.run_for(5ms);
    }
    REQUIRE(reply.wait_for(0s) == std::future_status::ready);
    auto got = reply.get();
    REQUIRE_MESSAGE(got.ok(), got.status().message());
    return std::move(got).value();
  }

  // POSTs a call to the dialect's path.
  fairlane::cli::HttpReply post(Dialect dialect, std::string body) {
    return post_to(dialect == Dialect::openai ? "/v1/chat/completions" : "/v1/messages",
                   std::move(body));
  }

  json::object stats() const { return json::parse(server.stats_json()).as_object(); }

  boost::asio::io_context io;
  sim::Server server;
  std::unique_ptr<fairlane::cli::HttpClient> client;  // used by one thread at a time
};

std::string hex_sha256(std::string_view bytes) {
  const auto digest = fairlane::store::sha256(bytes);
  REQUIRE(digest.has_value());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (const unsigned char byte : *digest) {
    hex.push_back(kHex[byte >> 4]);
    hex.push_back(kHex[byte & 0x0f]);
  }
  return hex;
}

// A page rendered as a small gray PNG, `shade` making each one different.
std::string page_png(std::int64_t width, std::int64_t height, unsigned char shade) {
  std::string pixels(static_cast<std::size_t>(width * height), static_cast<char>(shade));
  const auto png = fairlane::encode_png(
      fairlane::GrayPixels{reinterpret_cast<const unsigned char*>(pixels.data()), width, height,
                           static_cast<std::size_t>(width)});
  REQUIRE(png.ok());
  return *png;
}

// A call with the prompt and one user message: "Page N." and the image.
std::string image_call(Dialect dialect, std::string_view text, std::string_view png) {
  const std::string data = fairlane::base64_encode(png);
  json::object image =
      dialect == Dialect::openai
          ? json::object{{"type", "image_url"},
                         {"image_url", json::object{{"url", "data:image/png;base64," + data}}}}
          : json::object{
                {"type", "image"},
                {"source",
                 json::object{{"type", "base64"}, {"media_type", "image/png"}, {"data", data}}}};
  json::array messages;
  json::object body{{"model", "m"}, {"max_tokens", 50}};
  if (dialect == Dialect::openai) {
    messages.push_back(json::object{{"role", "system"}, {"content", "Read the page."}});
  } else {
    body["system"] = "Read the page.";
  }
  messages.push_back(json::object{
      {"role", "user"},
      {"content", json::array{json::object{{"type", "text"}, {"text", text}}, std::move(image)}}});
  body["messages"] = std::move(messages);
  return json::serialize(body);
}

// The answer's text and its input tokens, in either dialect.
std::pair<std::string, std::int64_t> answer_of(Dialect dialect, const std::string& body) {
  const json::object answer = json::parse(body).as_object();
  if (dialect == Dialect::openai) {
    return {std::string(answer.at("choices").at(0).at("message").at("content").as_string()),
            answer.at("usage").at("prompt_tokens").as_int64()};
  }
  return {std::string(answer.at("content").at(0).at("text").as_string()),
          answer.at("usage").at("input_tokens").as_int64()};
}

}  // namespace

TEST_CASE("The stand-in answers an image page with its digest and bills it by the dialect") {
  for (const Dialect dialect : {Dialect::openai, Dialect::anthropic}) {
    CAPTURE(fairlane::to_string(dialect));
    Rig rig;
    // Two pages: 1200 x 1600 and 400 x 300, each a different image.
    const std::string first = page_png(1200, 1600, 200);
    const std::string second = page_png(400, 300, 90);
    const auto one = rig.post(dialect, image_call(dialect, "Page 1.", first));
    const auto two = rig.post(dialect, image_call(dialect, "Page 2.", second));
    REQUIRE(one.status == 200);
    REQUIRE(two.status == 200);
    const auto [one_text, one_input] = answer_of(dialect, one.body);
    const auto [two_text, two_input] = answer_of(dialect, two.body);
    CHECK(one_text == "Page 1.\nimage sha256:" + hex_sha256(first) + " 1200x1600");
    CHECK(two_text == "Page 2.\nimage sha256:" + hex_sha256(second) + " 400x300");
    // "Read the page." and "Page 1.": 21 bytes, 6 tokens of text, then the image.
    const std::int64_t one_image = fairlane::image_tokens(dialect, 1200, 1600);
    const std::int64_t two_image = fairlane::image_tokens(dialect, 400, 300);
    CHECK(one_input == 6 + one_image);
    CHECK(two_input == 6 + two_image);

    const json::object stats = rig.stats();
    CHECK(stats.at("ok") == 2);
    CHECK(stats.at("image_parts") == 2);
    CHECK(stats.at("image_tokens") == one_image + two_image);
    CHECK(stats.at("input_tokens") == one_input + two_input);
    // Each page is counted apart, by its text and its image.
    const json::array pages = json::parse(rig.server.calls_json()).at("pages").as_array();
    CHECK(pages.size() == 2);
  }
  // The rules themselves: 768 x 1024 is 2 x 2 tiles; 1176 x 1568 is 2,459 by w x h / 750.
  CHECK(fairlane::image_tokens(Dialect::openai, 1200, 1600) == 765);
  CHECK(fairlane::image_tokens(Dialect::anthropic, 1200, 1600) == 2459);
}

TEST_CASE("A malformed image part gets a 400 in the dialect's error format") {
  for (const Dialect dialect : {Dialect::openai, Dialect::anthropic}) {
    CAPTURE(fairlane::to_string(dialect));
    Rig rig;
    const std::string good = image_call(dialect, "Page 1.", page_png(10, 10, 0));
    // Bad base64, bytes that are no image, and a PNG that says it is a JPEG.
    std::string bad_base64 = good;
    bad_base64.replace(bad_base64.find("iVBOR"), 5, "iV*OR");
    std::string not_an_image =
        image_call(dialect, "Page 1.", "GIF89a: a GIF, say, which the stand-in does not take");
    std::string mislabelled = good;
    const std::string_view from = dialect == Dialect::openai ? "data:image/png" : "\"image/png\"";
    const std::string_view to = dialect == Dialect::openai ? "data:image/jpeg" : "\"image/jpeg\"";
    mislabelled.replace(mislabelled.find(from), from.size(), to);

    const std::string where =
        dialect == Dialect::openai ? "messages[1].content[1]" : "messages[0].content[1]";
    for (const auto& [body, message] :
         {std::pair{bad_base64, where + ": the image data is not valid base64"},
          std::pair{not_an_image, where + ": the image data is not a PNG or JPEG image"},
          std::pair{mislabelled, where + " says image/jpeg but the image data is image/png"}}) {
      const auto reply = rig.post(dialect, body);
      CHECK(reply.status == 400);
      const json::object error = json::parse(reply.body).as_object();
      CHECK(error.at("error").at("type") == "invalid_request_error");
      CHECK(error.at("error").at("message").as_string() == message);
      if (dialect == Dialect::anthropic) CHECK(error.at("type") == "error");
    }
    const json::object stats = rig.stats();
    CHECK(stats.at("bad_requests") == 3);
    CHECK(stats.at("requests") == 0);
    CHECK(stats.at("image_parts") == 0);
    CHECK(stats.at("image_tokens") == 0);
    // And the good one goes through.
    CHECK(rig.post(dialect, good).status == 200);
    CHECK(rig.stats().at("image_parts") == 1);
  }
}

TEST_CASE("POST /stats/reset zeroes the image counts too") {
  Rig rig;
  REQUIRE(rig.post(Dialect::openai, image_call(Dialect::openai, "p", page_png(8, 8, 1))).status ==
          200);
  CHECK(rig.stats().at("image_parts") == 1);
  CHECK(rig.post_to("/stats/reset", "").status == 200);
  CHECK(rig.stats().at("image_parts") == 0);
  CHECK(rig.stats().at("image_tokens") == 0);
}
