#include "service/quota.hpp"

#include <algorithm>

namespace fairlane::service {

Quota::Quota(std::size_t max, std::size_t per_user)
    : max_(max),
      per_user_(per_user > 0 ? std::min(per_user, max_) : std::max<std::size_t>(1, max_ / 2)) {}

std::size_t Quota::taken_by(UserId user) const {
  const auto it = counts_->by_user.find(user);
  return it == counts_->by_user.end() ? 0 : it->second;
}

bool Quota::available(UserId user, std::size_t amount) const {
  if (amount > max_ - counts_->all) return false;
  return user == 0 || amount <= per_user_ - std::min(per_user_, taken_by(user));
}

std::shared_ptr<const void> Quota::take(UserId user, std::size_t amount) {
  if (!available(user, amount)) return nullptr;
  if (amount == 0) return {static_cast<const void*>(this), [](const void*) {}};  // holds nothing
  counts_->all += amount;
  if (user != 0) counts_->by_user[user] += amount;
  return {static_cast<const void*>(this),
          [weak = std::weak_ptr<Counts>(counts_), user, amount](const void*) {
            const auto counts = weak.lock();
            if (!counts) return;
            counts->all -= amount;
            if (user == 0) return;
            if (const auto it = counts->by_user.find(user); (it->second -= amount) == 0) {
              counts->by_user.erase(it);
            }
          }};
}

}  // namespace fairlane::service
