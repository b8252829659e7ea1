#include "fairlane/core/page_order.hpp"

#include <cassert>

namespace fairlane {

QueuedPage FairOrder::take() {
  std::optional<QueuedPage> page = scheduler_.take();
  assert(page && "take() without a page to take: peek() first");
  return *page;
}

}  // namespace fairlane
