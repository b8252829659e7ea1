// CurlProvider: the Provider that calls a real (or stand-in) provider over HTTP, with
// libcurl's multi interface driven by an Asio io_context: curl's sockets are Asio sockets
// waited on with async_wait, its timeouts one steady_timer. No thread per call and no
// polling loop; connections are reused, at most max_connections at once.
//
// The API key is read from the environment variable the configuration names, sent in the
// dialect's header, and never logged or put in an outcome.
//
// Thread safety: all of it runs on the io_context's thread; create, call and destroy it
// there.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "fairlane/core/result.hpp"
#include "fairlane/provider/provider.hpp"

namespace boost::asio {
class io_context;
}

namespace fairlane {

struct CurlProviderConfig {
  std::string base_url;  // e.g. "http://127.0.0.1:9000"; the dialect adds the path
  Dialect dialect = Dialect::openai;
  std::string api_key_env;            // the variable holding the key; empty: send no key
  std::size_t max_connections = 200;  // connections open at once (and kept for reuse); 0: no cap
  Clock::duration call_timeout = std::chrono::seconds(120);
  Clock::duration connect_timeout = std::chrono::seconds(10);
  std::string anthropic_version = "2023-06-01";
};

// --provider-url as calls are made to it: without the slashes at its end (the dialect's path
// begins with one). invalid_argument, naming the URL to give, for a URL of another scheme
// than http or https (libcurl would guess one) and for one ending in /v1, as OpenAI's
// clients write their base URL (the dialect's path begins with /v1: every call would go to
// /v1/v1/...). Scheme and path are compared without regard to case.
[[nodiscard]] Result<std::string> provider_base_url(std::string_view url);

// A provider over `io`. invalid_argument when the configuration cannot work (no URL, a URL
// provider_base_url() refuses, or a key variable named but not set: the message names the
// variable, never a value).
Result<std::unique_ptr<Provider>> make_curl_provider(boost::asio::io_context& io,
                                                     const CurlProviderConfig& config);

}  // namespace fairlane
