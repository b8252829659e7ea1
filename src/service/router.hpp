// Router: the HTTP API of DESIGN.md section 7 as a function from a parsed request to a
// response, over the store and the dispatcher. No sockets here: the HTTP server reads a
// request, calls handle(), and writes what it returns; tests call handle() directly.
//
// Two answers need the server's help. A PDF or multipart upload is authorised here, read
// by the server on a worker thread (read_document), and answered by finish_upload(). The
// live events (GET /v1/jobs/{id}/events) are a response the server streams: handle()
// answers with an EventStream, and the server renders job_event() each time the router's
// watchers are woken (the router wakes them on every committed change and every upload or
// cancel).
//
// Thread safety: the io_context's thread, like the store and the dispatcher.
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "fairlane/pdf_reader.hpp"
#include "fairlane/result.hpp"
#include "fairlane/store.hpp"
#include "service/dispatcher.hpp"
#include "service/metrics.hpp"
#include "service/watchers.hpp"
#include "store/crypto.hpp"

namespace fairlane::service {

struct ApiRequest {
  std::string method;  // "GET", "POST", "DELETE"
  std::string target;  // path and query, e.g. "/v1/estimate?pages=10"
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  [[nodiscard]] std::optional<std::string> header(std::string_view name) const;
};

// A job's live events, for the server to stream (text/event-stream).
struct EventStream {
  UserId user = 0;
  JobId job = 0;
};

// An upload's who and how, whatever its format.
struct Upload {
  UserId user = 0;
  std::int64_t weight = 1;
  std::string name;             // the job's name
  bool name_given = false;      // false: a multipart part's filename may name it
  std::int64_t max_tokens = 0;  // output tokens per page
  std::optional<std::string> idempotency_key;
};

// An upload of a document (a PDF, raw or as the `file` part of a multipart body) that the
// router has authorised but not read: the server reads it with read_document() on a worker
// thread, off the io thread, and gives the outcome to Router::finish_upload().
struct DocumentUpload {
  Upload upload;
  std::string content_type;
  std::string body;
};

// What a document held: the multipart part's file name (empty for a raw PDF) and the text
// of each page.
struct Document {
  std::string filename;
  std::vector<std::string> pages;
};

// The /ui page: samples/web/index.html, compiled in.
[[nodiscard]] std::string_view ui_page();

// How uploaded PDFs are read.
struct DocumentReading {
  // The child process that reads them (`fairlane read-pdf`, under limits of CPU, memory and
  // time); with no command, they are read in this process (tests that have no binary).
  PdfReaderOptions reader;
  std::int64_t max_pages = 10'000;  // more: refused before any text is read
};

// Reads an uploaded document: the multipart part, then the PDF's pages (poppler, in the
// reader's child process when there is one, registered with `processes`). Safe on any
// thread; invalid_argument with the sentence for the client when it cannot be read.
[[nodiscard]] Result<Document> read_document(std::string_view content_type, std::string body,
                                             const DocumentReading& reading = {},
                                             ReaderProcesses* processes = nullptr);

struct ApiResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::optional<EventStream> events;  // set: stream job_event() instead of the body
  // Set: read the document (read_document), then answer with finish_upload().
  std::optional<DocumentUpload> document;
};

// One event of a stream: the job object as JSON, and whether the job has ended (the
// stream's last event).
struct JobEvent {
  std::string data;
  bool ended = false;
};

struct RouterConfig {
  std::string admin_key;            // empty: no admin (POST /v1/users, /metrics are refused)
  std::string prompt;               // the instruction sent with every page (for the estimate)
  std::int64_t max_tokens = 1'000;  // output tokens per page when an upload does not say
  std::int64_t max_pages = 10'000;  // pages in one upload
  std::int64_t max_page_bytes =
      std::int64_t{64} * 1024;  // bytes of text in one page (JSON, or a PDF's)
};

// Who sent a request, once its key was checked: the admin, or a user.
struct Caller {
  bool admin = false;
  User user;  // when !admin
};

class Router {
 public:
  // `store` and `dispatcher` must outlive the router. The router takes the dispatcher's
  // on_job_changed (and gives it back when destroyed) to wake its watchers.
  Router(Store& store, Dispatcher& dispatcher, RouterConfig config);
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // By value: an upload's body (up to the body limit) moves through, it is not copied.
  ApiResponse handle(ApiRequest request);

  // The answer to a document upload once read_document() has read it (or failed to).
  ApiResponse finish_upload(const Upload& upload, Result<Document> document);

  // The job of a stream as it stands now; nullopt when it cannot be read (the stream ends).
  [[nodiscard]] std::optional<JobEvent> job_event(const EventStream& stream);

  // Who waits for the next change.
  [[nodiscard]] Watchers& watchers() { return watchers_; }

  // The tokens a page will reserve: ceil(bytes of prompt and text / 4) + max_tokens.
  [[nodiscard]] std::int64_t estimate_tokens(std::string_view page_text,
                                             std::int64_t max_tokens) const;

 private:
  // The job object of the API, with its position and ETA now.
  [[nodiscard]] boost::json::object job_object(const JobView& job) const;
  // GET /v1/queue: lanes, pages, the rate, the binding limit, the buckets, the pause; for
  // the admin also every lane with work, by user.
  ApiResponse queue(bool with_lanes);
  // Who the request's key belongs to, or the 401 to answer. `ui`: the key may also come as
  // HTTP Basic credentials (a browser's navigation to /ui cannot send a Bearer header).
  std::variant<Caller, ApiResponse> authenticate(const ApiRequest& request, bool ui);
  // Whether `key` is the admin's, in time that does not depend on where it differs.
  [[nodiscard]] bool is_admin_key(std::string_view key) const;
  // 202 with the job and its Location.
  ApiResponse accepted(const JobView& job);
  // The first job of a retried upload (same Idempotency-Key), or nullopt.
  std::optional<ApiResponse> uploaded_before(const Upload& upload);
  // The pages' tokens, the door, the store, the dispatcher; the answer.
  ApiResponse enqueue(const Upload& upload, std::vector<std::string> texts);

  Store& store_;
  Dispatcher& dispatcher_;
  RefusalCounts door_refusals_;
  Watchers watchers_;
  const RouterConfig config_;
  // The admin key's SHA-256 (empty without one): keys are compared as digests, so the
  // compare takes the same time whatever the key's length.
  std::optional<store::Sha256> admin_digest_;
};

}  // namespace fairlane::service
