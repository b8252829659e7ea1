#include "store/checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <utility>

namespace fairlane::store {

std::int64_t to_ms(WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

WallTime from_ms(std::int64_t ms) {
  return WallTime(std::chrono::duration_cast<WallTime::duration>(std::chrono::milliseconds(ms)));
}

std::optional<WallTime> from_ms(std::optional<std::int64_t> ms) {
  if (!ms) return std::nullopt;
  return from_ms(*ms);
}

Status invalid(std::string message) {
  return {StatusCode::invalid_argument, std::move(message)};
}

Status check_weight(std::int64_t weight) {
  if (weight >= 1 && weight <= kMaxWeight) return {};
  return invalid(fmt::format("a weight of {} is out of range: use a whole number from 1 to {}",
                             weight, kMaxWeight));
}

Status check_user_name(std::string_view name) {
  const bool valid_chars = std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
  });
  if (!name.empty() && name.size() <= kMaxUserNameBytes && valid_chars) return {};
  return invalid(
      fmt::format("'{}' is not a valid user name: use 1 to {} letters, digits, '.', '-' or '_'",
                  name, kMaxUserNameBytes));
}

Status check_list_limit(std::size_t limit) {
  if (limit >= 1 && limit <= kMaxListLimit) return {};
  return invalid(
      fmt::format("a list of jobs takes a limit of 1 to {}, not {}", kMaxListLimit, limit));
}

Status unknown_cursor(std::string_view cursor) {
  return invalid(fmt::format(
      "'{}' is not a cursor from an earlier list of your jobs, or names a job since pruned: "
      "list your jobs again without a cursor",
      cursor));
}

Result<JobShape> check_job_request(const JobRequest& request) {
  if (request.pages.empty()) return invalid("a job needs at least one page, and this one has none");
  if (request.name.empty()) return invalid("a job needs a name");
  if (request.max_tokens < 1) {
    return invalid(fmt::format("max_tokens must be at least 1, not {}", request.max_tokens));
  }
  if (request.idempotency_key && (request.idempotency_key->empty() ||
                                  request.idempotency_key->size() > kMaxIdempotencyKeyBytes)) {
    return invalid(
        fmt::format("an idempotency key must be 1 to {} bytes long", kMaxIdempotencyKeyBytes));
  }
  JobShape shape;
  for (std::size_t i = 0; i < request.pages.size(); ++i) {
    const PageInput& page = request.pages[i];
    if (page.estimated_tokens < 0) {
      return invalid(fmt::format("page {} has a negative token estimate", i + 1));
    }
    if ((page.kind == PageKind::image) != page.image.has_value()) {
      return invalid(
          fmt::format("page {} is an image page without its image, or the reverse", i + 1));
    }
    shape.images += page.kind == PageKind::image ? 1 : 0;
    shape.blank += page.kind == PageKind::blank ? 1 : 0;
  }
  return shape;
}

Result<NewKey> new_key() {
  const auto secret = random_hex(32);
  if (!secret) return Status{StatusCode::internal, "the system's random generator failed"};
  std::string key = "fl_" + *secret;
  const auto digest = sha256(key);
  if (!digest) return Status{StatusCode::internal, "SHA-256 of the new key failed"};
  return NewKey{std::move(key), *digest};
}

}  // namespace fairlane::store
