// A request's target: origin or absolute form, its path and its query's params.
#include "service/target.hpp"

#include <boost/url/parse.hpp>
#include <utility>

namespace fairlane::service {

std::optional<std::string> Target::param(std::string_view name) const {
  const auto it = url.params().find(name);
  if (it == url.params().end()) return std::nullopt;
  return std::string((*it).value);
}

std::optional<Target> target_of(std::string_view target) {
  if (const auto url = boost::urls::parse_origin_form(target)) return Target{url->path(), *url};
  const auto url = boost::urls::parse_absolute_uri(target);
  if (!url || (url->scheme_id() != boost::urls::scheme::http &&
               url->scheme_id() != boost::urls::scheme::https)) {
    return std::nullopt;
  }
  // An http(s) URL names its host, and a recipient refuses one that does not (RFC 9110,
  // 4.2.1); a user's name and password in it are an error too (4.2.4).
  if (!url->has_authority() || url->host().empty() || url->has_userinfo()) return std::nullopt;
  std::string path = url->path();
  return Target{path.empty() ? "/" : std::move(path), *url};
}

}  // namespace fairlane::service
