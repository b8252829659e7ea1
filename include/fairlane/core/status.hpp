// Status: the outcome of an operation that can fail, as a value. ok() or a code with a
// human sentence that names the problem and the remedy. Nothing in fairlane's core or store
// throws across its API; the edges (main, HTTP handlers) turn a Status into an exit code or
// an HTTP status, each in one table.
//
// Thread safety: a value type; distinct objects may be used from any threads.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace fairlane {

enum class StatusCode {
  ok,
  invalid_argument,   // the caller's input is wrong; retrying the same input will not help
  payload_too_large,  // the input is over a configured limit (pages, bytes): split it
  not_found,          // no such user, job or page (or not the caller's)
  already_exists,     // a unique name is taken
  busy,               // the database is locked by another process; retry later
  disk_full,          // no space left for the database; free space, then retry
  read_only,          // the database file or its directory cannot be written
  corrupt,            // the file is not a fairlane database, or is damaged
  version_too_new,    // the database was written by a newer fairlane
  io_error,           // the operating system failed a read, write or sync
  outcome_unknown,    // the connection broke while a write was out: it may or may not be stored
  fenced,             // this instance no longer leads the cluster: its writes change nothing
  unavailable,        // something the service runs failed on its side, not the input's; retry
  internal,           // a bug or an unexpected library error
};

// "invalid_argument", "disk_full", ...: stable names for logs, metrics and tests.
[[nodiscard]] std::string_view to_string(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  [[nodiscard]] bool ok() const { return code_ == StatusCode::ok; }
  [[nodiscard]] StatusCode code() const { return code_; }
  // The sentence for a person: what went wrong and what to do. Empty when ok.
  [[nodiscard]] const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
};

}  // namespace fairlane
