// HttpClient: the `fairlane` client commands' side of the HTTP API, on libcurl's easy
// interface (one request at a time, which is all a command needs), and EventStreams, the
// live events of several jobs at once on libcurl's multi interface.
//
// Every request carries `Authorization: Bearer <key>`. A transport failure (nothing
// listening, a timeout) is a Status naming the URL and the remedy; any HTTP answer,
// 4xx and 5xx included, is a reply for the caller to read.
//
// Thread safety: one object per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/sse.hpp"
#include "fairlane/core/result.hpp"

namespace fairlane::cli {

struct HttpReply {
  long status = 0;
  std::string body;
  std::optional<std::int64_t> retry_after_s;  // the Retry-After header, when sent
};

class HttpClient {
 public:
  // `server`: "http://127.0.0.1:8080" (a trailing slash is dropped). `timeout` bounds a GET
  // or DELETE; a POST (an upload, up to 100 MB, then read on the service's side) gets
  // `upload_timeout`.
  HttpClient(std::string server, std::string key,
             std::chrono::milliseconds timeout = std::chrono::seconds(120),
             std::chrono::milliseconds upload_timeout = std::chrono::minutes(10));
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  Result<HttpReply> get(std::string_view path);
  Result<HttpReply> del(std::string_view path);
  // `headers`: extra "Name: value" lines.
  Result<HttpReply> post(std::string_view path, std::string_view content_type, std::string body,
                         const std::vector<std::string>& headers = {});
  // The file's bytes as the body, read as they are sent (never whole in memory; a pipe, whose
  // size is not known before, is read whole first), after
  // `Expect: 100-continue` for a body over 1 MB (libcurl's rule): refused from its headers
  // (no key, too large, busy), nothing of it is sent. A file that cannot be read is
  // invalid_argument, naming it.
  Result<HttpReply> post_file(std::string_view path, std::string_view content_type,
                              const std::string& file,
                              const std::vector<std::string>& headers = {});

  [[nodiscard]] const std::string& server() const { return server_; }
  [[nodiscard]] const std::string& key() const { return key_; }

 private:
  // A POST's body is `body`, or `file` (open, of `file_size` bytes) when given. A POST that
  // failed once it may have reached the service (a timeout, a connection broken after its
  // request went out) is outcome_unknown: it may have been accepted.
  Result<HttpReply> perform(std::string_view method, std::string_view path,
                            std::optional<std::string_view> content_type, std::string body,
                            const std::vector<std::string>& headers, std::FILE* file = nullptr,
                            std::uint64_t file_size = 0);

  const std::string server_;
  const std::string key_;
  const std::chrono::milliseconds timeout_;
  const std::chrono::milliseconds upload_timeout_;
  void* curl_;  // CURL*, reused so that the connection is kept alive
};

// The live events of several jobs at once: one GET /v1/jobs/{id}/events each, read with
// SseParser, at most `max_open` at a time (the service allows a user 16): the others wait
// their turn, each opened as an earlier one is closed. A stream that drops before its job
// ended, or is answered 429, 408 or 5xx (a restart, a service at its connection limit, a
// proxy in front of it), is opened again after the retry the service asked for (2 s),
// doubling with each try in a row up to 10 s, and never before the answer's Retry-After
// (delta-seconds, at most 10 minutes), up to `max_reconnects` times in a row (12: about
// 100 s, which a restart of the service fits in); one that never connected fails at once,
// as the service could not be reached. A stream refused for its job (404: no such job, 401,
// 403) ends that job's watch only.
class EventStreams {
 public:
  EventStreams(std::string server, std::string key, int max_reconnects = 12,
               std::size_t max_open = 8);
  ~EventStreams();
  EventStreams(const EventStreams&) = delete;
  EventStreams& operator=(const EventStreams&) = delete;

  void watch(const std::string& job_id);

  // A stream the service refused for its job: 404 (no such job, or not yours), 401, 403, or
  // any other answer that is neither a stream nor worth trying again. It is closed.
  struct Refusal {
    std::string job;
    long status = 0;
    std::string message;  // the service's
  };
  struct Polled {
    std::vector<std::pair<std::string, SseEvent>> events;  // (job id, event), as they came
    std::vector<Refusal> refused;
  };

  // Waits up to `timeout` for events; returns those that came, and the streams refused. A
  // stream the service ended is closed. A job that had ended when its stream was asked for
  // (204) gives one event, the job as GET /v1/jobs/{id} shows it. Fails only when the
  // service cannot be reached, or has not given a stream for `max_reconnects` tries in a
  // row: then no stream can go on.
  Result<Polled> poll(std::chrono::milliseconds timeout);

  // Streams not closed yet: open, waiting to reconnect, or waiting their turn.
  [[nodiscard]] std::size_t open() const;

  // The HTTP status of the last answer when poll() failed after it (429, 503 or 502 in a
  // row); 0 when it was not an answer (the service unreachable).
  [[nodiscard]] long failed_status() const;

  // Called by a stream that ended normally; watch() of another job may follow.
  void close(const std::string& job_id);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Retry-After's delta-seconds in a header line ("Retry-After: 5\r\n", any case), or nothing
// for another header or another form (an HTTP-date).
[[nodiscard]] std::optional<std::int64_t> retry_after_of(std::string_view header_line);

// "could not reach the service at URL (why): is `fairlane serve` running there? ...".
[[nodiscard]] Status unreachable(std::string_view server, std::string_view why);

}  // namespace fairlane::cli
