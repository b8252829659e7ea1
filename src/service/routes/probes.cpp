// GET /healthz and /readyz: an orchestrator's probes, which carry no key.

#include "service/routes.hpp"

namespace fairlane::service::routes {

std::optional<ApiResponse> probe(RouteContext& context, std::string_view method,
                                 std::string_view path) {
  if (path != "/healthz" && path != "/readyz") return std::nullopt;
  if (method != "GET" && method != "HEAD") return method_not_allowed(method, path, "GET, HEAD");
  if (path == "/healthz") return json_response(200, boost::json::object{{"status", "ok"}});
  // Not ready while results cannot be committed, or while writes fail for want of a disk.
  // A store whose writes failed is tried again (one page) on every ask, so the answer
  // turns ready when space returns, without a restart.
  if (const Status& results = context.dispatcher.store_error(); !results.ok()) {
    return error_response(503, "not_ready", results.message());
  }
  Status writes = context.store.write_health();
  if (!writes.ok()) writes = context.store.probe_write();
  if (!writes.ok()) return error_response(503, "not_ready", writes.message());
  return json_response(200, boost::json::object{{"status", "ready"}});
}

}  // namespace fairlane::service::routes
