// The two wire formats, as pure functions: the request body and path of a call, and the
// reading of an answer or an error body. Tested without sockets.
#pragma once

#include <string>
#include <string_view>

#include "fairlane/core/result.hpp"
#include "fairlane/provider/provider.hpp"

namespace fairlane::provider {

// "/v1/chat/completions" or "/v1/messages".
[[nodiscard]] std::string_view path_of(Dialect dialect);

// The JSON body of a call.
[[nodiscard]] std::string request_body(Dialect dialect, const ProviderRequest& request);

// The answer in a 2xx body: the output (as storable_text: a NUL in it becomes U+FFFD) and
// the usage. invalid_argument, naming what is wrong, when the body is not JSON or a field is
// missing or of the wrong type.
[[nodiscard]] Result<outcome::Ok> parse_answer(Dialect dialect, std::string_view text);

// The provider's own sentence from an error body ({"error": {"message": ...}}), or the
// start of the body when it has none: at most 300 bytes, as storable_text (a NUL or a
// broken UTF-8 sequence of a raw body becomes U+FFFD), cut at a character's start.
[[nodiscard]] std::string error_detail(std::string_view body);

// The outcome for a response of `status` with `body`.
[[nodiscard]] OutcomeKind classify(Dialect dialect, int status, std::string_view body,
                                   const RateLimitHeaders& limits);

}  // namespace fairlane::provider
