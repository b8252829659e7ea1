// Authenticator: who a request's key belongs to, from its headers alone (so that no body is
// read for a caller without a key). The admin's key comes from the configuration and is
// compared as a SHA-256 digest in constant time; a user's is found by its digest in the
// store. See docs/reliability.md, "Security".
//
// Thread safety: the io_context's thread, like the store.
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <variant>

#include "fairlane/store/store.hpp"
#include "service/api.hpp"

namespace fairlane::service {

class Authenticator {
 public:
  // `store` must outlive it. An empty admin key: no key is the admin's.
  Authenticator(Store& store, std::string_view admin_key);

  // The caller, or the 401 to answer (or the store's error). `ui`: the key may also come as
  // HTTP Basic credentials (a browser's navigation to /ui cannot send a Bearer header).
  [[nodiscard]] std::variant<Caller, ApiResponse> authenticate(const ApiRequest& request,
                                                               bool ui) const;

 private:
  // Whether `key` is the admin's, in time that does not depend on where it differs.
  [[nodiscard]] bool is_admin_key(std::string_view key) const;

  Store& store_;
  // The admin key's SHA-256 (none without one): compared as digests, the compare takes the
  // same time whatever the key's length.
  std::optional<std::array<unsigned char, 32>> admin_digest_;
};

}  // namespace fairlane::service
