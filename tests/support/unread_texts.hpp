// A Store whose page texts cannot be read for a while: `page`'s read answers `why` the
// first `failures` times it is asked, as a lock would, or a PostgreSQL server that went away
// between a dispatch's commit and its text's read. Its reads may come from another thread
// (the dispatcher's page reader).
#pragma once

#include <atomic>
#include <memory>
#include <utility>

#include "support/forwarding_store.hpp"

namespace fairlane::testing {

class UnreadTexts final : public ForwardingStore {
 public:
  UnreadTexts(std::unique_ptr<Store> inner, PageId page, int failures, Status why)
      : ForwardingStore(std::move(inner)), page_(page), failures_(failures), why_(std::move(why)) {}

  Result<PageCall> page_call(PageId page) override {
    if (page == page_ && reads_++ < failures_) return why_;
    return ForwardingStore::page_call(page);
  }
  // How often `page`'s text was asked for.
  [[nodiscard]] int reads() const { return reads_.load(); }

 private:
  const PageId page_;
  const int failures_;
  const Status why_;
  std::atomic<int> reads_ = 0;
};

}  // namespace fairlane::testing
