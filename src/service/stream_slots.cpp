#include "service/stream_slots.hpp"

namespace fairlane::service {

std::shared_ptr<const void> StreamSlots::take(UserId user) {
  std::size_t& count = (*open_)[user];
  if (count >= per_user_) {
    if (count == 0) open_->erase(user);
    return nullptr;
  }
  ++count;
  // The handle owns nothing; its deleter gives the slot back, if the counts still exist.
  return {static_cast<const void*>(this),
          [weak = std::weak_ptr<std::map<UserId, std::size_t>>(open_), user](const void*) {
            const auto counts = weak.lock();
            if (!counts) return;
            const auto it = counts->find(user);
            if (it != counts->end() && --it->second == 0) counts->erase(it);
          }};
}

std::size_t StreamSlots::open(UserId user) const {
  const auto it = open_->find(user);
  return it == open_->end() ? 0 : it->second;
}

}  // namespace fairlane::service
