// Cases 1, 2, 3 and 5: clients that call the provider stand-in themselves, on one
// io_context with the stand-in and a libcurl multi client (CurlProvider).
#include <fmt/format.h>

#include <boost/asio.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <functional>
#include <memory>

#include "fairlane/provider/curl_provider.hpp"
#include "lab_internal.hpp"
#include "provider_sim.hpp"

namespace fairlane::lab {
namespace {

namespace asio = boost::asio;
using SteadyClock = std::chrono::steady_clock;

// A token bucket of `burst` pages refilled at `rate` a second (case 3's limiters).
struct PageBucket {
  double burst;
  double rate;
  double level;
  SteadyClock::time_point at;
  bool try_take(SteadyClock::time_point now) {
    level = std::min(burst, level + rate * std::chrono::duration<double>(now - at).count());
    at = now;
    if (level < 1.0) return false;
    level -= 1.0;
    return true;
  }
};

class Direct {
 public:
  Direct(Case which, const LabConfig& config)
      : which_(which), config_(config), stand_in_(io_, stand_in_config(config)) {}

  CaseResult run() {
    CaseResult result;
    result.which = which_;
    auto port = stand_in_.listen("127.0.0.1", 0);
    if (!port.ok()) {
      result.error = port.status().message();
      return result;
    }
    CurlProviderConfig client;
    client.base_url = fmt::format("http://127.0.0.1:{}", port.value());
    // Case 5 is the pool; the others open a connection for every call they make.
    client.max_connections =
        which_ == Case::client_pool ? static_cast<std::size_t>(config_.pool_connections) : 100'000;
    client.call_timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
        config_.seconds(which_ == Case::client_pool ? config_.client_timeout_s : 600.0)));
    auto provider = make_curl_provider(io_, client);
    if (!provider.ok()) {
      result.error = provider.status().message();
      return result;
    }
    provider_ = std::move(provider).value();
    global_ = PageBucket{
        static_cast<double>(config_.per_minute(config_.requests_per_minute)),
        static_cast<double>(config_.per_minute(config_.requests_per_minute)) / 60.0,
        static_cast<double>(config_.per_minute(config_.requests_per_minute)), SteadyClock::now()};

    start_ = SteadyClock::now();
    asio::steady_timer deadline(io_);
    deadline.expires_after(std::chrono::duration_cast<SteadyClock::duration>(
        std::chrono::duration<double>(config_.seconds(config_.case_deadline_s))));
    deadline.async_wait([&](boost::system::error_code error) {
      if (error) return;
      result.cut_short = true;
      io_.stop();
    });
    schedule_step(0);
    io_.run();

    result.books = std::move(books_);
    result.first_failure = first_failure_;
    result.client_retries = client_retries_;
    result.retried_after_refusal = retried_after_refusal_;
    result.duration_s = now_s();
    read_stand_in_stats(stand_in_.stats_json(), config_, result);
    provider_.reset();
    stand_in_.stop();
    return result;
  }

 private:
  double now_s() const {
    return std::chrono::duration<double>(SteadyClock::now() - start_).count();
  }

  void schedule_step(std::size_t step) {
    if (step >= config_.ramp.size()) {
      ramp_done_ = true;
      maybe_done();
      return;
    }
    auto timer = std::make_shared<asio::steady_timer>(io_);
    timer->expires_at(
        start_ + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(
                     config_.seconds(config_.step_s * static_cast<double>(step)))));
    timer->async_wait([this, step, timer](boost::system::error_code error) {
      if (error) return;
      const int before = step == 0 ? 0 : config_.ramp[step - 1];
      for (int user = before; user < config_.ramp[step]; ++user) upload(user, config_.ramp[step]);
      schedule_step(step + 1);
    });
  }

  void upload(int user, int users_now) {
    BookRecord book;
    book.user = user;
    book.users_at_upload = users_now;
    book.uploaded_s = now_s();
    book.pages.resize(static_cast<std::size_t>(config_.pages_per_book));
    books_.push_back(std::move(book));
    const std::size_t index = books_.size() - 1;
    auto& user_bucket = user_buckets_.emplace_back(
        PageBucket{config_.user_burst, config_.user_pages_per_s * config_.time_scale,
                   config_.user_burst, SteadyClock::now()});
    switch (which_) {
      case Case::one_at_a_time:
        send(index, 0, /*then_next=*/true, 0);
        break;
      case Case::all_at_once:
        for (int page = 0; page < config_.pages_per_book; ++page) send(index, page, false, 0);
        break;
      case Case::client_pool:
        for (int page = 0; page < config_.pages_per_book; ++page) {
          send(index, page, false, 0, SteadyClock::now());
        }
        break;
      case Case::token_bucket:
        for (int page = 0; page < config_.pages_per_book; ++page) {
          const auto now = SteadyClock::now();
          if (user_bucket.try_take(now) && global_.try_take(now)) {
            send(index, page, false, 0);
          } else {
            end_page(index, page, Fate::our_429, 0);
          }
        }
        break;
      case Case::fairlane:
        break;
    }
  }

  // `started`: when the client's current attempt at this page began (case 5 gives each
  // attempt the client timeout, its own 429 retries included).
  void send(std::size_t book, int page, bool then_next, int attempt,
            SteadyClock::time_point started = {}) {
    ProviderRequest request{
        std::string(kPrompt),
        page_text(books_[book].user, page, static_cast<std::size_t>(config_.page_bytes)), "lab",
        config_.max_tokens};
    provider_->call(
        request, [this, book, page, then_next, attempt, started](const ProviderOutcome& outcome) {
          answered(book, page, then_next, attempt, started, outcome);
        });
  }

  // Not inlined into the callback: GCC 12 at -O3 then warns, wrongly, that the outcome's
  // variant may be uninitialized (-Wmaybe-uninitialized).
  [[gnu::noinline]] void answered(std::size_t book, int page, bool then_next, int attempt,
                                  SteadyClock::time_point started, const ProviderOutcome& outcome) {
    const Fate fate = fate_of(outcome);
    const std::int64_t tokens = billed_tokens(outcome);
    if (which_ == Case::client_pool && fate != Fate::done) {
      // The pool's client is an SDK: it waits out a 429 or 503 (Retry-After, else 1 s) and
      // calls again, within the client timeout of its attempt; an attempt that runs out of
      // time is given up and, once, begun again.
      const auto timeout = std::chrono::duration_cast<SteadyClock::duration>(
          std::chrono::duration<double>(config_.seconds(config_.client_timeout_s)));
      const auto now = SteadyClock::now();
      if (fate != Fate::timeout) {
        const auto wait = std::chrono::duration_cast<SteadyClock::duration>(
            outcome.limits.retry_after.value_or(std::chrono::duration_cast<Clock::duration>(
                std::chrono::duration<double>(config_.seconds(1.0)))));
        if (now + wait < started + timeout) {
          ++retried_after_refusal_;
          auto timer = std::make_shared<asio::steady_timer>(io_, wait);
          timer->async_wait([this, book, page, then_next, attempt, started,
                             timer](boost::system::error_code error) {
            if (!error) send(book, page, then_next, attempt, started);
          });
          return;
        }
      }
      if (attempt == 0) {
        ++client_retries_;
        send(book, page, then_next, 1, now);
        return;
      }
    }
    end_page(book, page, fate, tokens);
    if (then_next && page + 1 < config_.pages_per_book) send(book, page + 1, true, 0);
  }

  void end_page(std::size_t book, int page, Fate fate, std::int64_t tokens) {
    PageRecord& record = books_[book].pages[static_cast<std::size_t>(page)];
    record.fate = fate;
    record.ended_s = now_s();
    record.tokens = tokens;
    if (fate != Fate::done && !first_failure_) {
      first_failure_ = FirstFailure{record.ended_s, users_at(config_, record.ended_s), fate};
    }
    ++ended_;
    maybe_done();
  }

  void maybe_done() {
    if (ramp_done_ && ended_ == static_cast<std::size_t>(config_.ramp.back()) *
                                    static_cast<std::size_t>(config_.pages_per_book)) {
      io_.stop();
    }
  }

  const Case which_;
  const LabConfig& config_;
  asio::io_context io_;
  provider_sim::Server stand_in_;
  std::unique_ptr<Provider> provider_;
  std::vector<BookRecord> books_;
  std::vector<PageBucket> user_buckets_;
  PageBucket global_{};
  SteadyClock::time_point start_;
  std::optional<FirstFailure> first_failure_;
  std::size_t ended_ = 0;
  std::int64_t client_retries_ = 0;
  std::int64_t retried_after_refusal_ = 0;
  bool ramp_done_ = false;
};

}  // namespace

std::int64_t billed_tokens(const ProviderOutcome& outcome) {
  return std::visit(
      [](const auto& kind) -> std::int64_t {
        if constexpr (std::is_same_v<std::decay_t<decltype(kind)>, outcome::Ok>) {
          return kind.input_tokens + kind.output_tokens;
        } else {
          return 0;
        }
      },
      outcome.kind);
}

Fate fate_of(const ProviderOutcome& outcome) {
  return std::visit(
      [&](const auto& kind) -> Fate {
        using T = std::decay_t<decltype(kind)>;
        if constexpr (std::is_same_v<T, outcome::Ok>) {
          return Fate::done;
        } else if constexpr (std::is_same_v<T, outcome::RateLimited>) {
          const auto& requests = outcome.limits.requests.remaining;
          return requests && *requests == 0 ? Fate::provider_429_requests
                                            : Fate::provider_429_tokens;
        } else if constexpr (std::is_same_v<T, outcome::Overloaded>) {
          return Fate::provider_503;
        } else if constexpr (std::is_same_v<T, outcome::Timeout>) {
          return Fate::timeout;
        } else {
          return Fate::failed;
        }
      },
      outcome.kind);
}

provider_sim::Config stand_in_config(const LabConfig& config) {
  provider_sim::Config c;
  c.requests_per_minute = config.per_minute(config.requests_per_minute);
  c.tokens_per_minute = config.per_minute(config.tokens_per_minute);
  c.max_in_flight = config.max_in_flight;
  c.latency_ms = config.seconds(config.latency_s) * 1000.0;
  c.output_tokens = config.output_tokens;
  c.price_per_mtok = config.price_per_mtok;
  return c;
}

std::string page_text(int user, int page, std::size_t bytes) {
  std::string text = fmt::format("Book of user {}, page {}. ", user + 1, page + 1);
  const std::string filler = "It was a bright cold day in April, and the clocks were striking. ";
  while (text.size() < bytes) text += filler;
  text.resize(bytes);
  return text;
}

void read_stand_in_stats(const std::string& json, const LabConfig& config, CaseResult& result) {
  boost::system::error_code error;
  const auto value = boost::json::parse(json, error);
  if (error || !value.is_object()) return;
  const auto& o = value.as_object();
  const auto number = [&](std::string_view key) -> double {
    const auto* v = o.if_contains(key);
    return v && v->is_number() ? v->to_number<double>() : 0.0;
  };
  result.provider_requests = static_cast<std::int64_t>(number("requests"));
  result.provider_429 = static_cast<std::int64_t>(number("rejected_429"));
  result.provider_503 = static_cast<std::int64_t>(number("rejected_503"));
  result.peak_in_flight = static_cast<std::int64_t>(number("max_in_flight_seen"));
  result.spend_usd = number("cost_usd");
  // The busiest full minute's tokens over the limit (minutes are the stand-in's own; the
  // first and the last are partial).
  result.busiest_minute_utilisation.reset();
  const auto limit = static_cast<double>(config.per_minute(config.tokens_per_minute));
  if (const auto* series = o.if_contains("per_minute");
      series && series->is_array() && series->as_array().size() >= 3 && limit > 0) {
    const auto& minutes = series->as_array();
    double best = 0;
    for (std::size_t i = 1; i + 1 < minutes.size(); ++i) {
      const auto* m = minutes[i].if_object();
      if (m == nullptr) continue;
      double tokens = 0;
      for (const char* key : {"input_tokens", "output_tokens"}) {
        if (const auto* v = m->if_contains(key); v && v->is_number())
          tokens += v->to_number<double>();
      }
      best = std::max(best, tokens);
    }
    result.busiest_minute_utilisation = best / limit;
  }
}

CaseResult run_direct(Case which, const LabConfig& config) {
  Direct direct(which, config);
  return direct.run();
}

}  // namespace fairlane::lab
