// Reading a call's body (call_body.hpp): Boost.JSON, the image header reader and base64 of
// fairlane_document, SHA-256 from OpenSSL's libcrypto.
#include "call_body.hpp"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <array>
#include <boost/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "fairlane/core/base64.hpp"
#include "fairlane/document/image.hpp"
#include "fairlane/provider/image_tokens.hpp"
#include "provider_sim.hpp"

namespace fairlane::provider_sim {
namespace {

namespace json = boost::json;

Status bad(std::string why) {
  return {StatusCode::invalid_argument, std::move(why)};
}

std::optional<std::string> sha256_hex(std::string_view bytes) {
  std::array<unsigned char, 32> digest{};
  unsigned int size = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1 ||
      size != digest.size()) {
    return std::nullopt;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * digest.size());
  for (const unsigned char byte : digest) {
    hex.push_back(kHex[byte >> 4]);
    hex.push_back(kHex[byte & 0x0f]);
  }
  return hex;
}

// The string at `key` of `object`, or nullptr.
const json::string* string_at(const json::object& object, std::string_view key) {
  const json::value* value = object.if_contains(key);
  return value != nullptr ? value->if_string() : nullptr;
}

// An image's media type and base64 data, checked, decoded, sized and digested. `where` names
// the part in a refusal.
Result<ImagePart> read_image(Dialect dialect, std::string_view declared, std::string_view base64,
                             const std::string& where) {
  if (declared != "image/png" && declared != "image/jpeg") {
    return bad(
        fmt::format("{} has the media type '{}': the stand-in takes image/png and "
                    "image/jpeg",
                    where, declared));
  }
  const std::optional<std::string> bytes = base64_decode(base64);
  if (!bytes) return bad(fmt::format("{}: the image data is not valid base64", where));
  const std::optional<ImageHeader> header = read_image_header(*bytes);
  if (!header) return bad(fmt::format("{}: the image data is not a PNG or JPEG image", where));
  if (header->media_type != declared) {
    return bad(
        fmt::format("{} says {} but the image data is {}", where, declared, header->media_type));
  }
  std::optional<std::string> digest = sha256_hex(*bytes);
  if (!digest) return Status(StatusCode::internal, "OpenSSL failed to hash an image");
  return ImagePart{std::string(header->media_type),
                   header->width,
                   header->height,
                   fairlane::image_tokens(dialect, header->width, header->height),
                   std::move(*digest),
                   false};
}

// The image of an openai image_url part: a base64 data URL.
Result<ImagePart> read_openai_image(const json::object& part, const std::string& where) {
  const json::value* image_url = part.if_contains("image_url");
  const json::string* url = image_url != nullptr && image_url->is_object()
                                ? string_at(image_url->as_object(), "url")
                                : nullptr;
  if (url == nullptr) return bad(fmt::format("{} needs image_url.url", where));
  constexpr std::string_view kData = "data:";
  constexpr std::string_view kBase64 = ";base64,";
  const std::string_view text = *url;
  const std::size_t comma = text.find(kBase64);
  if (!text.starts_with(kData) || comma == std::string_view::npos) {
    return bad(
        fmt::format("{}: image_url.url is not a base64 data URL "
                    "(data:image/png;base64,...); the stand-in fetches no URL",
                    where));
  }
  return read_image(Dialect::openai, text.substr(kData.size(), comma - kData.size()),
                    text.substr(comma + kBase64.size()), where);
}

// The image of an anthropic image part: a base64 source.
Result<ImagePart> read_anthropic_image(const json::object& part, const std::string& where) {
  const json::value* source_value = part.if_contains("source");
  const json::object* source = source_value != nullptr ? source_value->if_object() : nullptr;
  const json::string* type = source != nullptr ? string_at(*source, "type") : nullptr;
  if (type == nullptr || *type != "base64") {
    return bad(fmt::format("{} needs a source of type base64; the stand-in fetches no URL", where));
  }
  const json::string* media_type = string_at(*source, "media_type");
  const json::string* data = string_at(*source, "data");
  if (media_type == nullptr || data == nullptr) {
    return bad(fmt::format("{} needs source.media_type and source.data", where));
  }
  return read_image(Dialect::anthropic, *media_type, *data, where);
}

// The page, written part by part: text as sent, each image's line on a line of its own.
class PageWriter {
 public:
  explicit PageWriter(std::string& page) : page_(page) {}

  void text(std::string_view text) {
    if (after_image_) page_.push_back('\n');
    after_image_ = false;
    page_ += text;
  }
  void image(const ImagePart& image) {
    if (!page_.empty() && page_.back() != '\n') page_.push_back('\n');
    page_ += image_line(image);
    after_image_ = true;
  }

 private:
  std::string& page_;
  bool after_image_ = false;  // the page ends with an image's line, without its newline
};

}  // namespace

std::int64_t CallBody::image_tokens() const {
  std::int64_t tokens = 0;
  for (const ImagePart& image : images) tokens += image.tokens;
  return tokens;
}

std::int64_t CallBody::input_tokens() const {
  return text_tokens + image_tokens();
}

std::string image_line(const ImagePart& image) {
  return fmt::format("image sha256:{} {}x{}", image.sha256_hex, image.width, image.height);
}

Result<CallBody> read_call_body(Dialect dialect, std::string_view body, bool cjk_tokens) {
  boost::system::error_code error;
  const json::value value = json::parse(body, error);
  const json::object* object = error ? nullptr : value.if_object();
  const json::value* max_tokens = object ? object->if_contains("max_tokens") : nullptr;
  const json::value* messages = object ? object->if_contains("messages") : nullptr;
  if (object == nullptr || max_tokens == nullptr || !max_tokens->is_int64() ||
      max_tokens->as_int64() < 1 || messages == nullptr || !messages->is_array()) {
    return bad("the body needs max_tokens (at least 1) and a list of messages");
  }
  CallBody call;
  call.max_tokens = max_tokens->as_int64();
  const json::string* model = string_at(*object, "model");
  call.model = model != nullptr ? std::string(*model) : "stand-in";

  std::string all_text;  // every message's text and the system prompt, for the count
  PageWriter page(call.page);
  const std::string_view image_type = dialect == Dialect::openai ? "image_url" : "image";
  const auto& list = messages->as_array();
  for (std::size_t m = 0; m < list.size(); ++m) {
    const json::object* message = list[m].if_object();
    const json::value* content = message != nullptr ? message->if_contains("content") : nullptr;
    if (content == nullptr) continue;  // counted as nothing, as it always was
    const json::string* role = string_at(*message, "role");
    const bool user = role != nullptr && *role == "user";
    if (const json::string* text = content->if_string()) {
      all_text += *text;
      if (user) page.text(*text);
      continue;
    }
    const json::array* parts = content->if_array();
    if (parts == nullptr) {
      return bad(fmt::format("messages[{}].content must be a string or a list of parts", m));
    }
    for (std::size_t p = 0; p < parts->size(); ++p) {
      const std::string where = fmt::format("messages[{}].content[{}]", m, p);
      const json::object* part = (*parts)[p].if_object();
      const json::string* type = part != nullptr ? string_at(*part, "type") : nullptr;
      if (type == nullptr) return bad(fmt::format("{} needs a type", where));
      if (*type == "text") {
        const json::string* text = string_at(*part, "text");
        if (text == nullptr) return bad(fmt::format("{} is a text part without text", where));
        all_text += *text;
        if (user) page.text(*text);
        continue;
      }
      if (*type != image_type) {
        return bad(fmt::format("{} has the type '{}'; the {} dialect takes text and {}", where,
                               std::string_view(*type), to_string(dialect), image_type));
      }
      Result<ImagePart> image = dialect == Dialect::openai ? read_openai_image(*part, where)
                                                           : read_anthropic_image(*part, where);
      if (!image.ok()) return image.status();
      image->in_user_message = user;
      if (user) page.image(*image);
      call.images.push_back(std::move(image).value());
    }
  }
  if (const json::string* system = string_at(*object, "system")) all_text += *system;
  call.text_tokens = count_input_tokens(all_text, cjk_tokens);
  return call;
}

}  // namespace fairlane::provider_sim
