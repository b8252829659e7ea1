// What every store checks of what it is asked to write, how it stores times, and how it
// makes a new user's key, so that the SQLite and PostgreSQL stores refuse the same requests
// with the same words and record the same numbers.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fairlane/core/ids.hpp"
#include "fairlane/core/result.hpp"
#include "fairlane/core/status.hpp"
#include "fairlane/store/store.hpp"
#include "store/crypto.hpp"

namespace fairlane::store {

inline constexpr std::int64_t kMaxWeight = 1000;
inline constexpr std::size_t kMaxUserNameBytes = 64;
// The most jobs one list of a user's jobs holds.
inline constexpr std::size_t kMaxListLimit = 1'000;

// Times are stored as milliseconds since the Unix epoch.
std::int64_t to_ms(WallTime t);
WallTime from_ms(std::int64_t ms);
std::optional<WallTime> from_ms(std::optional<std::int64_t> ms);

// An invalid_argument Status.
Status invalid(std::string message);

// A weight from 1 to kMaxWeight.
Status check_weight(std::int64_t weight);
// 1 to kMaxUserNameBytes letters, digits, '.', '-' or '_'.
Status check_user_name(std::string_view name);

// A list limit from 1 to kMaxListLimit.
Status check_list_limit(std::size_t limit);
// A list cursor that names none of the user's jobs (never one, or one since pruned).
Status unknown_cursor(std::string_view cursor);

// What a valid job request holds besides text pages.
struct JobShape {
  std::int64_t images = 0;
  std::int64_t blank = 0;
};
// A job needs pages, a name, max_tokens of at least 1, an idempotency key (if any) of 1 to
// kMaxIdempotencyKeyBytes bytes, no negative estimate, and an image exactly on image pages.
Result<JobShape> check_job_request(const JobRequest& request);

// A new API key ("fl_" and 64 random hex digits) and the SHA-256 the store keeps of it.
struct NewKey {
  std::string key;
  Sha256 digest;
};
Result<NewKey> new_key();

}  // namespace fairlane::store
