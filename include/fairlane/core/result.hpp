// Result<T>: a T, or the Status that explains why there is none. Check ok() before
// value(); value() on an error is a bug (asserted).
//
// Thread safety: a value type, like T.
#pragma once

#include <cassert>
#include <utility>
#include <variant>

#include "fairlane/core/status.hpp"

namespace fairlane {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : value_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(value_).ok() && "a Result needs a value or an error");
  }

  [[nodiscard]] bool ok() const { return std::holds_alternative<T>(value_); }

  // The error; an ok Status when there is a value.
  [[nodiscard]] const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(value_);
  }

  [[nodiscard]] T& value() & {
    assert(ok());
    return std::get<T>(value_);
  }
  [[nodiscard]] const T& value() const& {
    assert(ok());
    return std::get<T>(value_);
  }
  // By value, so that `for (auto& x : f().value())` does not dangle.
  [[nodiscard]] T value() && {
    assert(ok());
    return std::get<T>(std::move(value_));
  }

  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> value_;
};

}  // namespace fairlane
