// Router: the HTTP API of DESIGN.md section 7 as a function from a parsed request to a
// response, over the store and the dispatcher. No sockets here: the HTTP server reads a
// request, calls handle(), and writes what it returns; tests call handle() directly.
//
// It serves JSON uploads, every read and /metrics; PDF and multipart uploads and the SSE
// events are still to come.
//
// Thread safety: the io_context's thread, like the store and the dispatcher.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fairlane/store.hpp"
#include "service/dispatcher.hpp"
#include "service/metrics.hpp"

namespace fairlane::service {

struct ApiRequest {
  std::string method;  // "GET", "POST", "DELETE"
  std::string target;  // path and query, e.g. "/v1/estimate?pages=10"
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  [[nodiscard]] std::optional<std::string> header(std::string_view name) const;
};

struct ApiResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

struct RouterConfig {
  std::string admin_key;            // empty: no admin (POST /v1/users is refused)
  std::string prompt;               // the instruction sent with every page (for the estimate)
  std::int64_t max_tokens = 1'000;  // output tokens asked per page
  std::int64_t max_pages = 10'000;  // pages in one upload
};

class Router {
 public:
  // `store` and `dispatcher` must outlive the router.
  Router(Store& store, Dispatcher& dispatcher, RouterConfig config);

  ApiResponse handle(const ApiRequest& request);

  // The tokens a page will reserve: ceil(bytes of prompt and text / 4) + max_tokens.
  [[nodiscard]] std::int64_t estimate_tokens(std::string_view page_text) const;

 private:
  Store& store_;
  Dispatcher& dispatcher_;
  RefusalCounts door_refusals_;
  const RouterConfig config_;
};

}  // namespace fairlane::service
