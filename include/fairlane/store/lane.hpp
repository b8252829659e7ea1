// Lane: one user's queued pages in dispatch order, as the store hands them to the
// scheduler at start. Only ids and sizes: page texts stay in SQLite until dispatch.
//
// Thread safety: value types.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "fairlane/core/ids.hpp"

namespace fairlane {

struct LanePage {
  PageId page_id = 0;
  JobId job_id = 0;
  std::int64_t estimated_tokens = 0;   // the TPM reservation for its call
  std::optional<WallTime> not_before;  // a backoff still running at load time
  std::int64_t attempts = 0;           // failed attempts so far, against max_attempts
};

struct Lane {
  UserId user_id = 0;
  std::int64_t weight = 1;
  std::vector<LanePage> pages;  // head first
};

}  // namespace fairlane
