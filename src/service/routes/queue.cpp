// GET /v1/queue and GET /metrics: the service's state, for users, the admin and scrapers.
#include <boost/json.hpp>
#include <cmath>
#include <map>

#include "service/routes.hpp"

namespace fairlane::service::routes {
namespace json = boost::json;

ApiResponse queue(RouteContext& context, bool admin) {
  const Dispatcher& dispatcher = context.dispatcher;
  const Budget& budget = dispatcher.budget();
  const auto level = [](const TokenBucket& bucket) -> json::value {
    if (bucket.unlimited()) return nullptr;
    return bucket.level();
  };
  // Without any limit (each flag 0) the rate is unbounded and nothing binds: null, as JSON
  // has no infinity.
  const double mu = dispatcher.estimator().mu();
  const bool bounded = std::isfinite(mu);
  json::object body{{"lanes", dispatcher.scheduler().lane_count()},
                    {"queued", dispatcher.scheduler().size()},
                    {"held", dispatcher.held()},
                    {"in_flight", dispatcher.in_flight()},
                    {"mu", bounded ? json::value(mu) : json::value(nullptr)},
                    {"binding", bounded ? json::value(to_string(dispatcher.estimator().binding()))
                                        : json::value(nullptr)},
                    {"buckets", json::object{{"requests", level(budget.requests())},
                                             {"tokens", level(budget.tokens())}}},
                    {"paused", dispatcher.paused_until().has_value()}};
  // Who this is and who dispatches (DESIGN.md section 10): a single node leads itself.
  if (const Membership* m = context.config.membership) {
    body["instance"] = m->instance;
    body["role"] = m->leading ? "leader" : "follower";
    body["leader"] = m->leader.empty() ? json::value(nullptr) : json::value(m->leader);
  }
  // How well the door's promises were kept lately (the last finished jobs).
  const PromiseAccuracy accuracy = context.promises.accuracy();
  const auto number = [](std::optional<double> v) -> json::value {
    if (!v) return nullptr;
    return std::round(*v * 1000.0) / 1000.0;
  };
  body["promises"] = json::object{{"finished", accuracy.finished},
                                  {"actual_over_promised_p50", number(accuracy.ratio_p50)},
                                  {"actual_over_promised_p90", number(accuracy.ratio_p90)},
                                  {"lateness_p50_seconds", number(accuracy.lateness_p50)},
                                  {"lateness_p90_seconds", number(accuracy.lateness_p90)}};
  if (admin) {
    // Every user with pages queued or in flight; the users table is small, and the pages in
    // flight are at most the cap on calls.
    auto users = context.store.users();
    if (!users.ok()) return response_for(answer_for(users.status()));
    auto in_flight = context.store.in_flight_by_user();
    if (!in_flight.ok()) return response_for(answer_for(in_flight.status()));
    const std::map<UserId, std::int64_t> flying(in_flight->begin(), in_flight->end());
    const FairScheduler& scheduler = dispatcher.scheduler();
    json::array lanes;
    for (const User& user : users.value()) {
      const std::int64_t queued = scheduler.lane_length(user.id);
      const auto it = flying.find(user.id);
      const std::int64_t calls = it == flying.end() ? 0 : it->second;
      if (queued == 0 && calls == 0) continue;
      lanes.push_back(json::object{{"user", user.name},
                                   {"weight", user.weight},
                                   {"queued", queued},
                                   {"queued_tokens", scheduler.lane_tokens(user.id)},
                                   {"in_flight", calls}});
    }
    body["users"] = std::move(lanes);
  }
  return json_response(200, body);
}

ApiResponse metrics(RouteContext& context, UploadGauges uploads) {
  ApiResponse response;
  response.content_type = "text/plain; version=0.0.4";
  const Membership* m = context.config.membership;
  response.body = render_metrics(context.dispatcher, context.door_refusals, context.promises,
                                 m == nullptr || m->leading, context.config.retention, uploads);
  return response;
}

}  // namespace fairlane::service::routes
