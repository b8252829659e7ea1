// Authenticator: who a request's key belongs to, from its headers alone (so that no body is
// read for a caller without a key). The admin's key comes from the configuration and is
// compared as a SHA-256 digest in constant time; a user's is found by its digest in the
// store. See docs/reliability.md, "Security". A key found may be remembered for a while
// (key_memory) so that a request costs no store read on a server database: keys are never
// taken back, and a changed weight shows when the memory of it ends.
//
// Thread safety: the io_context's thread, like the store.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>

#include "fairlane/core/clock.hpp"

#include "fairlane/store/store.hpp"
#include "service/api.hpp"

namespace fairlane::service {

class Authenticator {
 public:
  // `store` (and `clock`) must outlive it. An empty admin key: no key is the admin's. A user
  // found by a key is taken as found for `key_memory` on `clock` (zero: asked every time).
  Authenticator(Store& store, std::string_view admin_key,
                Clock::duration key_memory = Clock::duration::zero(), const Clock* clock = nullptr);

  // The caller, or the 401 to answer (or the store's error). `ui`: the key may also come as
  // HTTP Basic credentials (a browser's navigation to /ui cannot send a Bearer header).
  [[nodiscard]] std::variant<Caller, ApiResponse> authenticate(const ApiRequest& request,
                                                               bool ui) const;

 private:
  // Whether `key` is the admin's, in time that does not depend on where it differs.
  [[nodiscard]] bool is_admin_key(std::string_view key) const;

  // A user found by its key's digest, remembered until `until`.
  struct Known {
    User user;
    Clock::time_point until;
  };
  // The user whose key has this digest, from memory while it lasts, else from the store.
  [[nodiscard]] Result<User> find(std::string_view key) const;

  Store& store_;
  const Clock::duration key_memory_;
  const Clock* clock_;
  // By the key's SHA-256; at most 100,000, forgotten all at once past that.
  mutable std::unordered_map<std::string, Known> known_;
  // The admin key's SHA-256 (none without one): compared as digests, the compare takes the
  // same time whatever the key's length.
  std::optional<std::array<unsigned char, 32>> admin_digest_;
};

}  // namespace fairlane::service
