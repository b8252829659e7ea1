#include "fairlane/core/status.hpp"

namespace fairlane {

std::string_view to_string(StatusCode code) {
  switch (code) {
    case StatusCode::ok:
      return "ok";
    case StatusCode::invalid_argument:
      return "invalid_argument";
    case StatusCode::payload_too_large:
      return "payload_too_large";
    case StatusCode::not_found:
      return "not_found";
    case StatusCode::already_exists:
      return "already_exists";
    case StatusCode::busy:
      return "busy";
    case StatusCode::disk_full:
      return "disk_full";
    case StatusCode::read_only:
      return "read_only";
    case StatusCode::corrupt:
      return "corrupt";
    case StatusCode::version_too_new:
      return "version_too_new";
    case StatusCode::io_error:
      return "io_error";
    case StatusCode::outcome_unknown:
      return "outcome_unknown";
    case StatusCode::fenced:
      return "fenced";
    case StatusCode::unavailable:
      return "unavailable";
    case StatusCode::internal:
      return "internal";
  }
  return "unknown";
}

}  // namespace fairlane
