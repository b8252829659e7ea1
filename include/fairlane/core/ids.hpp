// The ids fairlane's parts pass each other. Internal ids are SQLite rowids; a job's public
// id (an opaque string) is what users see.
#pragma once

#include <chrono>
#include <cstdint>

namespace fairlane {

using UserId = std::int64_t;
using JobId = std::int64_t;
using PageId = std::int64_t;

// Wall-clock time, for what is persisted and shown (created_at, finished_at, not_before).
// Waiting and budgets use the steady Clock instead.
using WallTime = std::chrono::system_clock::time_point;

}  // namespace fairlane
