#include "simulation.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <queue>
#include <random>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "core/fake_clock.hpp"
#include "distribution.hpp"
#include "fairlane/core/budget.hpp"
#include "fairlane/core/dispatch_policy.hpp"
#include "fairlane/core/door.hpp"
#include "fairlane/core/estimator.hpp"
#include "fairlane/core/fair_scheduler.hpp"
#include "fairlane/core/page_order.hpp"
#include "fairlane/core/promise_order.hpp"
#include "fairlane/core/promise_watch.hpp"
#include "fairlane/core/promise_window.hpp"
#include "provider.hpp"

namespace fairlane::sim {
namespace {

using Ns = std::int64_t;

Ns to_ns(double seconds) {
  return std::llround(seconds * 1e9);
}
double to_s(Ns ns) {
  return static_cast<double>(ns) / 1e9;
}
double as_double(std::int64_t n) {
  return static_cast<double>(n);
}

struct Book {
  UserId user = 0;
  std::string user_name;
  double arrival_s = 0.0;
  std::int64_t pages = 0;
  std::int64_t input_tokens = 0;
  std::int64_t ended = 0;             // pages done or failed
  std::optional<std::size_t> result;  // index into Metrics::books once accepted
};

enum class EventKind { arrival, completion, wake, snapshot, promise_window, review };

struct Event {
  Ns at;
  std::int64_t seq;  // ties resolve in the order events were made
  EventKind kind;
  std::size_t index;
  bool operator>(const Event& other) const {
    return at != other.at ? at > other.at : seq > other.seq;
  }
};

// ---- the provider model ------------------------------------------------------------------

// The provider as the scenario describes it, knowing nothing of fairlane: limits of its own,
// enforced with a Budget of its own (RPM; TPM counting input + max_tokens on arrival and
// corrected on completion, as real providers do; the in-flight cap), and each accepted
// call's latency and output tokens drawn from the scenario's distributions.
class SimulatedProvider {
 public:
  struct Accepted {
    Lease lease;  // the call's hold on the provider's own budget
    double latency_s = 0.0;
    std::int64_t output_tokens = 0;
  };
  // Over a limit: requests or tokens (a 429), or concurrency (a 503).
  struct Refused {
    Limit limit;
  };

  // `clock` and `rng` must outlive the provider.
  SimulatedProvider(const Clock& clock, const ProviderModel& model, std::int64_t max_tokens,
                    std::mt19937_64& rng)
      : model_(model), max_tokens_(max_tokens), rng_(rng), provider_(clock, model) {}

  // A call that asks for `reserved_tokens` (its input + max_tokens).
  std::variant<Accepted, Refused> call(std::int64_t reserved_tokens) {
    Admission admission = provider_.admit(reserved_tokens);
    if (auto* lease = std::get_if<Lease>(&admission)) {
      const double latency_s = provider_.latency_s(rng_);
      const double output = sample(model_.output_tokens, rng_);
      return Accepted{std::move(*lease), latency_s,
                      std::clamp<std::int64_t>(std::llround(output), 0, max_tokens_)};
    }
    const auto* wait = std::get_if<Wait>(&admission);
    return Refused{wait != nullptr ? wait->limit : Limit::tokens};
  }

  // What the provider's rate-limit headers announce with every answer, as a real provider's
  // x-ratelimit-limit-* and -remaining-* do: its limits now and what its buckets hold, which
  // fairlane's policy follows.
  [[nodiscard]] Announced announced() const {
    const BudgetLimits& now = provider_.limits();
    const Budget& budget = provider_.budget();
    Announced said;
    if (now.requests_per_minute > 0) {
      said.requests_limit = now.requests_per_minute;
      said.requests_remaining = budget.requests().remaining();
    }
    if (now.tokens_per_minute > 0) {
      said.tokens_limit = now.tokens_per_minute;
      said.tokens_remaining = budget.tokens().remaining();
    }
    return said;
  }

  // An accepted call has ended: the provider counts the tokens it used.
  static void finish(Accepted& call, std::int64_t used_tokens) { call.lease.settle(used_tokens); }

 private:
  const ProviderModel& model_;
  const std::int64_t max_tokens_;
  std::mt19937_64& rng_;
  Provider provider_;  // its limits and latency, as they change during the run
};

// ---- the dispatch side: fairlane's own DispatchPolicy ------------------------------------

// First come first served, to compare fair order with: one queue for everybody.
class FifoOrder final : public PageOrder {
 public:
  [[nodiscard]] const QueuedPage* peek() override {
    return pages_.empty() ? nullptr : &pages_.front();
  }
  QueuedPage take() override {
    QueuedPage page = pages_.front();
    pages_.pop_front();
    return page;
  }
  void add(const QueuedPage& page) override { pages_.push_back(page); }
  void put_back(const QueuedPage& page) override { pages_.push_front(page); }
  void settle(const QueuedPage& /*page*/, std::int64_t /*used*/) override {}  // no lanes
  void refund(const QueuedPage& /*page*/) override {}
  std::vector<QueuedPage> remove_job(UserId /*user*/, JobId job) override {
    std::vector<QueuedPage> removed;
    std::erase_if(pages_, [&](const QueuedPage& page) {
      if (page.job_id != job) return false;
      removed.push_back(page);
      return true;
    });
    return removed;
  }

 private:
  std::deque<QueuedPage> pages_;
};

}  // namespace

BudgetLimits limits_of(const FairlaneSettings& fairlane) {
  return BudgetLimits::served(fairlane.requests_per_minute, fairlane.tokens_per_minute,
                              fairlane.max_in_flight);
}

namespace {

// The service's settings for everything the scenario does not set (DispatcherConfig's
// defaults): 1 s pauses after a refusal with no Retry-After, 100 returns at most.
DispatchPolicyConfig policy_config(const Scenario& scenario) {
  DispatchPolicyConfig config;
  config.seed = scenario.seed;
  return config;
}

struct Call {
  QueuedPage page;
  std::optional<Lease> lease;                              // fairlane's budget
  std::optional<SimulatedProvider::Accepted> at_provider;  // the provider's
  Ns dispatched_at = 0;
  std::int64_t input_tokens = 0;
};

enum class PageState : std::uint8_t { queued, in_flight, ended };

class Run {
 public:
  Run(const Scenario& scenario, SchedulerKind kind)
      : scenario_(scenario),
        kind_(kind),
        rng_(scenario.seed),
        wall_clock_(clock_),
        budget_(clock_, limits_of(scenario.fairlane)),
        provider_(clock_, scenario.provider, scenario.fairlane.max_tokens, rng_),
        scheduler_(scenario.fairlane.quantum),
        estimator_(
            scheduler_,
            EstimatorConfig{.limits = budget_.limits(),
                            .initial_tokens_per_page = scenario.fairlane.initial_tokens_per_page,
                            .initial_latency_s = scenario.fairlane.initial_latency_s},
            &budget_, &clock_),
        fair_order_(scheduler_, estimator_, clock_,
                    PromiseOrderConfig{.keep_promises = scenario.fairlane.keep_promises}),
        door_(scheduler_, estimator_,
              DoorConfig{.max_wait_s = scenario.fairlane.max_wait_s,
                         .max_queued_pages_per_user = scenario.fairlane.max_queued_pages_per_user,
                         .tokens_per_minute = scenario.fairlane.tokens_per_minute}),
        policy_(clock_, wall_clock_, budget_, order(), estimator_, policy_config(scenario)),
        promise_window_(clock_,
                        std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(scenario.fairlane.promise_window_s))) {
    metrics_.scheduler = kind;
  }

  Metrics run() {
    const auto wall_start = std::chrono::steady_clock::now();
    make_books();
    const std::int64_t max_events = 64 * total_pages_ + 1'000'000;
    bool reseed = scenario_.reseed_at_s.has_value();
    const Ns reseed_at = reseed ? to_ns(scenario_.reseed_at_s.value()) : 0;
    while (!events_.empty()) {
      const Ns at = events_.top().at;
      if (reseed && at >= reseed_at) {
        rng_.seed(scenario_.reseed_seed);
        reseed = false;
      }
      advance_to(at);
      // The service's once-a-second review of promises runs beside its dispatch loop and
      // wakes it for nothing: an instant of reviews alone dispatches nothing.
      bool reviews_only = true;
      while (!events_.empty() && events_.top().at == at) {
        const Event event = events_.top();
        events_.pop();
        handle(event);
        reviews_only = reviews_only && event.kind == EventKind::review;
        if (++metrics_.events > max_events) {
          throw std::runtime_error("the simulation does not converge: too many events");
        }
      }
      if (!reviews_only) dispatch();
    }
    finish();
    metrics_.wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    return std::move(metrics_);
  }

 private:
  Ns now() const { return (clock_.now() - Clock::time_point{}).count(); }

  void push(Ns at, EventKind kind, std::size_t index) {
    events_.push(Event{at, next_seq_++, kind, index});
  }

  UserId user_id(const std::string& name, std::int64_t weight) {
    const auto [it, added] = user_ids_.try_emplace(name, static_cast<UserId>(user_ids_.size() + 1));
    if (added) {
      user_names_[it->second] = name;
      scheduler_.set_weight(it->second, weight);
      weights_[it->second] = weight;
    }
    return it->second;
  }

  void make_books() {
    std::unordered_map<std::string, std::int64_t> weights;
    for (const UserSpec& user : scenario_.users) weights[user.name] = user.weight;
    const auto add_book = [&](const std::string& user, double at, std::int64_t pages,
                              std::int64_t input) {
      const auto w = weights.contains(user) ? weights[user] : 1;
      books_.push_back(Book{user_id(user, w), user, at, pages, input, 0, std::nullopt});
      total_pages_ += pages;
    };
    for (const Arrival& a : scenario_.arrivals) {
      for (std::int64_t u = 1; u <= std::max<std::int64_t>(a.users, 1); ++u) {
        const std::string user = a.users > 0 ? a.user_prefix + std::to_string(u) : a.user;
        for (std::int64_t b = 0; b < a.books; ++b) add_book(user, a.at_s, a.pages, a.input_tokens);
      }
    }
    for (const PoissonArrivals& p : scenario_.poisson) {
      std::exponential_distribution<double> gap(p.rate_per_s);
      std::uniform_int_distribution<std::int64_t> who(1, p.users);
      // Arrival times, each a random gap after the last: a walk, not a counted loop.
      double t = p.from_s + gap(rng_);
      while (t < p.until_s) {
        const std::string user = p.user_prefix + std::to_string(who(rng_));
        const std::int64_t pages =
            p.pages_drawn ? std::max<std::int64_t>(1, std::llround(sample(*p.pages_drawn, rng_)))
                          : p.pages;
        add_book(user, t, pages, p.input_tokens);
        t += gap(rng_);
      }
    }
    std::stable_sort(books_.begin(), books_.end(),
                     [](const Book& a, const Book& b) { return a.arrival_s < b.arrival_s; });
    for (std::size_t i = 0; i < books_.size(); ++i)
      push(to_ns(books_[i].arrival_s), EventKind::arrival, i);
    if (scenario_.eta_snapshot_s && kind_ == SchedulerKind::fair) {
      push(to_ns(*scenario_.eta_snapshot_s), EventKind::snapshot, 0);
    }
    page_states_.reserve(static_cast<std::size_t>(total_pages_) + 1);
    page_states_.push_back(PageState::ended);  // page ids start at 1
  }

  // ---- time, windows and utilisation -------------------------------------------------

  void advance_to(Ns at) {
    const Ns from = now();
    if (at <= from) return;
    // A backlog that emptied in the last instant ends before time moves on.
    if (period_ && total_queued_ == 0) close_period();
    // Integrate what is measured over time before anything changes.
    if (total_queued_ > 0 && first_backlog_ns_) {
      const Ns start = std::max(from, *first_backlog_ns_ + to_ns(scenario_.window_s));
      if (at >= start && !period_) open_period(start);
      if (at > start) {
        steady_s_ += to_s(at - start);
        // At the limits in force: lower while the provider announces less.
        steady_refill_requests_ +=
            as_double(budget_.requests().capacity()) / 60.0 * to_s(at - start);
        steady_refill_tokens_ += as_double(budget_.tokens().capacity()) / 60.0 * to_s(at - start);
        steady_in_flight_s_ += as_double(in_flight_) * to_s(at - start);
      }
    }
    close_windows(at);
    clock_.advance_to(Clock::time_point{} + std::chrono::nanoseconds(at));
  }

  void close_windows(Ns at) {
    const Ns width = to_ns(scenario_.window_s);
    while (window_start_ + width <= at) {
      evaluate_window(window_start_);
      window_tokens_.clear();
      window_start_ += width;
      if (backlogged_.empty() && window_start_ + width <= at) {
        window_start_ += (at - window_start_) / width * width;  // skip idle windows
      }
    }
  }

  void evaluate_window(Ns start) {
    std::vector<double> shares;
    for (const UserId user : backlogged_) {
      if (backlogged_since_.at(user) > start) continue;
      const auto tokens = window_tokens_.contains(user) ? window_tokens_.at(user) : 0;
      shares.push_back(as_double(tokens) / as_double(weights_.at(user)));
    }
    if (shares.size() < 2) return;
    double sum = 0.0;
    double sum_sq = 0.0;
    for (const double x : shares) {
      sum += x;
      sum_sq += x * x;
    }
    if (sum <= 0.0) return;
    const auto n = static_cast<double>(shares.size());
    ++metrics_.fairness_windows;
    metrics_.min_jain = std::min(metrics_.min_jain, sum * sum / (n * sum_sq));
    for (const double x : shares) {
      metrics_.max_share_deviation =
          std::max(metrics_.max_share_deviation, std::abs(x * n / sum - 1.0));
    }
  }

  // A bucket's level at `at` (now or later, with nothing sent between); 0 for an unlimited
  // one, whose utilisation is not measured.
  [[nodiscard]] double level_at(const TokenBucket& bucket, Ns at) const {
    if (bucket.capacity() <= 0) return 0.0;
    const double refilled = as_double(bucket.capacity()) / 60.0 * to_s(at - now());
    return std::min(as_double(bucket.capacity()), bucket.level() + refilled);
  }

  // A backlog measured (past the first window) begins at `at`: each bucket's level then.
  void open_period(Ns at) {
    period_ = Period{level_at(budget_.requests(), at), level_at(budget_.tokens(), at)};
  }

  // The backlog measured ends: what the buckets let go while it lasted is their level when it
  // began, less their level now, and the refill between (advance_to counts it). A refill
  // lost to a full bucket while pages waited is let go unused; what a backlog leaves in the
  // bucket is not let go, and carries to the next.
  void close_period() {
    if (!period_) return;
    steady_credit_requests_ += period_->requests_level - level_at(budget_.requests(), now());
    steady_credit_tokens_ += period_->tokens_level - level_at(budget_.tokens(), now());
    period_.reset();
  }

  void queued_changed(UserId user, std::int64_t delta) {
    std::int64_t& queued = user_queued_[user];
    const bool was = queued > 0;
    queued += delta;
    const bool backlog_was = total_queued_ > 0;
    total_queued_ += delta;
    // A backlog emptied and taken up again in one instant goes on.
    if (!backlog_was && total_queued_ > 0 && !period_ && first_backlog_ns_ &&
        now() >= *first_backlog_ns_ + to_ns(scenario_.window_s)) {
      open_period(now());
    }
    if (!was && queued > 0) {
      backlogged_.insert(user);
      backlogged_since_[user] = now();
      if (!first_backlog_ns_) first_backlog_ns_ = now();
    } else if (was && queued == 0) {
      backlogged_.erase(user);
    }
  }

  // ---- the order, fair or first come first served --------------------------------------

  PageOrder& order() {
    if (kind_ == SchedulerKind::fair) return fair_order_;
    return fifo_order_;
  }

  // ---- events ----------------------------------------------------------------------------

  void handle(const Event& event) {
    switch (event.kind) {
      case EventKind::arrival:
        arrive(event.index);
        break;
      case EventKind::completion:
        complete(event.index);
        break;
      case EventKind::wake:
        if (pending_wake_ && *pending_wake_ == event.at) pending_wake_.reset();
        break;
      case EventKind::snapshot:
        snapshot();
        break;
      case EventKind::promise_window:
        close_promise_windows();
        break;
      case EventKind::review:
        review_promises();
        break;
    }
  }

  // Asks the estimator for the ETA of every job with queued pages.
  void snapshot() {
    for (std::size_t i = 0; i < books_.size(); ++i) {
      const Book& book = books_[i];
      if (!book.result) continue;
      if (const auto estimate = estimator_.job(book.user, static_cast<JobId>(i + 1))) {
        snapshot_predictions_.emplace_back(*book.result, to_s(now()) + estimate->eta_seconds);
      }
    }
    snapshot_at_s_ = to_s(now());
  }

  void arrive(std::size_t index) {
    Book& book = books_[index];
    const std::int64_t cost = book.input_tokens + scenario_.fairlane.max_tokens;
    std::optional<double> predicted;
    std::optional<double> own;
    if (kind_ == SchedulerKind::fair) {
      const DoorDecision decision = door_.estimate(book.user, book.pages, cost);
      if (const auto* accepted = std::get_if<DoorAccepted>(&decision)) {
        predicted = accepted->estimate.eta_seconds;
        own = accepted->estimate.own_seconds;
      } else {
        const char* reason =
            std::holds_alternative<DoorBusy>(decision)            ? "busy"
            : std::holds_alternative<DoorUserQueueFull>(decision) ? "user_queue_full"
            : std::holds_alternative<DoorJobTooLarge>(decision)   ? "job_too_large"
                                                                  : "request_too_large";
        ++metrics_.refusals[reason];
        return;
      }
    }
    book.result = metrics_.books.size();
    metrics_.books.push_back(BookResult{book.user_name, book.arrival_s, book.pages,
                                        book.input_tokens, 0.0, false, predicted, own, std::nullopt,
                                        std::nullopt, std::nullopt});
    metrics_.pages_accepted += book.pages;
    const auto job = static_cast<JobId>(index + 1);
    std::vector<QueuedPage> pages;
    pages.reserve(static_cast<std::size_t>(book.pages));
    for (std::int64_t i = 0; i < book.pages; ++i) {
      const auto page = static_cast<PageId>(page_states_.size());
      page_states_.push_back(PageState::queued);
      page_books_.push_back(index);
      pages.push_back(QueuedPage{page, job, book.user, cost});
    }
    policy_.enqueue_job(pages, kind_ == SchedulerKind::fair);
    // Other books arriving in this instant are the simulator's uploads still being read: with
    // them on their way the promise waits out its window (PromiseWindow), made when it closes.
    const bool others_coming =
        !events_.empty() && events_.top().at == now() && events_.top().kind == EventKind::arrival;
    const bool windowed = promise_window_.window() > Clock::duration::zero();
    if (predicted && windowed && others_coming) {
      promise_window_.accepted(job, std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(*predicted)));
      // The service's dispatch policy orders by the door's promise from the enqueue on
      // (Dispatcher::add: the job is stored with it), and by the window's once it is later.
      policy_.promise(book.user, job,
                      clock_.now() + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(*predicted)));
      push(now() + promise_window_.window().count(), EventKind::promise_window, index);
    } else if (predicted) {
      if (windowed) promise_window_.accepted_at_once();
      promise(index, clock_.now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(*predicted)));
    }
    queued_changed(book.user, book.pages);
  }

  // The windows that have closed: each job's promise, the door's or made again.
  void close_promise_windows() {
    while (const auto closed = promise_window_.take_closed()) {
      const Book& book = books_[static_cast<std::size_t>(closed->job - 1)];
      std::optional<Clock::duration> eta_now;
      // A promise made again, by the door's rule, as the service's uploads do.
      if (const auto estimate = estimator_.job(book.user, closed->job, Refunds::when_back)) {
        eta_now = std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(estimate->eta_seconds));
      }
      const Clock::time_point promised = PromiseWindow::promise(*closed, clock_.now(), eta_now);
      metrics_.books[*book.result].predicted_eta_s =
          to_s((promised - Clock::time_point{}).count()) - book.arrival_s;
      promise(static_cast<std::size_t>(closed->job - 1), promised);
    }
  }

  // Book `index` is promised `promised`: the policy keeps it, and the watch revises it when
  // it cannot be kept, as the service's Promises do once a second.
  void promise(std::size_t index, Clock::time_point promised) {
    const Book& book = books_[index];
    const auto job = static_cast<JobId>(index + 1);
    policy_.promise(book.user, job, promised);
    promise_watch_.watch(book.user, job, wall_at(to_ns(book.arrival_s)),
                         wall_at((promised - Clock::time_point{}).count()), std::nullopt,
                         estimator_, wall_at(now()));
    if (!review_pending_) {
      review_pending_ = true;
      push(now() + to_ns(1.0), EventKind::review, 0);
    }
  }

  // The wall time of the virtual instant `at`; and back.
  static WallTime wall_at(Ns at) {
    return WallTime{} +
           std::chrono::duration_cast<WallTime::duration>(std::chrono::nanoseconds(at));
  }
  static double seconds_at(WallTime t) {
    return std::chrono::duration<double>(t - WallTime{}).count();
  }

  // Once a second while promises are watched: the revisions the service would make.
  void review_promises() {
    Clock::duration paused_for = Clock::duration::zero();
    if (const auto until = policy_.paused_until(); until && *until > clock_.now()) {
      paused_for = *until - clock_.now();
    }
    const auto ended = [this](JobId job, const WatchedPromise&) {
      const Book& book = books_[static_cast<std::size_t>(job - 1)];
      return book.ended == book.pages;
    };
    for (const Revision& revision : promise_watch_.check(estimator_, order(), wall_at(now()),
                                                         paused_for, ended, policy_.held_back())) {
      promise_watch_.announced(revision.job, revision.finish);
      const Book& book = books_[static_cast<std::size_t>(revision.job - 1)];
      BookResult& result = metrics_.books[*book.result];
      if (!result.first_revised_s) result.first_revised_s = to_s(now()) - book.arrival_s;
      result.revised_eta_s = seconds_at(revision.finish) - book.arrival_s;
      ++metrics_.revisions[to_string(revision.reason)];
    }
    review_pending_ = promise_watch_.watched() > 0;
    if (review_pending_) push(now() + to_ns(1.0), EventKind::review, 0);
  }

  // The service's loop on virtual time: the policy's next step, until it is a wait.
  void dispatch() {
    for (;;) {
      DispatchStep next = policy_.next_step();
      if (auto* go = std::get_if<step::Send>(&next)) {
        queued_changed(go->page.user_id, -1);
        send(go->page, std::move(go->lease));
        continue;
      }
      if (const auto* too_large = std::get_if<step::FailPage>(&next)) {
        queued_changed(too_large->page.user_id, -1);
        end_page(too_large->page, false);
        continue;
      }
      // A wait: for its time, or for a call's end (which runs this again).
      const Clock::time_point until = wake_time(next).value_or(Clock::time_point::max());
      if (until != Clock::time_point::max()) schedule_wake((until - Clock::time_point{}).count());
      return;
    }
  }

  void send(const QueuedPage& page, Lease lease) {
    ++metrics_.provider_calls;
    const Book& book = books_[page_books_[static_cast<std::size_t>(page.page_id - 1)]];
    auto answer = provider_.call(page.cost);
    if (const auto* refused = std::get_if<SimulatedProvider::Refused>(&answer)) {
      // The provider refused: a violation. fairlane does what it does with a 429 (a 503
      // over the in-flight cap): everything pauses, the page goes back to the head.
      CallEnd end = call::RateLimited{};
      if (refused->limit == Limit::concurrency) {
        ++metrics_.provider_refused_concurrency;
        end = call::Overloaded{};
      } else if (refused->limit == Limit::requests) {
        ++metrics_.provider_refused_requests;
      } else {
        ++metrics_.provider_refused_tokens;
      }
      record(page, policy_.on_outcome(page, lease,
                                      CallOutcome{std::move(end), {}, provider_.announced()}));
      return;
    }
    auto& accepted = std::get<SimulatedProvider::Accepted>(answer);
    const std::int64_t actual_tokens = book.input_tokens + accepted.output_tokens;
    const Ns latency = to_ns(accepted.latency_s);

    std::size_t slot = calls_.size();
    if (!free_calls_.empty()) {
      slot = free_calls_.back();
      free_calls_.pop_back();
    } else {
      calls_.emplace_back();
    }
    Call& sent = calls_[slot];
    sent.page = page;
    sent.lease.emplace(std::move(lease));
    sent.at_provider.emplace(std::move(accepted));
    sent.dispatched_at = now();
    sent.input_tokens = book.input_tokens;
    page_states_[static_cast<std::size_t>(page.page_id)] = PageState::in_flight;
    ++in_flight_;
    metrics_.max_in_flight_seen = std::max(metrics_.max_in_flight_seen, in_flight_);
    push(now() + latency, EventKind::completion, slot);

    // Fairness is in the tokens the provider counts (DESIGN.md section 4), not in the
    // reservations lanes are first charged: counted when the call goes out.
    window_tokens_[page.user_id] += actual_tokens;
    if (backlogged_.size() >= 2)
      metrics_.tokens_while_backlogged[user_names_.at(page.user_id)] += actual_tokens;
    if (period_) {
      ++steady_requests_;
      steady_tokens_ += actual_tokens;
    }
  }

  void complete(std::size_t slot) {
    Call& ended = calls_[slot];
    const std::int64_t output_tokens = ended.at_provider->output_tokens;
    SimulatedProvider::finish(*ended.at_provider, ended.input_tokens + output_tokens);
    const CallVerdict verdict = policy_.on_outcome(
        ended.page, *ended.lease,
        CallOutcome{call::Answered{ended.input_tokens, output_tokens},
                    std::chrono::nanoseconds(now() - ended.dispatched_at), provider_.announced()});
    ended.lease.reset();
    ended.at_provider.reset();
    --in_flight_;
    free_calls_.push_back(slot);
    record(ended.page, verdict);
  }

  // What the policy decided about a page whose call ended.
  void record(const QueuedPage& page, const CallVerdict& verdict) {
    if (std::holds_alternative<verdict::Complete>(verdict.action)) {
      end_page(page, true);
    } else if (std::holds_alternative<verdict::Fail>(verdict.action)) {
      end_page(page, false);
    } else {
      // Back in its lane, or held back for a backoff: its user still has it waiting.
      queued_changed(page.user_id, +1);
    }
  }

  void end_page(const QueuedPage& page, bool done) {
    PageState& state = page_states_[static_cast<std::size_t>(page.page_id)];
    if (state == PageState::ended) {
      ++metrics_.pages_duplicated;
      return;
    }
    state = PageState::ended;
    ++(done ? metrics_.pages_done : metrics_.pages_failed);
    Book& book = books_[page_books_[static_cast<std::size_t>(page.page_id - 1)]];
    if (++book.ended == book.pages) {
      BookResult& result = metrics_.books[*book.result];
      result.finish_s = to_s(now());
      result.finished = true;
    }
  }

  void schedule_wake(Ns at) {
    if (pending_wake_ && *pending_wake_ <= at) return;
    pending_wake_ = at;
    push(at, EventKind::wake, 0);
  }

  void finish() {
    close_windows(now() + to_ns(scenario_.window_s));
    metrics_.simulated_s = to_s(now());
    metrics_.out_of_turn = fair_order_.out_of_turn();
    metrics_.pages_lost = metrics_.pages_accepted - metrics_.pages_done - metrics_.pages_failed;
    for (const BookResult& book : metrics_.books) {
      if (book.completion_s() > scenario_.fairlane.max_wait_s) ++metrics_.books_over_max_wait;
    }
    for (const BookResult& book : metrics_.books) {
      if (book.predicted_eta_s && book.completion_s() > 0) {
        metrics_.eta_errors.push_back(std::abs(book.completion_s() - *book.predicted_eta_s) /
                                      book.completion_s());
      }
    }
    for (const auto& [result, predicted_finish_s] : snapshot_predictions_) {
      const double remaining = metrics_.books[result].finish_s - snapshot_at_s_;
      if (remaining > 0) {
        metrics_.snapshot_eta_errors.push_back(
            std::abs(metrics_.books[result].finish_s - predicted_finish_s) / remaining);
      }
    }
    // Of what the buckets let go while pages waited (close_period), what the provider
    // counted.
    close_period();
    Utilisation& u = metrics_.utilisation;
    u.measured_s = steady_s_;
    if (steady_s_ > 0) {
      const auto& f = scenario_.fairlane;
      if (f.requests_per_minute > 0)
        u.requests =
            as_double(steady_requests_) / (steady_refill_requests_ + steady_credit_requests_);
      if (f.tokens_per_minute > 0)
        u.tokens = as_double(steady_tokens_) / (steady_refill_tokens_ + steady_credit_tokens_);
      if (f.max_in_flight > 0)
        u.concurrency = steady_in_flight_s_ / (as_double(f.max_in_flight) * steady_s_);
    }
  }

  const Scenario& scenario_;
  const SchedulerKind kind_;
  std::mt19937_64 rng_;
  FakeClock clock_;
  FakeWallClock wall_clock_;
  Budget budget_;
  SimulatedProvider provider_;
  FairScheduler scheduler_;
  FifoOrder fifo_order_;
  Estimator estimator_;
  PromiseOrder fair_order_;
  Door door_;
  DispatchPolicy policy_;
  PromiseWindow promise_window_;  // 0 unless the scenario or --promise-window sets it
  PromiseWatch promise_watch_;
  bool review_pending_ = false;

  Metrics metrics_;
  std::vector<Book> books_;
  std::int64_t total_pages_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::int64_t next_seq_ = 0;
  std::optional<Ns> pending_wake_;
  std::vector<std::pair<std::size_t, double>> snapshot_predictions_;  // result, finish
  double snapshot_at_s_ = 0.0;

  std::unordered_map<std::string, UserId> user_ids_;
  std::unordered_map<UserId, std::string> user_names_;
  std::unordered_map<UserId, std::int64_t> weights_;
  std::vector<PageState> page_states_;
  std::vector<std::size_t> page_books_;  // page id - 1 -> book index
  std::vector<Call> calls_;
  std::vector<std::size_t> free_calls_;
  std::int64_t in_flight_ = 0;

  std::unordered_map<UserId, std::int64_t> user_queued_;
  std::int64_t total_queued_ = 0;
  std::unordered_set<UserId> backlogged_;
  std::unordered_map<UserId, Ns> backlogged_since_;
  std::unordered_map<UserId, std::int64_t> window_tokens_;
  Ns window_start_ = 0;
  std::optional<Ns> first_backlog_ns_;
  double steady_s_ = 0.0;
  double steady_in_flight_s_ = 0.0;
  // A backlog being measured: each bucket's level when it began.
  struct Period {
    double requests_level = 0.0;
    double tokens_level = 0.0;
  };
  std::optional<Period> period_;
  double steady_credit_requests_ = 0.0;
  double steady_credit_tokens_ = 0.0;
  double steady_refill_requests_ = 0.0;
  double steady_refill_tokens_ = 0.0;
  std::int64_t steady_requests_ = 0;
  std::int64_t steady_tokens_ = 0;
};

}  // namespace

Metrics simulate(const Scenario& scenario, SchedulerKind scheduler) {
  Metrics metrics = Run(scenario, scheduler).run();
  fill_fair_share_ideal(scenario, metrics.books);
  return metrics;
}

void fill_fair_share_ideal(const Scenario& scenario, std::vector<BookResult>& books,
                           std::size_t max_books) {
  if (books.empty() || books.size() > max_books) return;
  const FairlaneSettings& f = scenario.fairlane;
  const double output = std::min(mean(scenario.provider.output_tokens), as_double(f.max_tokens));
  const double latency = mean(scenario.provider.latency_s);
  double input = 0.0;
  double pages = 0.0;
  for (const BookResult& b : books) {
    pages += as_double(b.pages);
    input += as_double(b.pages * b.input_tokens);
  }
  // Pages of no tokens count as pages of one, so that work is never 0 / 0.
  const double page_tokens = std::max(input / std::max(pages, 1.0) + output, 1.0);

  // Pages per second each limit allows at the average page: the smallest binds (mu). The
  // buckets start full, so first the binding bucket's capacity drains at the in-flight
  // rate c, as a real budget lets it; the fluid bucket refills at mu while nobody waits.
  const double infinity = std::numeric_limits<double>::infinity();
  const auto rate = [infinity](std::int64_t per_minute, double divisor) {
    return per_minute > 0 ? as_double(per_minute) / 60.0 / divisor : infinity;
  };
  const double mu = std::min(
      {rate(f.requests_per_minute, 1.0), rate(f.tokens_per_minute, page_tokens),
       f.max_in_flight > 0 && latency > 0 ? as_double(f.max_in_flight) / latency : infinity});
  if (!std::isfinite(mu)) {
    for (BookResult& b : books) b.ideal_s = latency;
    return;
  }
  constexpr double kInstant = 1e12;  // pages/s standing in for "at once"
  // Calls that answer at once (latency 0) are out for no time: the cap never binds.
  const double c = f.max_in_flight > 0 && latency > 0
                       ? std::max(as_double(f.max_in_flight) / latency, mu)
                       : kInstant;
  // The buckets start full, and a page holds its whole reservation (input + max_tokens)
  // until it is answered: that is what the burst is made of.
  double reserved = 0.0;
  for (const BookResult& b : books)
    reserved += as_double(b.pages * (b.input_tokens + f.max_tokens));
  const double page_reservation = reserved / std::max(pages, 1.0);
  const double capacity = std::min(
      f.requests_per_minute > 0 ? as_double(f.requests_per_minute) : infinity,
      f.tokens_per_minute > 0 ? as_double(f.tokens_per_minute) / page_reservation : infinity);
  double level = std::isfinite(capacity) ? capacity : 0.0;

  std::unordered_map<std::string, std::int64_t> weights;
  for (const UserSpec& u : scenario.users) weights[u.name] = u.weight;

  // Generalized processor sharing of tokens, counted in pages of the average size: each
  // backlogged user gets the current rate in proportion to weight, spent on their oldest
  // book first.
  struct Active {
    double weight = 1.0;
    std::deque<std::pair<std::size_t, double>> books;  // book index, pages left
  };
  std::unordered_map<std::string, Active> active;
  std::size_t next = 0;
  double t = 0.0;
  constexpr double kEps = 1e-9;
  while (next < books.size() || !active.empty()) {
    if (active.empty()) {
      const double idle = std::max(books[next].arrival_s - t, 0.0);
      if (std::isfinite(capacity)) level = std::min(capacity, level + mu * idle);
      t += idle;
    }
    while (next < books.size() && books[next].arrival_s <= t + kEps) {
      const BookResult& b = books[next];
      Active& a = active[b.user];
      a.weight = as_double(weights.contains(b.user) ? weights[b.user] : 1);
      // Work in pages of the average size: a book of bigger pages is more work.
      a.books.emplace_back(next,
                           as_double(b.pages) * (as_double(b.input_tokens) + output) / page_tokens);
      ++next;
    }
    const bool bursting = level > kEps && c > mu;
    const double total_rate = bursting ? c : mu;
    double total_weight = 0.0;
    for (const auto& [user, a] : active) total_weight += a.weight;
    double dt = next < books.size() ? books[next].arrival_s - t : infinity;
    if (bursting) dt = std::min(dt, level / (c - mu));
    for (const auto& [user, a] : active) {
      dt = std::min(dt, a.books.front().second / (total_rate * a.weight / total_weight));
    }
    for (auto it = active.begin(); it != active.end();) {
      Active& a = it->second;
      a.books.front().second -= total_rate * a.weight / total_weight * dt;
      if (a.books.front().second <= kEps) {
        BookResult& done = books[a.books.front().first];
        done.ideal_s = t + dt - done.arrival_s + latency;
        a.books.pop_front();
      }
      it = a.books.empty() ? active.erase(it) : std::next(it);
    }
    if (bursting) level = std::max(0.0, level - (c - mu) * dt);
    t += dt;
  }
}

}  // namespace fairlane::sim
