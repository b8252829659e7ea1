// CurlProvider: libcurl's multi interface on an Asio io_context (the "multi_socket" way):
// curl tells us which sockets to watch (CURLMOPT_SOCKETFUNCTION) and when to wake it
// (CURLMOPT_TIMERFUNCTION); we wait with async_wait and a steady_timer and hand events back
// with curl_multi_socket_action. curl's sockets are created as Asio sockets
// (CURLOPT_OPENSOCKETFUNCTION) so Asio can wait on them.
#include "fairlane/provider/curl_provider.hpp"

#include <curl/curl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "fairlane/core/text.hpp"
#include "provider/dialect.hpp"

namespace fairlane {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// No page's answer comes near it (a page's output is some thousands of tokens): past it the
// body is not the provider's answer (a wrong URL, a proxy's stream), and is not held.
constexpr std::size_t kMaxAnswerBytes = std::size_t{8} * 1024 * 1024;

// A redirect's outcome names where it points (libcurl follows none): the remedy sends the
// operator there.
void name_redirect(CURL* easy, ProviderOutcome& outcome) {
  auto* refused = std::get_if<outcome::ClientError>(&outcome.kind);
  if (refused == nullptr || outcome.http_status / 100 != 3) return;
  char* url = nullptr;
  if (curl_easy_getinfo(easy, CURLINFO_REDIRECT_URL, &url) == CURLE_OK && url != nullptr) {
    refused->detail = fmt::format("redirected to {}", storable_text(url));
  }
}

class CurlProvider final : public Provider {
 public:
  CurlProvider(asio::io_context& io, CurlProviderConfig config, std::string api_key)
      : io_(io), config_(std::move(config)), api_key_(std::move(api_key)), timer_(io) {
    multi_ = curl_multi_init();
    curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &CurlProvider::on_socket);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &CurlProvider::on_timer);
    curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
    if (config_.max_connections > 0) {  // 0: libcurl's defaults, no cap
      const auto connections = static_cast<long>(config_.max_connections);
      curl_multi_setopt(multi_, CURLMOPT_MAX_TOTAL_CONNECTIONS, connections);
      curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS, connections);
      curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, connections);
    }
  }

  CurlProvider(const CurlProvider&) = delete;
  CurlProvider& operator=(const CurlProvider&) = delete;

  // Asio's cancel() throws only when the reactor itself fails: std::terminate is right then.
  // NOLINTNEXTLINE(bugprone-exception-escape)
  ~CurlProvider() override {
    alive_.reset();  // handlers still queued on the io_context see this and do nothing
    timer_.cancel();
    for (auto& [easy, call] : calls_) {
      curl_multi_remove_handle(multi_, easy);
      curl_easy_cleanup(easy);
      curl_slist_free_all(call->headers);
    }
    calls_.clear();
    curl_multi_cleanup(multi_);  // closes the cached connections through on_close_socket
    for (auto& [fd, socket] : sockets_) socket->close();
  }

  void call(const ProviderRequest& request, Done done) override;
  [[nodiscard]] std::size_t in_flight() const override { return calls_.size(); }

 private:
  struct Call {
    CURL* easy = nullptr;
    curl_slist* headers = nullptr;
    std::string body;
    std::string response;
    HeaderList response_headers;
    Done done;
    Clock::time_point started;
    char error[CURL_ERROR_SIZE] = {};
    bool too_large = false;  // its answer passed kMaxAnswerBytes, and was cut off
  };

  // A socket curl uses, and what curl wants to hear about it.
  struct Socket {
    explicit Socket(tcp::socket s) : socket(std::move(s)) {}
    void close() {
      closed = true;
      boost::system::error_code ignored;
      socket.close(ignored);
    }
    tcp::socket socket;
    int want = 0;  // CURL_POLL_IN / CURL_POLL_OUT bits
    bool reading = false;
    bool writing = false;
    bool closed = false;
  };

  static int on_socket(CURL* easy, curl_socket_t fd, int what, void* self, void* socketp);
  static int on_timer(CURLM* multi, long timeout_ms, void* self);
  static curl_socket_t on_open_socket(void* self, curlsocktype purpose, curl_sockaddr* address);
  static int on_close_socket(void* self, curl_socket_t fd);
  static std::size_t on_body(char* data, std::size_t size, std::size_t count, void* call);
  static std::size_t on_header(char* data, std::size_t size, std::size_t count, void* call);

  void watch(curl_socket_t fd, const std::shared_ptr<Socket>& socket);
  void wait(curl_socket_t fd, const std::shared_ptr<Socket>& socket, bool read);
  void act(curl_socket_t fd, int events);
  void finish_done_calls();
  void deliver(Done done, ProviderOutcome outcome);

  asio::io_context& io_;
  const CurlProviderConfig config_;
  const std::string api_key_;
  CURLM* multi_ = nullptr;
  asio::steady_timer timer_;
  std::unordered_map<curl_socket_t, std::shared_ptr<Socket>> sockets_;
  std::unordered_map<CURL*, std::unique_ptr<Call>> calls_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

void CurlProvider::deliver(Done done, ProviderOutcome outcome) {
  asio::post(io_, [alive = std::weak_ptr<bool>(alive_), done = std::move(done),
                   outcome = std::move(outcome)]() mutable {
    if (!alive.expired()) done(std::move(outcome));
  });
}

void CurlProvider::call(const ProviderRequest& request, Done done) {
  auto call = std::make_unique<Call>();
  call->done = std::move(done);
  call->started = std::chrono::steady_clock::now();
  call->body = provider::request_body(config_.dialect, request);
  CURL* easy = curl_easy_init();
  if (easy == nullptr) {
    deliver(std::move(call->done),
            ProviderOutcome{
                outcome::ConnectionError{"libcurl could not start a transfer", false}, 0, {}, {}});
    return;
  }
  call->easy = easy;
  call->headers = curl_slist_append(call->headers, "Content-Type: application/json");
  call->headers = curl_slist_append(call->headers, "Expect:");  // no 100-continue round trip
  if (!api_key_.empty()) {
    const std::string auth = config_.dialect == Dialect::openai
                                 ? "Authorization: Bearer " + api_key_
                                 : "x-api-key: " + api_key_;
    call->headers = curl_slist_append(call->headers, auth.c_str());
  }
  if (config_.dialect == Dialect::anthropic) {
    const std::string version = "anthropic-version: " + config_.anthropic_version;
    call->headers = curl_slist_append(call->headers, version.c_str());
  }
  const std::string url = config_.base_url + std::string(provider::path_of(config_.dialect));
  const auto ms = [](Clock::duration d) {
    return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_POST, 1L);
  curl_easy_setopt(easy, CURLOPT_POSTFIELDS, call->body.data());
  curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(call->body.size()));
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, call->headers);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &CurlProvider::on_body);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, call.get());
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &CurlProvider::on_header);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, call.get());
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, call->error);
  curl_easy_setopt(easy, CURLOPT_PRIVATE, call.get());
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, ms(config_.call_timeout));
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, ms(config_.connect_timeout));
  curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, &CurlProvider::on_open_socket);
  curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, this);
  curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, &CurlProvider::on_close_socket);
  curl_easy_setopt(easy, CURLOPT_CLOSESOCKETDATA, this);
  Call* raw = call.get();
  calls_.emplace(easy, std::move(call));
  if (curl_multi_add_handle(multi_, easy) != CURLM_OK) {
    auto failed = std::move(calls_.at(easy));
    calls_.erase(easy);
    curl_easy_cleanup(easy);
    curl_slist_free_all(raw->headers);
    deliver(std::move(failed->done),
            ProviderOutcome{
                outcome::ConnectionError{"libcurl refused the transfer", false}, 0, {}, {}});
  }
}

curl_socket_t CurlProvider::on_open_socket(void* self, curlsocktype purpose,
                                           curl_sockaddr* address) {
  auto* provider = static_cast<CurlProvider*>(self);
  if (purpose != CURLSOCKTYPE_IPCXN) return CURL_SOCKET_BAD;
  tcp::socket socket(provider->io_);
  boost::system::error_code error;
  socket.open(address->family == AF_INET6 ? tcp::v6() : tcp::v4(), error);
  if (error) return CURL_SOCKET_BAD;
  const curl_socket_t fd = socket.native_handle();
  provider->sockets_.emplace(fd, std::make_shared<Socket>(std::move(socket)));
  return fd;
}

int CurlProvider::on_close_socket(void* self, curl_socket_t fd) {
  auto* provider = static_cast<CurlProvider*>(self);
  const auto it = provider->sockets_.find(fd);
  if (it == provider->sockets_.end()) return ::close(fd);
  it->second->close();  // waits still pending complete as aborted and see `closed`
  provider->sockets_.erase(it);
  return 0;
}

int CurlProvider::on_socket(CURL*, curl_socket_t fd, int what, void* self, void*) {
  auto* provider = static_cast<CurlProvider*>(self);
  const auto it = provider->sockets_.find(fd);
  if (it == provider->sockets_.end()) return 0;
  it->second->want = what == CURL_POLL_REMOVE ? 0 : what;
  provider->watch(fd, it->second);
  return 0;
}

void CurlProvider::watch(curl_socket_t fd, const std::shared_ptr<Socket>& socket) {
  if ((socket->want & CURL_POLL_IN) != 0 && !socket->reading) wait(fd, socket, true);
  if ((socket->want & CURL_POLL_OUT) != 0 && !socket->writing) wait(fd, socket, false);
}

void CurlProvider::wait(curl_socket_t fd, const std::shared_ptr<Socket>& socket, bool read) {
  (read ? socket->reading : socket->writing) = true;
  socket->socket.async_wait(read ? tcp::socket::wait_read : tcp::socket::wait_write,
                            [this, alive = std::weak_ptr<bool>(alive_), fd, socket,
                             read](boost::system::error_code error) {
                              if (alive.expired()) return;
                              (read ? socket->reading : socket->writing) = false;
                              if (error || socket->closed) return;
                              const int flag = read ? CURL_POLL_IN : CURL_POLL_OUT;
                              // curl may have stopped caring about this direction while we waited.
                              if ((socket->want & flag) == 0) return;
                              act(fd, read ? CURL_CSELECT_IN : CURL_CSELECT_OUT);
                              if (!socket->closed) watch(fd, socket);
                            });
}

int CurlProvider::on_timer(CURLM*, long timeout_ms, void* self) {
  auto* provider = static_cast<CurlProvider*>(self);
  provider->timer_.cancel();
  if (timeout_ms < 0) return 0;
  // Never call back into curl from here: the timer fires on the io_context, later.
  provider->timer_.expires_after(std::chrono::milliseconds(timeout_ms));
  provider->timer_.async_wait(
      [provider, alive = std::weak_ptr<bool>(provider->alive_)](boost::system::error_code error) {
        if (alive.expired() || error) return;
        provider->act(CURL_SOCKET_TIMEOUT, 0);
      });
  return 0;
}

void CurlProvider::act(curl_socket_t fd, int events) {
  int running = 0;
  curl_multi_socket_action(multi_, fd, events, &running);
  finish_done_calls();
}

std::size_t CurlProvider::on_body(char* data, std::size_t size, std::size_t count, void* call) {
  auto* c = static_cast<Call*>(call);
  if (size * count > kMaxAnswerBytes - c->response.size()) {
    c->too_large = true;
    return 0;  // ends the transfer: CURLE_WRITE_ERROR
  }
  c->response.append(data, size * count);
  return size * count;
}

std::size_t CurlProvider::on_header(char* data, std::size_t size, std::size_t count, void* call) {
  auto* c = static_cast<Call*>(call);
  const std::string_view line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {
    c->response_headers.clear();  // a new response (after a redirect or an interim one)
  } else if (const auto colon = line.find(':'); colon != std::string_view::npos) {
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n')) value.remove_suffix(1);
    c->response_headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
  }
  return size * count;
}

void CurlProvider::finish_done_calls() {
  int left = 0;
  while (CURLMsg* message = curl_multi_info_read(multi_, &left)) {
    if (message->msg != CURLMSG_DONE) continue;
    CURL* easy = message->easy_handle;
    const CURLcode result = message->data.result;
    const auto it = calls_.find(easy);
    if (it == calls_.end()) continue;
    std::unique_ptr<Call> call = std::move(it->second);
    calls_.erase(it);
    curl_multi_remove_handle(multi_, easy);

    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    ProviderOutcome outcome{outcome::Timeout{}, static_cast<int>(status), {}, {}};
    outcome.latency = std::chrono::steady_clock::now() - call->started;
    outcome.limits =
        parse_rate_limit_headers(call->response_headers, std::chrono::system_clock::now());
    // Bytes of the request sent: none, and the provider never had the call.
    long sent = 0;
    curl_easy_getinfo(easy, CURLINFO_REQUEST_SIZE, &sent);
    if (call->too_large) {
      outcome.kind = outcome::BadResponse{fmt::format(
          "the answer is larger than {} MB, more than any page's: is --provider-url the "
          "provider's API?",
          kMaxAnswerBytes / (std::size_t{1024} * 1024))};
    } else if (result == CURLE_OK) {
      outcome.kind =
          provider::classify(config_.dialect, outcome.http_status, call->response, outcome.limits);
      name_redirect(easy, outcome);
    } else if (result == CURLE_OPERATION_TIMEDOUT && sent > 0) {
      outcome.kind = outcome::Timeout{};
    } else if (long tunnel = 0;
               curl_easy_getinfo(easy, CURLINFO_HTTP_CONNECTCODE, &tunnel) == CURLE_OK &&
               tunnel >= 300) {
      // A proxy (HTTPS_PROXY) refused the tunnel to the provider: its 407 is a refusal of
      // fairlane (the proxy's login), anything else leaves the provider out of reach.
      const auto code = static_cast<int>(tunnel);
      outcome.kind = provider::classify(config_.dialect, code, "", outcome.limits);
      if (auto* refused = std::get_if<outcome::ClientError>(&outcome.kind);
          refused != nullptr && !refused->remedy.empty()) {
        outcome.http_status = code;
        refused->detail = fmt::format("the proxy answered the tunnel's CONNECT with {}", code);
      } else {
        outcome.kind = outcome::ConnectionError{
            fmt::format("the proxy answered the tunnel's CONNECT with {}", code), true};
      }
    } else {
      const std::string detail = call->error[0] != '\0' ? call->error : curl_easy_strerror(result);
      // Refused, not found, or a timeout before a byte was sent (a connect whose SYNs were
      // dropped, as by a firewall or a partition): nothing reached the provider. A reset or a
      // broken connection after the request went out is not that: the provider may have the
      // call. (Nor is a TLS or URL failure: the page fails with it after its attempts.)
      const bool unreachable = result == CURLE_OPERATION_TIMEDOUT ||  // with nothing sent
                               result == CURLE_COULDNT_CONNECT ||
                               result == CURLE_COULDNT_RESOLVE_HOST ||
                               result == CURLE_COULDNT_RESOLVE_PROXY;
      outcome.kind = outcome::ConnectionError{detail, unreachable};
    }
    curl_easy_cleanup(easy);
    curl_slist_free_all(call->headers);
    deliver(std::move(call->done), std::move(outcome));
  }
}

}  // namespace

Result<std::string> provider_base_url(std::string_view url) {
  const auto starts = [&](std::string_view prefix) {
    return url.size() >= prefix.size() && iequals(url.substr(0, prefix.size()), prefix);
  };
  if (!starts("http://") && !starts("https://")) {
    return Status(StatusCode::invalid_argument,
                  fmt::format("--provider-url {} is not an http:// or https:// URL: give one, "
                              "such as http://127.0.0.1:9000",
                              url));
  }
  std::string_view base = url;
  while (base.ends_with('/')) base.remove_suffix(1);
  if (base.size() >= 3 && iequals(base.substr(base.size() - 3), "/v1")) {
    return Status(StatusCode::invalid_argument,
                  fmt::format("--provider-url {} ends in /v1, and fairlane adds "
                              "/v1/chat/completions or /v1/messages itself: give {}",
                              url, base.substr(0, base.size() - 3)));
  }
  return std::string(base);
}

Result<std::unique_ptr<Provider>> make_curl_provider(boost::asio::io_context& io,
                                                     const CurlProviderConfig& config) {
  static std::once_flag curl_ready;
  std::call_once(curl_ready, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (config.base_url.empty()) {
    return Status(StatusCode::invalid_argument,
                  "the provider has no URL: give --provider-url (e.g. http://127.0.0.1:9000)");
  }
  auto base_url = provider_base_url(config.base_url);
  if (!base_url.ok()) return base_url.status();
  std::string key;
  if (!config.api_key_env.empty()) {
    // Read once, when the provider is made; fairlane never sets its environment.
    // NOLINTNEXTLINE(concurrency-mt-unsafe)
    const char* value = std::getenv(config.api_key_env.c_str());
    if (value == nullptr || *value == '\0') {
      return Status(StatusCode::invalid_argument,
                    fmt::format("the environment variable {} (named by --api-key-env) is not set: "
                                "export it with the provider's API key, or name another",
                                config.api_key_env));
    }
    key = value;
  }
  CurlProviderConfig taken = config;
  taken.base_url = std::move(base_url).value();
  return std::unique_ptr<Provider>(new CurlProvider(io, taken, std::move(key)));
}

}  // namespace fairlane
