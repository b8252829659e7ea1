#include "fairlane/core/limit.hpp"

namespace fairlane {

std::string_view to_string(Limit limit) {
  switch (limit) {
    case Limit::requests:
      return "requests";
    case Limit::concurrency:
      return "concurrency";
    case Limit::tokens:
      return "tokens";
  }
  return "unknown";
}

}  // namespace fairlane
