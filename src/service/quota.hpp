// Quota: a cap on what the uploads on their way hold at once (reading slots, bytes of
// bodies), of which one user may hold at most a share, so that one user's uploads (a shelf of
// slow PDFs, a few huge bodies) cannot take it all from the others. What is taken is held
// until the handle take() returned goes; handles may outlive the Quota.
//
// Thread safety: the io_context's thread.
#pragma once

#include <cstddef>
#include <memory>
#include <unordered_map>

#include "fairlane/core/ids.hpp"

namespace fairlane::service {

class Quota {
 public:
  // `per_user` 0: half of max (at least 1); past max: max.
  explicit Quota(std::size_t max, std::size_t per_user = 0);
  // `amount` held until the handle goes, or nullptr when it would take the whole past max,
  // or `user`'s past their share (user 0: counted only in the whole).
  [[nodiscard]] std::shared_ptr<const void> take(UserId user = 0, std::size_t amount = 1);
  // Whether take(user, amount) would give it now (nothing is taken).
  [[nodiscard]] bool available(UserId user = 0, std::size_t amount = 1) const;
  [[nodiscard]] std::size_t taken() const { return counts_->all; }
  [[nodiscard]] std::size_t taken_by(UserId user) const;
  [[nodiscard]] std::size_t max() const { return max_; }
  [[nodiscard]] std::size_t per_user() const { return per_user_; }

 private:
  struct Counts {
    std::size_t all = 0;
    std::unordered_map<UserId, std::size_t> by_user;  // users holding any
  };
  const std::size_t max_;
  const std::size_t per_user_;
  std::shared_ptr<Counts> counts_ = std::make_shared<Counts>();
};

}  // namespace fairlane::service
