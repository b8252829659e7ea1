#include "cli/http_client.hpp"

#include "fairlane/core/backoff.hpp"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <charconv>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

namespace fairlane::cli {
namespace {

using namespace std::chrono_literals;

using Clock = std::chrono::steady_clock;

// libcurl wants curl_global_init before any thread starts; the first client does it.
void global_init() {
  static const bool done = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
  (void)done;
}

std::size_t append_body(char* data, std::size_t size, std::size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

// A file body's next part, as libcurl asks for it.
std::size_t read_file_part(char* data, std::size_t size, std::size_t count, void* file) {
  const std::size_t read = std::fread(data, size, count, static_cast<std::FILE*>(file));
  if (read < count && std::ferror(static_cast<std::FILE*>(file)) != 0) return CURL_READFUNC_ABORT;
  return read * size;
}

// Where libcurl asks a file body to be read from, to send it again (a kept-alive connection
// found closed as the upload began).
int seek_file(void* file, curl_off_t offset, int origin) {
  return fseeko(static_cast<std::FILE*>(file), static_cast<off_t>(offset), origin) == 0
             ? CURL_SEEKFUNC_OK
             : CURL_SEEKFUNC_FAIL;
}

// Keeps Retry-After from the headers (delta-seconds; the service sends only those).
std::size_t read_header(char* data, std::size_t size, std::size_t count, void* user) {
  if (const auto seconds = retry_after_of(std::string_view(data, size * count))) {
    static_cast<HttpReply*>(user)->retry_after_s = seconds;
  }
  return size * count;
}

// A curl header list, freed with its owner.
struct Headers {
  Headers() = default;
  Headers(const Headers&) = delete;
  Headers& operator=(const Headers&) = delete;
  ~Headers() { clear(); }
  void add(const std::string& line) { list = curl_slist_append(list, line.c_str()); }
  void clear() {
    curl_slist_free_all(list);
    list = nullptr;
  }
  curl_slist* list = nullptr;
};

// The service's error message in an error answer, or the body's start.
std::string message_of(std::string_view body) {
  boost::system::error_code error;
  const boost::json::value value = boost::json::parse(body, error);
  if (!error && value.is_object()) {
    if (const auto* e = value.as_object().if_contains("error"); e && e->is_object()) {
      if (const auto* m = e->as_object().if_contains("message"); m && m->is_string()) {
        return std::string(m->as_string());
      }
    }
  }
  return std::string(body.substr(0, 200));
}

}  // namespace

std::optional<std::int64_t> retry_after_of(std::string_view line) {
  constexpr std::string_view kName = "retry-after:";
  if (line.size() <= kName.size()) return std::nullopt;
  std::string lower(line.substr(0, kName.size()));
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower != kName) return std::nullopt;
  std::string_view value = line.substr(kName.size());
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ' ||
                            value.back() == '\t')) {
    value.remove_suffix(1);
  }
  std::int64_t seconds = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (error != std::errc() || end != value.data() + value.size() || seconds < 0) {
    return std::nullopt;
  }
  return seconds;
}

Status unreachable(std::string_view server, std::string_view why) {
  return Status(StatusCode::io_error,
                fmt::format("could not reach the service at {} ({}): is `fairlane serve` running "
                            "there? Set the address with --server or FAIRLANE_URL",
                            server, why));
}

HttpClient::HttpClient(std::string server, std::string key, std::chrono::milliseconds timeout,
                       std::chrono::milliseconds upload_timeout)
    : server_([&] {
        while (!server.empty() && server.back() == '/') server.pop_back();
        return server;
      }()),
      key_(std::move(key)),
      timeout_(timeout),
      upload_timeout_(upload_timeout),
      curl_((global_init(), curl_easy_init())) {}

HttpClient::~HttpClient() {
  curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Result<HttpReply> HttpClient::get(std::string_view path) {
  return perform("GET", path, std::nullopt, {}, {});
}

Result<HttpReply> HttpClient::del(std::string_view path) {
  return perform("DELETE", path, std::nullopt, {}, {});
}

Result<HttpReply> HttpClient::post(std::string_view path, std::string_view content_type,
                                   std::string body, const std::vector<std::string>& headers) {
  return perform("POST", path, content_type, std::move(body), headers);
}

Result<HttpReply> HttpClient::post_file(std::string_view path, std::string_view content_type,
                                        const std::string& file,
                                        const std::vector<std::string>& headers) {
  const auto unreadable = [&file] {
    return Status(
        StatusCode::invalid_argument,
        fmt::format("cannot read {}: check the path and that it is a readable file", file));
  };
  std::error_code error;
  if (!std::filesystem::is_regular_file(file, error)) {
    // A pipe (`<(...)`, /dev/stdin): its size is not known before it is read, so it is read
    // whole first.
    std::ifstream in(file, std::ios::binary);
    if (!in) return unreadable();
    std::ostringstream bytes;
    bytes << in.rdbuf();
    return perform("POST", path, content_type, std::move(bytes).str(), headers);
  }
  const std::uint64_t size = std::filesystem::file_size(file, error);
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> open(
      error ? nullptr : std::fopen(file.c_str(), "rb"), &std::fclose);
  if (!open) return unreadable();
  return perform("POST", path, content_type, {}, headers, open.get(), size);
}

Result<HttpReply> HttpClient::perform(std::string_view method, std::string_view path,
                                      std::optional<std::string_view> content_type,
                                      std::string body, const std::vector<std::string>& headers,
                                      std::FILE* file, std::uint64_t file_size) {
  auto* curl = static_cast<CURL*>(curl_);
  if (curl == nullptr) return Status(StatusCode::internal, "libcurl could not start");
  curl_easy_reset(curl);
  const std::string url = server_ + std::string(path);
  HttpReply reply;
  Headers list;
  list.add("Authorization: Bearer " + key_);
  // A file's body waits for the 100 Continue when over 1 MB: refused from its headers, it
  // is never sent. Text bodies are small and go at once.
  if (file == nullptr) list.add("Expect:");
  if (content_type) list.add("Content-Type: " + std::string(*content_type));
  for (const std::string& header : headers) list.add(header);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list.list);
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, std::string(method).c_str());
  if (method == "POST" && file != nullptr) {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, read_file_part);
    curl_easy_setopt(curl, CURLOPT_READDATA, file);
    curl_easy_setopt(curl, CURLOPT_SEEKFUNCTION, seek_file);  // to send it again, from the start
    curl_easy_setopt(curl, CURLOPT_SEEKDATA, file);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(file_size));
  } else if (method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, read_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &reply);
  const auto timeout = method == "POST" ? upload_timeout_ : timeout_;
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 10'000L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  const CURLcode code = curl_easy_perform(curl);
  // The service takes an upload only once it has its whole body: sent whole, and no answer
  // came, it may have; cut short, or never sent (no connection: a 0-byte body counts as
  // whole before any), it has not.
  long request_sent = 0;  // the request's head, in bytes
  curl_easy_getinfo(curl, CURLINFO_REQUEST_SIZE, &request_sent);
  curl_off_t body_sent = 0;
  curl_easy_getinfo(curl, CURLINFO_SIZE_UPLOAD_T, &body_sent);
  const std::uint64_t body_size = file != nullptr ? file_size : body.size();
  const bool maybe_accepted = method == "POST" && request_sent > 0 && body_sent >= 0 &&
                              static_cast<std::uint64_t>(body_sent) == body_size;
  if (code == CURLE_OPERATION_TIMEDOUT) {
    return Status(
        maybe_accepted ? StatusCode::outcome_unknown : StatusCode::io_error,
        fmt::format("{} did not answer within {} s{}", server_,
                    std::chrono::duration_cast<std::chrono::seconds>(timeout).count(),
                    maybe_accepted ? ": the upload may have been accepted all the same" : ""));
  }
  if (code != CURLE_OK && maybe_accepted) {
    return Status(StatusCode::outcome_unknown,
                  fmt::format("the connection to {} broke once the upload had gone out ({}): it "
                              "may have been accepted all the same",
                              server_, curl_easy_strerror(code)));
  }
  if (code != CURLE_OK && method == "POST" && body_sent > 0) {
    return Status(StatusCode::io_error,
                  fmt::format("the connection to {} broke while the upload was being sent ({}): "
                              "it was not accepted; send it again",
                              server_, curl_easy_strerror(code)));
  }
  if (code != CURLE_OK) return unreachable(server_, curl_easy_strerror(code));
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.status);
  return reply;
}

// ---- EventStreams ------------------------------------------------------------------

struct EventStreams::Impl {
  struct Stream {
    std::string job;
    std::string url;
    CURL* handle = nullptr;
    Headers headers;
    SseParser parser;
    std::vector<SseEvent> pending;
    std::string error_body;                     // the body of an answer other than 200
    std::optional<std::int64_t> retry_after_s;  // the answer's Retry-After
    int reconnects = 0;                         // in a row, since the last event
    std::optional<Clock::time_point> reconnect_at;
  };

  Impl(std::string s, std::string k, int max, std::size_t open)
      : server(std::move(s)), key(std::move(k)), max_reconnects(max), max_open(open) {
    global_init();
    multi = curl_multi_init();
  }
  ~Impl() {
    for (auto& [job, stream] : streams) detach(*stream);
    curl_multi_cleanup(multi);
  }

  static std::size_t on_data(char* data, std::size_t size, std::size_t count, void* user) {
    auto& stream = *static_cast<Stream*>(user);
    long status = 0;
    curl_easy_getinfo(stream.handle, CURLINFO_RESPONSE_CODE, &status);
    const std::string_view bytes(data, size * count);
    if (status != 200) {
      stream.error_body.append(bytes);
    } else {
      for (SseEvent& event : stream.parser.feed(bytes)) stream.pending.push_back(std::move(event));
    }
    return size * count;
  }

  static std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
    if (const auto seconds = retry_after_of(std::string_view(data, size * count))) {
      static_cast<Stream*>(user)->retry_after_s = seconds;
    }
    return size * count;
  }

  void attach(Stream& stream) {
    stream.handle = curl_easy_init();
    stream.error_body.clear();
    stream.retry_after_s.reset();
    stream.parser = SseParser{};
    stream.headers.clear();
    stream.headers.add("Authorization: Bearer " + key);
    stream.headers.add("Accept: text/event-stream");
    curl_easy_setopt(stream.handle, CURLOPT_URL, stream.url.c_str());
    curl_easy_setopt(stream.handle, CURLOPT_HTTPHEADER, stream.headers.list);
    curl_easy_setopt(stream.handle, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(stream.handle, CURLOPT_WRITEDATA, &stream);
    curl_easy_setopt(stream.handle, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(stream.handle, CURLOPT_HEADERDATA, &stream);
    curl_easy_setopt(stream.handle, CURLOPT_CONNECTTIMEOUT_MS, 10'000L);
    curl_easy_setopt(stream.handle, CURLOPT_NOSIGNAL, 1L);
    // A stream that stays silent for a minute (heartbeats come every 15 s) is dead.
    curl_easy_setopt(stream.handle, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(stream.handle, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_multi_add_handle(multi, stream.handle);
  }

  void detach(Stream& stream) const {
    if (stream.handle == nullptr) return;
    curl_multi_remove_handle(multi, stream.handle);
    curl_easy_cleanup(stream.handle);
    stream.handle = nullptr;
  }

  const std::string server;
  const std::string key;
  const int max_reconnects;
  const std::size_t max_open;
  std::deque<std::string> waiting;  // jobs whose stream waits for a free place
  long failed_status = 0;
  bool heard = false;  // an event came on some stream: the service was there
  CURLM* multi = nullptr;
  std::map<std::string, std::unique_ptr<Stream>> streams;
};

EventStreams::EventStreams(std::string server, std::string key, int max_reconnects,
                           std::size_t max_open)
    : impl_(std::make_unique<Impl>(
          [&] {
            while (!server.empty() && server.back() == '/') server.pop_back();
            return server;
          }(),
          std::move(key), max_reconnects, std::max<std::size_t>(max_open, 1))) {}

EventStreams::~EventStreams() = default;

void EventStreams::watch(const std::string& job_id) {
  if (impl_->streams.size() >= impl_->max_open) {
    impl_->waiting.push_back(job_id);
    return;
  }
  auto stream = std::make_unique<Impl::Stream>();
  stream->job = job_id;
  stream->url = impl_->server + "/v1/jobs/" +
                boost::urls::encode(job_id, boost::urls::unreserved_chars) + "/events";
  impl_->attach(*stream);
  impl_->streams[job_id] = std::move(stream);
}

void EventStreams::close(const std::string& job_id) {
  const auto it = impl_->streams.find(job_id);
  if (it == impl_->streams.end()) return;
  impl_->detach(*it->second);
  impl_->streams.erase(it);
  if (!impl_->waiting.empty()) {
    const std::string next = impl_->waiting.front();
    impl_->waiting.pop_front();
    watch(next);
  }
}

std::size_t EventStreams::open() const {
  return impl_->streams.size() + impl_->waiting.size();
}

long EventStreams::failed_status() const {
  return impl_->failed_status;
}

Result<EventStreams::Polled> EventStreams::poll(std::chrono::milliseconds timeout) {
  Impl& d = *impl_;
  const Clock::time_point now = Clock::now();
  // Streams due to reconnect are opened again; the wait ends at the next one due.
  for (auto& [job, stream] : d.streams) {
    if (stream->reconnect_at && *stream->reconnect_at <= now) {
      stream->reconnect_at.reset();
      d.attach(*stream);
    } else if (stream->reconnect_at) {
      timeout = std::min(timeout, std::chrono::duration_cast<std::chrono::milliseconds>(
                                      *stream->reconnect_at - now));
    }
  }
  int running = 0;
  curl_multi_perform(d.multi, &running);
  curl_multi_poll(d.multi, nullptr, 0, static_cast<int>(std::max<std::int64_t>(timeout.count(), 0)),
                  nullptr);
  curl_multi_perform(d.multi, &running);

  Polled polled;
  for (auto& [job, stream] : d.streams) {
    if (!stream->pending.empty()) {
      stream->reconnects = 0;
      d.heard = true;
    }
    for (SseEvent& event : stream->pending) polled.events.emplace_back(job, std::move(event));
    stream->pending.clear();
  }
  int left = 0;
  while (CURLMsg* message = curl_multi_info_read(d.multi, &left)) {
    if (message->msg != CURLMSG_DONE) continue;
    const auto it = std::find_if(d.streams.begin(), d.streams.end(), [&](const auto& entry) {
      return entry.second->handle == message->easy_handle;
    });
    if (it == d.streams.end()) continue;
    Impl::Stream& stream = *it->second;
    long status = 0;
    curl_easy_getinfo(stream.handle, CURLINFO_RESPONSE_CODE, &status);
    CURLcode code = message->data.result;
    d.detach(stream);
    if (code == CURLE_OK && status == 204) {
      // The job had ended: no stream, which tells a client not to reconnect. Its last state
      // is the job object, read once and given as the stream's last event.
      auto job =
          HttpClient(d.server, d.key)
              .get("/v1/jobs/" + boost::urls::encode(stream.job, boost::urls::unreserved_chars));
      if (job.ok() && job->status == 200) {
        polled.events.emplace_back(stream.job, SseEvent{"job", job->body});
        continue;
      }
      if (job.ok()) {
        status = job->status;
        stream.error_body = job->body;
        stream.retry_after_s = job->retry_after_s;
      } else {
        code = CURLE_COULDNT_CONNECT;  // gone between the two requests: as a stream dropped
      }
    }
    // A service restarting, at its connection limit, or behind a proxy that cannot reach it
    // (502, 503, 504), or one that timed the request out (408), may give a stream on the next
    // try; any other answer will not, and ends this job's watch only.
    const bool answered = code == CURLE_OK && status != 200;
    const bool try_again = status == 408 || status == 429 || status >= 500;
    if (answered && !try_again) {
      polled.refused.push_back(Refusal{stream.job, status, message_of(stream.error_body)});
      close(std::string(stream.job));
      continue;
    }
    // Ended, dropped or refused for now before the caller closed it: open it again after
    // the retry the service asked for (2 s), doubling with each try in a row up to 10 s, so
    // that a restart of the service (or a deploy) is ridden out, and never before the
    // answer's Retry-After. A service never heard from (a wrong address, say) is not waited
    // for: only one that went away is.
    if (code != CURLE_OK && !d.heard) return unreachable(d.server, curl_easy_strerror(code));
    if (++stream.reconnects > d.max_reconnects) {
      if (answered) {
        d.failed_status = status;
        return Status(
            status == 429 || status == 503 ? StatusCode::busy : StatusCode::io_error,
            fmt::format("{} answered {} for the live events of {} {} times in a row: {}", d.server,
                        status, stream.job, stream.reconnects, message_of(stream.error_body)));
      }
      return unreachable(
          d.server, code == CURLE_OK ? "the live events keep ending" : curl_easy_strerror(code));
    }
    const std::chrono::milliseconds first(stream.parser.retry_ms().value_or(2'000));
    Clock::duration wait = fairlane::doubled(first, stream.reconnects - 1,
                                             std::max<fairlane::Clock::duration>(first, 10s));
    if (answered && stream.retry_after_s) {
      wait = std::max<Clock::duration>(
          wait, std::chrono::seconds(std::min<std::int64_t>(*stream.retry_after_s, 600)));
    }
    stream.reconnect_at = Clock::now() + wait;
  }
  return polled;
}

}  // namespace fairlane::cli
