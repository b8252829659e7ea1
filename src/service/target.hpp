// A request's target, read: its path and its query's params. The router picks a route by
// the path; the routes and the upload use case read the params.
//
// Thread safety: none needed; a Target reads the string it was made from, which must
// outlive it.
#pragma once

#include <boost/url/url_view.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace fairlane::service {

struct Target {
  std::string path;  // decoded; "/" for an absolute form without one
  boost::urls::url_view url;
  // The param's decoded value, or nullopt when the query does not give it.
  [[nodiscard]] std::optional<std::string> param(std::string_view name) const;
};

// Origin form (/path?query), or absolute form (http://host/path?query), which a client sends
// to a proxy and a server accepts (RFC 9112, 3.2.2; its host is not read, but it must have
// one, and no userinfo); nullopt for any other. `target` must outlive the Target.
[[nodiscard]] std::optional<Target> target_of(std::string_view target);

}  // namespace fairlane::service
