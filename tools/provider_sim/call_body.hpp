// CallBody: what the provider stand-in reads from a call's JSON body, in either dialect:
// the model, max_tokens, the text it counts, and each image part, checked, sized from its
// header and digested. Pure (no sockets, no Beast), so its checks and its billing are
// unit-tested directly; the server (provider_sim.cpp) answers a refusal with 400.
//
// A message's content is a string, or a list of parts: {"type":"text","text":...} in both
// dialects, and an image, openai {"type":"image_url","image_url":{"url":"data:image/png;
// base64,..."}} or anthropic {"type":"image","source":{"type":"base64","media_type":
// "image/png","data":...}}. An image must be a PNG or a JPEG whose bytes are what its media
// type says; the stand-in fetches no URL.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fairlane/core/result.hpp"
#include "fairlane/provider/provider.hpp"

namespace fairlane::provider_sim {

struct ImagePart {
  std::string media_type;  // "image/png" or "image/jpeg", as the bytes say
  std::int64_t width = 0;  // pixels, from the header
  std::int64_t height = 0;
  std::int64_t tokens = 0;  // the dialect's published rule (image_tokens)
  std::string sha256_hex;   // of the decoded bytes, lower-case
  bool in_user_message = false;
};

struct CallBody {
  std::string model;  // "stand-in" when the body names none
  std::int64_t max_tokens = 0;
  std::int64_t text_tokens = 0;   // every message's text and the system prompt
  std::vector<ImagePart> images;  // every image part, in the order sent
  // The page: the user messages' text parts as sent, and after each image of theirs, on a
  // line of its own, "image sha256:<hex> <width>x<height>". The stand-in answers with it
  // and counts calls by it (GET /stats/calls). A text-only body's page is its user text.
  std::string page;

  // Text and images: what the call is billed as input.
  [[nodiscard]] std::int64_t input_tokens() const;
  [[nodiscard]] std::int64_t image_tokens() const;
};

// The body of a call in `dialect`, its text counted as count_input_tokens does. An
// invalid_argument Status for anything malformed, its message naming the part and what is
// wrong (the stand-in's 400 says it).
[[nodiscard]] Result<CallBody> read_call_body(Dialect dialect, std::string_view body,
                                              bool cjk_tokens);

// The line an image gets in the page (and in the answer): "image sha256:<hex> <w>x<h>".
[[nodiscard]] std::string image_line(const ImagePart& image);

}  // namespace fairlane::provider_sim
