// POST /v1/users: the admin adds a user, whose key is shown once.
#include <boost/json.hpp>
#include <string>

#include "service/routes.hpp"

namespace fairlane::service::routes {

ApiResponse add_user(RouteContext& context, const ApiRequest& request) {
  namespace json = boost::json;
  boost::system::error_code parse_error;
  const json::value body = json::parse(request.body, parse_error);
  const json::object* fields = parse_error ? nullptr : body.if_object();
  const json::value* name = fields ? fields->if_contains("name") : nullptr;
  if (name == nullptr || !name->is_string()) {
    return error_response(400, "invalid_request", R"(send {"name": "...", "weight": 1} as JSON)");
  }
  std::int64_t weight = 1;
  if (const json::value* w = fields->if_contains("weight")) {
    if (!w->is_int64())
      return error_response(400, "invalid_request", "weight must be a whole number");
    weight = w->as_int64();
  }
  auto added = context.store.add_user(std::string(name->as_string()), weight);
  if (!added.ok()) return response_for(answer_for(added.status()));
  // Known to the door from now on, before the user's first upload.
  context.dispatcher.set_weight(added->user.id, added->user.weight);
  return json_response(
      201, json::object{
               {"name", added->user.name}, {"weight", added->user.weight}, {"key", added->key}});
}

}  // namespace fairlane::service::routes
