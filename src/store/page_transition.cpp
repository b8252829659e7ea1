#include "fairlane/store/page_transition.hpp"

#include <utility>

namespace fairlane {

PageTransition PageTransition::dispatched(PageId page, std::int64_t reserved_tokens) {
  PageTransition t;
  t.kind = Kind::dispatched;
  t.page_id = page;
  t.reserved_tokens = reserved_tokens;
  return t;
}

PageTransition PageTransition::completed(PageId page, std::string output, Usage usage,
                                         std::int64_t call) {
  PageTransition t;
  t.call = call;
  t.kind = Kind::completed;
  t.page_id = page;
  t.output = std::move(output);
  t.usage = usage;
  return t;
}

PageTransition PageTransition::attempt_failed(PageId page, std::string error, WallTime not_before,
                                              std::int64_t call) {
  PageTransition t;
  t.call = call;
  t.kind = Kind::attempt_failed;
  t.page_id = page;
  t.error = std::move(error);
  t.not_before = not_before;
  return t;
}

PageTransition PageTransition::requeued(PageId page, std::int64_t call) {
  PageTransition t;
  t.call = call;
  t.kind = Kind::requeued;
  t.page_id = page;
  return t;
}

PageTransition PageTransition::failed(PageId page, std::string error, std::int64_t call) {
  PageTransition t;
  t.call = call;
  t.kind = Kind::failed;
  t.page_id = page;
  t.error = std::move(error);
  return t;
}

PageTransition PageTransition::job_cancelled(JobId job) {
  PageTransition t;
  t.kind = Kind::job_cancelled;
  t.job_id = job;
  return t;
}

}  // namespace fairlane
