#include "service/auth.hpp"

#include <openssl/crypto.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "store/crypto.hpp"

namespace fairlane::service {
namespace {

// The 401 for a request without a key the service knows. RFC 7235 wants the scheme in
// WWW-Authenticate: Bearer for the API, Basic for the /ui page, so that a browser asks.
ApiResponse unauthorized(bool ui, std::string_view message) {
  ApiResponse r = error_response(401, "unauthorized", message);
  r.headers.emplace_back("WWW-Authenticate", ui ? R"(Basic realm="fairlane", charset="UTF-8")"
                                                : R"(Bearer realm="fairlane")");
  return r;
}

// Standard base64 (RFC 4648, padding optional); nullopt when it is not.
std::optional<std::string> base64_decode(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  std::string out;
  out.reserve(text.size() * 3 / 4);
  std::uint32_t bits = 0;
  int count = 0;
  for (const char c : text) {
    int v = -1;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    if (c >= '0' && c <= '9') v = c - '0' + 52;
    if (c == '+') v = 62;
    if (c == '/') v = 63;
    if (v < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<std::uint32_t>(v);
    if (++count == 4) {
      out.push_back(static_cast<char>((bits >> 16) & 0xff));
      out.push_back(static_cast<char>((bits >> 8) & 0xff));
      out.push_back(static_cast<char>(bits & 0xff));
      bits = 0;
      count = 0;
    }
  }
  if (count == 1) return std::nullopt;
  if (count == 2) out.push_back(static_cast<char>((bits >> 4) & 0xff));
  if (count == 3) {
    out.push_back(static_cast<char>((bits >> 10) & 0xff));
    out.push_back(static_cast<char>((bits >> 2) & 0xff));
  }
  return out;
}

// The key in an Authorization header: "Bearer KEY", or with `basic`, "Basic" credentials
// whose password is the key (any user name). The scheme's name is case-insensitive.
std::optional<std::string> key_in(std::string_view authorization, bool basic) {
  const auto space = authorization.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view scheme = authorization.substr(0, space);
  std::string_view credentials = authorization.substr(space + 1);
  while (!credentials.empty() && credentials.front() == ' ') credentials.remove_prefix(1);
  while (!credentials.empty() && credentials.back() == ' ') credentials.remove_suffix(1);
  if (credentials.empty()) return std::nullopt;
  if (iequals(scheme, "Bearer")) return std::string(credentials);
  if (!basic || !iequals(scheme, "Basic")) return std::nullopt;
  auto decoded = base64_decode(credentials);
  if (!decoded) return std::nullopt;
  const auto colon = decoded->find(':');
  if (colon == std::string::npos || colon + 1 == decoded->size()) return std::nullopt;
  return decoded->substr(colon + 1);
}

}  // namespace

Authenticator::Authenticator(Store& store, std::string_view admin_key, Clock::duration key_memory,
                             const Clock* clock)
    : store_(store), key_memory_(key_memory), clock_(clock) {
  if (key_memory_ > Clock::duration::zero() && clock_ == nullptr) {
    throw std::invalid_argument("an Authenticator that remembers keys needs a clock");
  }
  if (admin_key.empty()) return;
  admin_digest_ = store::sha256(admin_key);
  if (!admin_digest_) throw std::runtime_error("SHA-256 of the admin key failed");
}

bool Authenticator::is_admin_key(std::string_view key) const {
  if (!admin_digest_) return false;
  const auto digest = store::sha256(key);
  return digest && CRYPTO_memcmp(digest->data(), admin_digest_->data(), digest->size()) == 0;
}

std::variant<Caller, ApiResponse> Authenticator::authenticate(const ApiRequest& request,
                                                              bool ui) const {
  const auto authorization = request.header("Authorization");
  const auto key = authorization ? key_in(*authorization, ui) : std::nullopt;
  if (!key) {
    return unauthorized(ui, ui ? "this page needs an API key: give it as the password (any "
                                 "user name)"
                               : "this needs an API key: send it as 'Authorization: Bearer <key>'");
  }
  if (is_admin_key(*key)) return Caller{true, {}};
  // Found by its SHA-256 through an index: see docs/reliability.md, "Security", for why
  // the lookup's timing tells nothing useful about any key.
  auto user = find(*key);
  if (user.ok()) return Caller{false, std::move(user).value()};
  if (user.status().code() == StatusCode::not_found) {
    return unauthorized(ui, "this API key is not known: check it, or ask for one");
  }
  return response_for(answer_for(user.status()));
}

Result<User> Authenticator::find(std::string_view key) const {
  if (key_memory_ <= Clock::duration::zero()) return store_.find_user_by_key(key);
  const auto digest = store::sha256(key);
  if (!digest) return store_.find_user_by_key(key);
  std::string id(digest->begin(), digest->end());
  const auto now = clock_->now();
  if (const auto it = known_.find(id); it != known_.end() && now < it->second.until) {
    return it->second.user;
  }
  auto user = store_.find_user_by_key(key);
  if (!user.ok()) return user;  // an unknown key is asked again: it may be added any moment
  // Bounded: a flood of distinct valid keys forgets all at once, then fills again.
  constexpr std::size_t kMaxKnown = 100'000;
  if (known_.size() >= kMaxKnown) known_.clear();
  known_.insert_or_assign(std::move(id), Known{user.value(), now + key_memory_});
  return user;
}

}  // namespace fairlane::service
