// The API's vocabulary between the transport and the routes (DESIGN.md section 7): a request
// as the transport read it, the response it writes, who sent it, and the few helpers every
// route builds its answers with. No sockets here, and no business rules.
//
// Thread safety: plain values; the helpers are pure.
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fairlane/core/clock.hpp"
#include "fairlane/core/ids.hpp"
#include "fairlane/core/text.hpp"
#include "fairlane/store/job.hpp"
#include "fairlane/store/store.hpp"
#include "service/api_json.hpp"

namespace fairlane {
class Store;
}

namespace fairlane::service {

struct StoreRead;

struct ApiRequest {
  std::string method;  // "GET", "POST", "DELETE"
  std::string target;  // path and query, e.g. "/v1/estimate?pages=10"
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // empty until the transport has read it (after admission)
  // The body's size as the transport's HTTP parser read the headers: the Content-Length, 0
  // without a body, or nullopt when chunked (its size unknown until read) or not read by a
  // parser (a request built whole, whose Content-Length header is then read).
  std::optional<std::uint64_t> announced_bytes = std::nullopt;
  // A HEAD, which the transport routes as the GET it asks about (`method` "GET"): answered
  // with that GET's status and headers, and no body; it opens no event stream.
  bool head_only = false;
  [[nodiscard]] std::optional<std::string> header(std::string_view name) const;
};

// A job's live events, for the transport to stream (text/event-stream).
struct EventStream {
  UserId user = 0;
  JobId job = 0;
  std::shared_ptr<const void> slot;  // the user's stream slot (StreamSlots), held while it runs
};

// An upload's who and how, whatever its format.
struct Upload {
  UserId user = 0;
  std::int64_t weight = 1;
  std::string name;             // the job's name
  bool name_given = false;      // false: a multipart part's filename or the JSON's name may name it
  std::int64_t max_tokens = 0;  // output tokens per page
  std::optional<std::string> idempotency_key;
  // What the upload is, kept with its job for the key (KeyedJob): its media type and
  // Content-Length, from the headers (std::nullopt when chunked), and once its body is read,
  // the SHA-256 of what it held (Document::digest).
  std::optional<std::string> head = std::nullopt;
  std::optional<std::string> digest = std::nullopt;
  bool max_tokens_given = false;  // false: max_tokens is the service's (--max-tokens)
};

// An upload whose body is read off the io thread (a PDF, raw or as the `file` part of a
// multipart body, or pages as JSON): the transport gives it to read_upload() on a worker
// and the outcome to Router::finish_upload().
struct DocumentUpload {
  Upload upload;
  std::string content_type;
  std::string body;
  std::int64_t default_max_tokens = 0;  // the service's, named when a JSON's is refused
  // Its reading slot (Quota), to hold on the io thread until the read has ended.
  std::shared_ptr<const void> slot;
};

// An accepted upload whose answer waits out its promise window (PromiseWindow): after
// `wait`, the transport answers with Router::close_promise(hold).
struct PromiseHold {
  JobId job = 0;
  Clock::duration wait{};
  // The job as committed, with the door's promise: its 202 if it cannot be read again then.
  JobView committed{};
};

struct ApiResponse {
  int status = 200;
  std::string content_type = "application/json";  // empty: no body (204)
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Set: a failure on the service's side, answered in the caller's terms; this is what it
  // really was (ApiAnswer::detail), for the operator's log. Never sent.
  std::string log;
  std::optional<EventStream> events;  // set: stream the job's events instead of the body
  // Set: read the upload's body (read_upload), then answer with Router::finish_upload().
  std::optional<DocumentUpload> document;
  // Set: the upload was accepted and committed; its 202 waits for its promise window.
  std::optional<PromiseHold> promise_hold;
  // Set: the answer needs the store read first, off the io thread (StoreRead).
  std::shared_ptr<const StoreRead> read;
};

// A request whose store reads go off the io thread, on a server database (StoreReaders):
// the transport runs `read` on a reader, with a connection of its own, and answers with what
// the function it returns makes, called back on the io thread (where the dispatcher's
// positions and ETAs live).
struct StoreRead {
  std::function<std::function<ApiResponse()>(Store&)> read;
};

// Who sent a request, once its key was checked: the admin, or a user; and what its headers
// were granted before its body is read.
struct Caller {
  bool admin = false;
  User user;  // when !admin
  // An upload's place among those on their way, with its body's bytes (Quota), from its
  // headers; the transport holds it until its body (and a document's pages) has been read.
  // Null for any other request.
  std::shared_ptr<const void> on_its_way = nullptr;
};

// "multipart/form-data" of "Multipart/Form-Data; boundary=x": lower case, no parameters.
[[nodiscard]] std::string media_type(std::string_view content_type);

// A whole decimal number and nothing else, or nullopt.
[[nodiscard]] std::optional<std::int64_t> whole_number(std::string_view text);

[[nodiscard]] ApiResponse json_response(int status, const boost::json::object& body);
[[nodiscard]] ApiResponse error_response(int status, std::string_view type,
                                         std::string_view message);
// 405 method_not_allowed for `method` on the resource at `path`, which takes `allow` (as
// its Allow header says them: "GET, HEAD").
[[nodiscard]] ApiResponse method_not_allowed(std::string_view method, std::string_view path,
                                             std::string_view allow);
// An ApiAnswer (api_json.hpp) as a response, with its Retry-After.
[[nodiscard]] ApiResponse response_for(const ApiAnswer& answer);

}  // namespace fairlane::service
