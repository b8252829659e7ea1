// StreamSlots: how many live-event streams each user holds open, and the cap on them. A
// route takes a slot when it grants a stream; the slot is given back when the last copy of
// its handle goes (the stream ended, the client left, the server stopped).
//
// Thread safety: the io_context's thread.
#pragma once

#include <cstddef>
#include <map>
#include <memory>

#include "fairlane/core/ids.hpp"

namespace fairlane::service {

class StreamSlots {
 public:
  explicit StreamSlots(std::size_t per_user) : per_user_(per_user) {}

  // A slot for one more stream of `user`, held until the handle goes; nullptr when the user
  // holds `per_user` already. Handles may outlive this object.
  [[nodiscard]] std::shared_ptr<const void> take(UserId user);

  [[nodiscard]] std::size_t open(UserId user) const;
  [[nodiscard]] std::size_t per_user() const { return per_user_; }

 private:
  const std::size_t per_user_;
  // Shared with the handles, whose release counts down here.
  std::shared_ptr<std::map<UserId, std::size_t>> open_ =
      std::make_shared<std::map<UserId, std::size_t>>();
};

}  // namespace fairlane::service
