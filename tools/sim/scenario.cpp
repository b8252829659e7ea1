#include "scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>
#include <fstream>
#include <set>
#include <sstream>

namespace fairlane::sim {
namespace {

namespace json = boost::json;

// The latest time a scenario may name: about three years, far inside what virtual time in
// nanoseconds can hold.
constexpr double kMaxTime_s = 1e8;

// Reads fields of one JSON object, remembering which it read so that any other key (a
// typo) is reported instead of silently ignored. The first problem wins.
class Fields {
 public:
  Fields(const json::value& value, std::string where, Status& status)
      : where_(std::move(where)), status_(status) {
    if (const auto* object = value.if_object()) {
      object_ = object;
    } else {
      fail(fmt::format("{} must be an object", where_));
    }
  }

  template <typename T>
  void number(const char* key, T& out, double min, double max) {
    const json::value* v = find(key);
    if (v == nullptr) return;
    double d = 0.0;
    if (v->is_int64()) {
      d = static_cast<double>(v->as_int64());
    } else if (v->is_uint64()) {
      d = static_cast<double>(v->as_uint64());
    } else if (v->is_double()) {
      d = v->as_double();
    } else {
      return fail(fmt::format("{}.{} must be a number", where_, key));
    }
    if (d < min || d > max) {
      return fail(fmt::format("{}.{} is {}, outside {} to {}", where_, key, d, min, max));
    }
    if constexpr (std::is_integral_v<T>) {
      if (d != static_cast<double>(static_cast<T>(d))) {
        return fail(fmt::format("{}.{} must be a whole number", where_, key));
      }
    }
    out = static_cast<T>(d);
  }

  // A number that may be left out (then `out` stays empty).
  template <typename T>
  void optional_number(const char* key, std::optional<T>& out, double min, double max) {
    if (find(key) == nullptr) return;
    T value{};
    number(key, value, min, max);
    out = value;
  }

  void string(const char* key, std::string& out) {
    const json::value* v = find(key);
    if (v == nullptr) return;
    if (!v->is_string()) return fail(fmt::format("{}.{} must be a string", where_, key));
    out = std::string(v->as_string());
  }

  const json::value* child(const char* key) { return find(key); }

  // Reports keys that were never read.
  void finish() {
    if (object_ == nullptr) return;
    for (const auto& item : *object_) {
      const std::string key(item.key());
      if (!read_.contains(key)) {
        return fail(fmt::format("{} has an unknown field '{}'", where_, key));
      }
    }
  }

  void fail(std::string message) {
    if (status_.ok()) status_ = Status(StatusCode::invalid_argument, std::move(message));
  }
  const std::string& where() const { return where_; }

 private:
  const json::value* find(const char* key) {
    read_.insert(key);
    if (object_ == nullptr) return nullptr;
    return object_->if_contains(key);
  }

  const json::object* object_ = nullptr;
  std::string where_;
  Status& status_;
  std::set<std::string> read_;
};

void read_distribution(const json::value* value, const std::string& where, Distribution& out,
                       Status& status) {
  if (value == nullptr) return;
  Fields f(*value, where, status);
  std::string kind = "fixed";
  f.string("kind", kind);
  if (kind == "fixed") {
    out.kind = Distribution::Kind::fixed;
    f.number("value", out.value, 0.0, 1e12);
  } else if (kind == "lognormal") {
    out.kind = Distribution::Kind::lognormal;
    f.number("median", out.median, 1e-9, 1e12);
    f.number("p90", out.p90, 1e-9, 1e12);
    if (out.p90 < out.median) f.fail(fmt::format("{}: p90 must be at least the median", where));
  } else if (kind == "quantiles") {
    out.kind = Distribution::Kind::quantiles;
    const json::value* points = f.child("points");
    const json::array* array = points != nullptr ? points->if_array() : nullptr;
    if (array == nullptr || array->size() < 2) {
      f.fail(fmt::format("{}.points must be a list of at least two [p, value] pairs", where));
    } else {
      out.quantiles.clear();
      for (const json::value& point : *array) {
        const json::array* pair = point.if_array();
        if (pair == nullptr || pair->size() != 2 || !(*pair)[0].is_number() ||
            !(*pair)[1].is_number()) {
          f.fail(fmt::format("{}.points: each point is [p, value]", where));
          break;
        }
        out.quantiles.emplace_back((*pair)[0].to_number<double>(), (*pair)[1].to_number<double>());
      }
      const auto& q = out.quantiles;
      bool ordered = q.front().first == 0.0 && q.back().first == 1.0;
      for (std::size_t i = 1; i < q.size(); ++i) {
        ordered = ordered && q[i].first > q[i - 1].first && q[i].second >= q[i - 1].second;
      }
      if (status.ok() && (!ordered || q.front().second <= 0.0)) {
        f.fail(
            fmt::format("{}.points must run from p = 0 to p = 1 with p and values rising, "
                        "values above 0",
                        where));
      }
    }
  } else {
    f.fail(fmt::format("{}.kind is '{}': use fixed, lognormal or quantiles", where, kind));
  }
  f.finish();
}

void read_provider_changes(const json::value* value, std::vector<ProviderChange>& out,
                           Status& status) {
  if (value == nullptr) return;
  const json::array* array = value->if_array();
  if (array == nullptr) {
    if (status.ok()) {
      status = Status(StatusCode::invalid_argument, "provider.changes must be a list");
    }
    return;
  }
  for (std::size_t i = 0; i < array->size(); ++i) {
    const std::string where = fmt::format("provider.changes[{}]", i);
    Fields f((*array)[i], where, status);
    ProviderChange change;
    if (f.child("at_s") == nullptr) f.fail(fmt::format("{} needs at_s, when it happens", where));
    f.number("at_s", change.at_s, 0.0, kMaxTime_s);
    f.optional_number("rpm", change.requests_per_minute, 0.0, 1e10);
    f.optional_number("tpm", change.tokens_per_minute, 0.0, 1e10);
    f.optional_number("max_in_flight", change.max_in_flight, 0.0, 1e9);
    f.optional_number("latency_scale", change.latency_scale, 1e-6, 1e6);
    f.finish();
    if (!change.requests_per_minute && !change.tokens_per_minute && !change.max_in_flight &&
        !change.latency_scale) {
      f.fail(
          fmt::format("{} changes nothing: give rpm, tpm, max_in_flight or latency_scale", where));
    }
    if (!out.empty() && change.at_s <= out.back().at_s) {
      f.fail(fmt::format("{}.at_s is {}: each change must come after the one before it ({})", where,
                         change.at_s, out.back().at_s));
    }
    out.push_back(change);
  }
}

}  // namespace

Result<Scenario> parse_scenario(const std::string& text, const std::string& origin) {
  boost::system::error_code error;
  const json::value root = json::parse(text, error);
  if (error) {
    return Status(StatusCode::invalid_argument,
                  fmt::format("{} is not valid JSON: {}", origin, error.message()));
  }
  Status status;
  Scenario s;
  Fields top(root, "scenario", status);
  top.string("name", s.name);
  top.string("description", s.description);
  top.number("seed", s.seed, 0.0, 9e15);
  top.number("window_s", s.window_s, 1.0, 1e9);
  if (top.child("eta_snapshot_s") != nullptr) {
    double at = 0.0;
    top.number("eta_snapshot_s", at, 0.0, kMaxTime_s);
    s.eta_snapshot_s = at;
  }
  if (const json::value* reseed = top.child("reseed")) {
    Fields f(*reseed, "reseed", status);
    double at = 0.0;
    f.number("at_s", at, 0.0, kMaxTime_s);
    f.number("seed", s.reseed_seed, 0.0, 9e15);
    f.finish();
    s.reseed_at_s = at;
  }

  if (const json::value* p = top.child("provider")) {
    Fields f(*p, "provider", status);
    f.number("rpm", s.provider.requests_per_minute, 0.0, 1e10);
    f.number("tpm", s.provider.tokens_per_minute, 0.0, 1e10);
    f.number("max_in_flight", s.provider.max_in_flight, 0.0, 1e9);
    read_distribution(f.child("latency_s"), "provider.latency_s", s.provider.latency_s, status);
    read_distribution(f.child("output_tokens"), "provider.output_tokens", s.provider.output_tokens,
                      status);
    read_provider_changes(f.child("changes"), s.provider.changes, status);
    f.finish();
  }
  if (const json::value* p = top.child("fairlane")) {
    Fields f(*p, "fairlane", status);
    FairlaneSettings& c = s.fairlane;
    f.number("rpm", c.requests_per_minute, 0.0, 1e10);
    f.number("tpm", c.tokens_per_minute, 0.0, 1e10);
    f.number("max_in_flight", c.max_in_flight, 0.0, 1e9);
    f.number("max_tokens", c.max_tokens, 1.0, 1e9);
    f.number("max_wait_s", c.max_wait_s, 0.0, 1e18);
    f.number("promise_window_s", c.promise_window_s, 0.0, 60.0);
    f.number("max_queued_pages_per_user", c.max_queued_pages_per_user, 1.0, 1e15);
    f.number("quantum", c.quantum, 0.0, 1e10);
    f.number("initial_tokens_per_page", c.initial_tokens_per_page, 1.0, 1e9);
    f.number("initial_latency_s", c.initial_latency_s, 0.0, 1e6);
    f.finish();
  }
  if (const json::value* users = top.child("users")) {
    const json::array* array = users->if_array();
    if (array == nullptr) top.fail("scenario.users must be a list");
    for (std::size_t i = 0; array != nullptr && i < array->size(); ++i) {
      Fields f((*array)[i], fmt::format("users[{}]", i), status);
      UserSpec user;
      f.string("name", user.name);
      f.number("weight", user.weight, 1.0, 1000.0);
      if (user.name.empty()) f.fail(fmt::format("users[{}] needs a name", i));
      f.finish();
      s.users.push_back(user);
    }
  }
  if (const json::value* arrivals = top.child("arrivals")) {
    const json::array* array = arrivals->if_array();
    if (array == nullptr) top.fail("scenario.arrivals must be a list");
    for (std::size_t i = 0; array != nullptr && i < array->size(); ++i) {
      Fields f((*array)[i], fmt::format("arrivals[{}]", i), status);
      Arrival a;
      f.number("at_s", a.at_s, 0.0, kMaxTime_s);
      f.string("user", a.user);
      f.number("users", a.users, 0.0, 1e9);
      f.string("user_prefix", a.user_prefix);
      f.number("books", a.books, 1.0, 1e9);
      f.number("pages", a.pages, 1.0, 1e9);
      f.number("input_tokens", a.input_tokens, 0.0, 1e10);
      f.finish();
      bool known = a.users > 0;
      for (const UserSpec& u : s.users) known = known || u.name == a.user;
      if (!known) {
        f.fail(fmt::format("arrivals[{}].user '{}' is not in scenario.users (or give \"users\": N)",
                           i, a.user));
      }
      s.arrivals.push_back(a);
    }
  }
  if (const json::value* poisson = top.child("poisson")) {
    const json::array* array = poisson->if_array();
    if (array == nullptr) top.fail("scenario.poisson must be a list");
    for (std::size_t i = 0; array != nullptr && i < array->size(); ++i) {
      Fields f((*array)[i], fmt::format("poisson[{}]", i), status);
      PoissonArrivals p;
      f.number("users", p.users, 1.0, 1e9);
      f.string("user_prefix", p.user_prefix);
      f.number("rate_per_s", p.rate_per_s, 1e-12, 1e9);
      f.number("from_s", p.from_s, 0.0, kMaxTime_s);
      f.number("until_s", p.until_s, 0.0, kMaxTime_s);
      if (const json::value* pages = f.child("pages"); pages != nullptr && pages->is_object()) {
        p.pages_drawn.emplace();
        read_distribution(pages, fmt::format("poisson[{}].pages", i), *p.pages_drawn, status);
      } else {
        f.number("pages", p.pages, 1.0, 1e9);
      }
      f.number("input_tokens", p.input_tokens, 0.0, 1e10);
      f.finish();
      s.poisson.push_back(p);
    }
  }
  if (const json::value* schedulers = top.child("schedulers")) {
    const json::array* array = schedulers->if_array();
    s.schedulers.clear();
    for (std::size_t i = 0; array != nullptr && i < array->size(); ++i) {
      const json::string* name = (*array)[i].if_string();
      if (name != nullptr && *name == "fair") {
        s.schedulers.push_back(SchedulerKind::fair);
      } else if (name != nullptr && *name == "fifo") {
        s.schedulers.push_back(SchedulerKind::fifo);
      } else {
        top.fail(fmt::format(R"(scenario.schedulers[{}] must be "fair" or "fifo")", i));
      }
    }
    if (array == nullptr || s.schedulers.empty()) {
      top.fail(R"(scenario.schedulers must be a non-empty list of "fair" and "fifo")");
    }
  }
  top.string("light_user", s.light_user);
  if (!s.light_user.empty() && std::none_of(s.users.begin(), s.users.end(), [&](const UserSpec& u) {
        return u.name == s.light_user;
      })) {
    top.fail(fmt::format("scenario.light_user '{}' is not in scenario.users", s.light_user));
  }
  top.finish();
  if (status.ok() && s.arrivals.empty() && s.poisson.empty()) {
    top.fail("a scenario needs arrivals or poisson streams: nothing would happen");
  }
  if (!status.ok()) {
    return Status(StatusCode::invalid_argument, fmt::format("{}: {}", origin, status.message()));
  }
  return s;
}

Result<Scenario> load_scenario(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Status(StatusCode::not_found,
                  fmt::format("cannot read scenario {}: check the path", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_scenario(text.str(), path);
}

}  // namespace fairlane::sim
