#include "fairlane/core/estimator.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace fairlane {
namespace {

constexpr double kUnlimited = std::numeric_limits<double>::infinity();

// Pages per second each limit allows, in the order requests, concurrency, tokens.
std::array<double, 3> rates(const BudgetLimits& limits, double avg_tokens, double avg_latency_s) {
  const auto per_second = [](std::int64_t per_minute) {
    return static_cast<double>(per_minute) / 60.0;
  };
  const double requests =
      limits.requests_per_minute > 0 ? per_second(limits.requests_per_minute) : kUnlimited;
  const double concurrency = limits.max_in_flight > 0 && avg_latency_s > 0
                                 ? static_cast<double>(limits.max_in_flight) / avg_latency_s
                                 : kUnlimited;
  const double tokens = limits.tokens_per_minute > 0 && avg_tokens > 0
                            ? per_second(limits.tokens_per_minute) / avg_tokens
                            : kUnlimited;
  return {requests, concurrency, tokens};
}

Limit binding_of(const std::array<double, 3>& rate) {
  const auto smallest = std::min_element(rate.begin(), rate.end());
  if (std::isinf(*smallest)) return Limit::concurrency;
  static constexpr std::array kOrder{Limit::requests, Limit::concurrency, Limit::tokens};
  return kOrder[static_cast<std::size_t>(smallest - rate.begin())];
}

// What leaving out the last `tail` of a lane of `length` (pages or tokens) takes from that
// lane's min(length, share).
double without_tail(double length, double tail, double share) {
  return std::min(length, share) - std::min(std::max(length - tail, 0.0), share);
}

}  // namespace

Estimator::Estimator(const FairScheduler& scheduler, const EstimatorConfig& config,
                     const Budget* budget, const Clock* clock)
    : scheduler_(scheduler),
      config_(config),
      budget_(budget),
      avg_tokens_(config.initial_tokens_per_page),
      avg_reserved_(config.initial_tokens_per_page),
      avg_latency_s_(config.initial_latency_s) {
  if (!(config.finish_quantile >= 0.5 && config.finish_quantile < 1.0)) {
    throw std::invalid_argument("the estimator's finish_quantile must be in [0.5, 1)");
  }
  if (clock != nullptr) {
    arrivals_.emplace(*clock, config.arrival_window);
    if (config.arrival_window / Arrivals::kSlots >= Arrivals::kSlots * Clock::duration(1)) {
      warmup_.emplace(*clock, config.arrival_window / Arrivals::kSlots, 3, Busiest::as_next);
    }
  }
}

void Estimator::prime(std::int64_t pages, double reserved_tokens) {
  if (settled_calls_ > 0.0 || pages <= 0 || !(reserved_tokens > 0.0)) return;
  primed_pages_ += static_cast<double>(pages);
  primed_reserved_ += reserved_tokens;
  avg_reserved_ = primed_reserved_ / primed_pages_;
  avg_tokens_ = avg_reserved_;
}

void Estimator::record_arrival(UserId user, std::int64_t pages, std::int64_t reserved_tokens) {
  prime(pages, static_cast<double>(reserved_tokens));
  record_arrived(Clock::duration::zero(), user, pages, scheduler_.lane_length(user));
}

void Estimator::arrivals_counted_for(Clock::duration counted) {
  if (!arrivals_) return;
  arrivals_->counted_for(counted);
  if (warmup_) warmup_->counted_for(counted);
}

void Estimator::record_arrived(Clock::duration ago, UserId user, std::int64_t pages,
                               std::int64_t ahead) {
  if (!arrivals_ || pages <= 0) return;
  const auto weight = static_cast<double>(scheduler_.weight(user));
  const double first = static_cast<double>(ahead) / weight;
  const double last = static_cast<double>(ahead + pages) / weight;
  arrivals_->record_ago(ago, first, last, static_cast<double>(pages));
  if (warmup_ && !arrivals_->measuring()) {
    warmup_->record_ago(ago, first, last, static_cast<double>(pages));
  }
}

void Estimator::continue_arrivals(const Estimator& before) {
  if (arrivals_ && before.arrivals_) arrivals_->continue_from(*before.arrivals_);
  if (warmup_ && before.warmup_) warmup_->continue_from(*before.warmup_);
}

double Estimator::competition(double rounds) const {
  if (!arrivals_) return 0.0;
  const double steady = mu();
  if (std::isinf(steady) || steady <= 0.0) return 0.0;
  const Arrivals& measured = arrivals_->measuring() || !warmup_ ? *arrivals_ : *warmup_;
  return std::min(measured.competing_rate(rounds) / steady, config_.max_competition);
}

void Estimator::record_settled(std::int64_t tokens, std::int64_t reserved_tokens,
                               Clock::duration latency) {
  // The n-th call weighs max(alpha, 1 / n): until 1 / alpha calls have settled the averages
  // are their plain mean (and the spread their plain variance), the first replacing the
  // configured guesses; then the EWMAs go on, forgetting the oldest.
  settled_calls_ += 1.0;
  const double running = 1.0 / settled_calls_;
  const double alpha = std::max(config_.ewma_alpha, running);
  const double beta = std::max(config_.latency_alpha, running);
  const auto ewma = [alpha](double average, double observed) {
    return (1.0 - alpha) * average + alpha * std::max(observed, 0.0);
  };
  avg_tokens_ = ewma(avg_tokens_, static_cast<double>(tokens));
  avg_reserved_ = ewma(avg_reserved_, static_cast<double>(reserved_tokens));
  // The latency's average and its spread (the EWMA of squared deviations, in the
  // incremental form), over a longer memory: see EstimatorConfig::latency_alpha.
  const double seconds = std::max(std::chrono::duration<double>(latency).count(), 0.0);
  const double deviation = seconds - avg_latency_s_;
  // The first call weighs 1: the spread starts at 0, its deviation from the guess unread.
  latency_var_ = (1.0 - beta) * (latency_var_ + beta * deviation * deviation);
  avg_latency_s_ += beta * deviation;
}

BudgetLimits Estimator::limits() const {
  return budget_ != nullptr ? budget_->effective_limits() : config_.limits;
}

double Estimator::mu() const {
  return mu_at(avg_tokens_);
}

double Estimator::mu_at(double tokens_per_page) const {
  const auto r = rates(limits(), tokens_per_page, avg_latency_s_);
  return *std::min_element(r.begin(), r.end());
}

Limit Estimator::binding() const {
  return binding_of(rates(limits(), avg_tokens_, avg_latency_s_));
}

double Estimator::others_ahead(UserId user, double t, std::span<const LaneTail> left_out) const {
  const LaneLengths& lengths = scheduler_.lengths();
  const auto own_weight = static_cast<double>(scheduler_.weight(user));
  double total = 0.0;
  for (const std::int64_t weight : lengths.weights()) {
    total += lengths.sum_min(weight, t * static_cast<double>(weight) / own_weight);
  }
  // The sums include the user's own lane (at ratio 1): take it out.
  total -= std::min(static_cast<double>(scheduler_.lane_length(user)), t);
  for (const LaneTail& tail : left_out) {
    if (tail.user == user) continue;
    total -= without_tail(static_cast<double>(scheduler_.lane_length(tail.user)),
                          static_cast<double>(tail.pages),
                          t * static_cast<double>(scheduler_.weight(tail.user)) / own_weight);
  }
  return std::max(total, 0.0);
}

double Estimator::usage_of(UserId user, double cost_per_page) const {
  const double average = avg_tokens_ / avg_reserved_;
  const auto usage = scheduler_.lane_usage(user);
  if (!usage) return average;
  const double learned_from = scheduler_.lane_cost(user);
  if (cost_per_page > 0.0 &&
      (cost_per_page > 2.0 * learned_from || 2.0 * cost_per_page < learned_from)) {
    return average;
  }
  return *usage;
}

double Estimator::used_units(UserId user, double units, double cost_per_page) const {
  if (!(avg_tokens_ > 0.0 && avg_reserved_ > 0.0)) return units;
  return units * usage_of(user, cost_per_page) * avg_reserved_ / avg_tokens_;
}

namespace {

// What a token index (FairScheduler::token_lengths) counts against `threshold` for a lane
// with pages whose value is `value`: the value if its key, ceil(value / unit) and at least
// 1, is at most floor(threshold / unit), else the threshold (LaneLengths::sum_min).
double as_indexed(double value, double threshold) {
  const auto unit = static_cast<double>(FairScheduler::kTokenUnit);
  const double key = std::max(std::ceil(value / unit), 1.0);
  return key <= std::floor(threshold / unit) ? value : threshold;
}

}  // namespace

double Estimator::others_tokens_ahead(UserId user, double t,
                                      std::span<const LaneTail> left_out) const {
  if (!(avg_tokens_ > 0.0 && avg_reserved_ > 0.0)) return others_ahead(user, t, left_out);
  // Lanes that have learned what their pages use count that (used_lengths); the others
  // their tokens at the average usage, a fraction `average` of them.
  const LaneLengths& used = scheduler_.used_lengths();
  const LaneLengths& reserved = scheduler_.token_lengths();
  const double average = avg_tokens_ / avg_reserved_;
  const auto own_weight = static_cast<double>(scheduler_.weight(user));
  const double own_tokens = t * avg_tokens_;
  const auto share = [&](std::int64_t weight) {
    return own_tokens * static_cast<double>(weight) / own_weight;
  };
  double total = 0.0;
  for (const std::int64_t weight : used.weights()) {
    total += used.sum_min(weight, share(weight), FairScheduler::kTokenUnit);
  }
  for (const std::int64_t weight : reserved.weights()) {
    total += average * reserved.sum_min(weight, share(weight) / average, FairScheduler::kTokenUnit);
  }
  // The sums include the user's own lane (at ratio 1): take it out as its index counts it.
  const std::int64_t own_lane = scheduler_.lane_tokens(user);
  if (scheduler_.lane_length(user) > 0) {
    if (const auto usage = scheduler_.lane_usage(user)) {
      total -= as_indexed(static_cast<double>(FairScheduler::expected_use(own_lane, *usage)),
                          own_tokens);
    } else {
      total -= average * as_indexed(static_cast<double>(own_lane), own_tokens / average);
    }
  }
  for (const LaneTail& tail : left_out) {
    if (tail.user == user) continue;
    const double usage = usage_of(tail.user);
    total -=
        without_tail(usage * static_cast<double>(scheduler_.lane_tokens(tail.user)),
                     usage * static_cast<double>(tail.tokens), share(scheduler_.weight(tail.user)));
  }
  return std::max(total, 0.0) / avg_tokens_;
}

double Estimator::scale_for(double tokens_per_page) const {
  if (tokens_per_page <= 0 || avg_reserved_ <= 0) return 1.0;
  return tokens_per_page / avg_reserved_;
}

double Estimator::units(std::int64_t tokens, std::int64_t pages) const {
  return avg_reserved_ > 0 ? static_cast<double>(tokens) / avg_reserved_
                           : static_cast<double>(pages);
}

double Estimator::pages_equivalent(double others, double others_units, double own,
                                   double own_units) const {
  const double steady = mu();
  if (std::isinf(steady)) return others_units + own_units;
  // [requests, concurrency, tokens] in average pages a second. Each limit has its own
  // total: every page takes one request and one call, the user's own pages `own_units`
  // average pages' worth of tokens; the slowest limit sets the time, in average pages at mu.
  const auto r = rates(limits(), avg_tokens_, avg_latency_s_);
  double seconds = 0.0;
  if (!std::isinf(r[0])) seconds = std::max(seconds, (others + own) / r[0]);
  if (!std::isinf(r[1])) seconds = std::max(seconds, (others + own) / r[1]);
  if (!std::isinf(r[2])) seconds = std::max(seconds, (others_units + own_units) / r[2]);
  return seconds * steady;
}

namespace {

// How long until the more indebted bucket is back at what a call needs beside its cost: zero
// for the requests, the headroom for the tokens (BudgetLimits::token_headroom); 0 when
// neither is below it.
double debt_seconds(const Budget& budget) {
  const auto headroom = static_cast<double>(budget.effective_limits().token_headroom);
  double seconds = 0.0;
  for (const auto& [bucket, floor] :
       {std::pair{&budget.requests(), 0.0}, std::pair{&budget.tokens(), headroom}}) {
    if (bucket->unlimited() || bucket->level() >= floor) continue;
    const double per_second = static_cast<double>(bucket->capacity()) / 60.0;
    seconds = std::max(seconds, (floor - bucket->level()) / per_second);
  }
  return seconds;
}

}  // namespace

double Estimator::tokens_free() const {
  // A call is admitted once its cost and the headroom fit (BudgetLimits::token_headroom).
  const auto headroom = static_cast<double>(budget_->effective_limits().token_headroom);
  return std::max(budget_->tokens().level() - headroom, 0.0);
}

double Estimator::after_free(double waiting, double burst_rate) const {
  // The calls out end a latency after they were sent, each letting one page go. Taken as
  // sent evenly over twice their mean age (at most a latency) before now, they end evenly
  // over the last part of the next latency: calls sent together end together, a latency
  // after they went, and calls sent steadily end over the whole latency. (Spread over the
  // whole latency whatever their age, a burst sent 0.1 s before looked half done within a
  // second: the end-to-end bench promised the third of a heavy user's books, uploaded 0.1 s
  // after 200 calls went out, 3.0 s for the 4.0 s it took.) Pages beyond them wait for the
  // calls sent at once, which end a latency from now, and then go at the in-flight rate.
  // (Counting them at that rate from now, as if calls were already ending at it, made a
  // quiet system's promise up to a latency short.) With latencies that vary, a wave's calls
  // spread out as they end, and the simulator's lateness tails are shortest with the pages
  // beyond them at the in-flight rate (docs/performance.md).
  double out = 0.0;
  double spread = avg_latency_s_;  // over which the calls out end, up to a latency from now
  if (budget_ != nullptr) {
    const InFlightCap& cap = budget_->in_flight();
    out = static_cast<double>(cap.in_use());
    if (const auto sent = cap.mean_sent()) {
      const double age = std::chrono::duration<double>(budget_->clock().now() - *sent).count();
      spread = std::clamp(2.0 * age, 0.0, avg_latency_s_);
    }
  }
  if (waiting <= out) return avg_latency_s_ - spread + waiting * spread / out;
  return avg_latency_s_ + (waiting - out) / burst_rate;
}

double Estimator::reservation_waves(double pages, double competing) const {
  if (budget_ == nullptr) return 0.0;
  const TokenBucket& tokens = budget_->tokens();
  const double reserved = avg_reserved_;
  const double used = avg_tokens_;
  const double latency = avg_latency_s_;
  if (tokens.unlimited() || used <= 0.0 || latency <= 0.0 || reserved <= used * 1.01) return 0.0;
  const auto capacity = static_cast<double>(tokens.capacity());
  const double refill = capacity / 60.0;  // tokens a second
  // The calls out give back (reserved - used) each as they end, within the next latency.
  const auto out = static_cast<double>(budget_->in_flight().in_use());
  const double level = std::min(tokens_free() + (reserved - used) * out, capacity);
  // Wave i sends level_i / reserved pages; a latency later their refunds are back and the
  // refill has added refill x latency: level_{i+1} = level_i - used x wave_i + refill x
  // latency, so the level tends geometrically (ratio q = 1 - used / reserved) to the one
  // whose waves send mu x latency pages, and the pages of the first x waves are
  //   S(x) = x a + (level_0 - level*) / used x (1 - q^x),  a = refill x latency / used.
  const double q = 1.0 - used / reserved;
  const double steady_wave = refill * latency / used;
  const double steady_level = std::min(steady_wave * reserved, capacity);
  const double excess = (level - steady_level) / used;
  const auto sent_by = [&](double waves) {
    return waves * steady_wave + excess * (1.0 - std::pow(q, waves));
  };
  // Work arriving ahead at `competing` pages a second goes in the same waves: the last page
  // goes with the first wave x by which S(x) covers the pages and what arrived meanwhile.
  // Arrivals at or above the steady rate would never be caught up with: their share is capped.
  const double arriving =
      std::min(std::max(competing, 0.0) * latency, steady_wave * config_.max_competition);
  const auto short_of = [&](double waves) {
    return sent_by(waves) < pages + arriving * (waves - 1.0);
  };
  if (!short_of(1.0)) return 0.0;
  double low = 1.0;
  double high = 2.0;
  for (int i = 0; i < 40 && short_of(high); ++i) high *= 2.0;
  for (int i = 0; i < 20; ++i) {  // to a millionth of the bracket
    const double mid = (low + high) / 2.0;
    (short_of(mid) ? low : high) = mid;
  }
  // The last page goes with wave ceil(x) - 1, that many latencies from now (interpolated).
  return (high - 1.0) * latency;
}

double Estimator::seconds_for(Work work, double competing, Refunds refunds) const {
  const double pages = work.used;
  const double steady = mu();
  double burst = 0.0;     // pages the buckets' credit pays for, at what pages use
  double free_now = 0.0;  // pages that can start at once
  double burst_rate = kUnlimited;
  if (budget_ != nullptr) {
    // The credit drains at what pages USE: each call's refund (reserved - used) comes back
    // when it settles and lets the next one go. What can be out at once is bounded by the
    // permits and by the reservations the tokens bucket holds.
    burst = kUnlimited;
    double at_once = kUnlimited;
    if (!budget_->requests().unlimited()) burst = std::max(budget_->requests().level(), 0.0);
    if (!budget_->tokens().unlimited() && avg_tokens_ > 0 && avg_reserved_ > 0) {
      const double level = tokens_free();
      double credit = level;
      if (refunds == Refunds::expected && avg_reserved_ > avg_tokens_) {
        // The calls out give back (reserved - used) each within a latency.
        const auto out = static_cast<double>(budget_->in_flight().in_use());
        credit = std::min(level + (avg_reserved_ - avg_tokens_) * out,
                          static_cast<double>(budget_->tokens().capacity()));
      }
      burst = std::min(burst, credit / avg_tokens_);
      at_once = level / avg_reserved_;
    }
    const InFlightCap& cap = budget_->in_flight();
    free_now = at_once;
    if (!cap.unlimited()) {
      free_now = std::min(free_now, static_cast<double>(cap.limit() - cap.in_use()));
    }
    double out_at_once = cap.unlimited() ? kUnlimited : static_cast<double>(cap.limit());
    if (!budget_->tokens().unlimited() && avg_reserved_ > 0) {
      out_at_once =
          std::min(out_at_once, static_cast<double>(budget_->tokens().capacity()) / avg_reserved_);
    }
    if (!std::isinf(out_at_once) && avg_latency_s_ > 0) burst_rate = out_at_once / avg_latency_s_;
  }
  // Work arriving ahead at `competing` pages a second takes its share of each bound at that
  // bound's own rate (the fluid equation T = T0 + competing T / rate): of the refill at mu,
  // and of the calls at the in-flight rate, which is the larger when reservations are far
  // above usage or the buckets are full. Each share is capped at max_competition.
  const auto stretch = [this, competing](double rate) {
    if (!(competing > 0.0) || std::isinf(rate) || rate <= 0.0) return 1.0;
    return 1.0 / (1.0 - std::min(competing / rate, config_.max_competition));
  };
  // Two bounds, whichever is later: the credit and its refill (what is beyond the credit
  // goes at mu), and the calls (the free permits at once, the rest at the in-flight rate).
  // The refill goes on while the credit is spent, so the two do not add up.
  double paced = 0.0;
  if (pages > burst && !std::isinf(steady)) paced = (pages - burst) / steady * stretch(steady);
  if (work.reserved > free_now && !std::isinf(burst_rate)) {
    paced = std::max(paced, after_free(work.reserved - free_now, burst_rate) * stretch(burst_rate));
  }
  // Reservations above usage send the calls in waves that the tokens level sets (what is
  // out is bounded by the level, not only by the capacity): a third bound.
  paced = std::max(paced, reservation_waves(work.reserved, competing));
  // A bucket in debt (calls that used more than they reserved) lets nothing through until it
  // has refilled to zero: everyone waits that off first, and what arrives meanwhile queues.
  const double debt = budget_ != nullptr ? debt_seconds(*budget_) : 0.0;
  return debt * stretch(steady) + paced;
}

JobEstimate Estimator::estimate(UserId user, std::int64_t next_index, std::int64_t last_index,
                                Units to_next, Units to_last, Refunds refunds,
                                Competition competition, std::span<const LaneTail> left_out) const {
  const auto j = static_cast<double>(next_index);
  const auto k = static_cast<double>(last_index);
  // Fair order shares what pages are expected to use: the others send as much as the
  // user's pages are expected to use.
  const double position = others_ahead(user, to_next.used, left_out) + (j - 1.0);
  // In pages of the average: the others', then the user's own k, at what they use and at
  // what they reserve.
  const double others = others_ahead(user, to_last.used, left_out);
  const double others_units = others_tokens_ahead(user, to_last.used, left_out);
  const Work ahead_with_last{pages_equivalent(others, others_units, k, to_last.used),
                             pages_equivalent(others, others_units, k, to_last.reserved)};
  // Work arriving meanwhile that fair order puts ahead of the last page stretches the wait.
  const bool held_off = competition == Competition::held_off && scheduler_.lane_jobs(user) == 1;
  const double rho =
      held_off ? 0.0 : this->competition(k / static_cast<double>(scheduler_.weight(user)));
  const double steady = mu();
  const double competing = std::isinf(steady) ? 0.0 : rho * steady;
  const double sent = seconds_for(ahead_with_last, competing, refunds);
  return JobEstimate{static_cast<std::int64_t>(std::llround(position)),
                     sent + last_answer_s(k - j + 1.0, sent, k)};
}

double Estimator::last_answer_s(double pages, double sending_s, double lane_pages) const {
  // A job is done when the slowest of its last calls answers. Its lane's pages go out evenly
  // over the `sending_s` until the last one (`gap` apart), its user's earlier jobs' first and
  // the job's own last; the k-th from the end answers
  // about (k - 1) gaps before the last one would with the same latency. The largest of k
  // draws is allowed sqrt(2 ln (k / (1 - q))) deviations above the average (q the
  // finish_quantile: see EstimatorConfig), so the job waits for the latency average plus
  // the most, over k, of that less (k - 1) gaps. k counts at most the calls out with the last one:
  // those sent within a latency of it, and what can be out at once.
  const BudgetLimits l = limits();
  const double sending = std::max(sending_s, 0.0);
  const double lane = std::max(lane_pages, pages);
  double at_once = std::min(pages, lane * avg_latency_s_ / std::max(sending, avg_latency_s_));
  if (l.max_in_flight > 0) at_once = std::min(at_once, static_cast<double>(l.max_in_flight));
  if (l.tokens_per_minute > 0 && avg_reserved_ > 0) {
    at_once = std::min(at_once, static_cast<double>(l.tokens_per_minute) / avg_reserved_);
  }
  at_once = std::max(at_once, 1.0);  // the last call itself
  const double gap = lane > 0.0 ? sending / lane : 0.0;
  if (!(latency_var_ > 0.0) || !std::isfinite(gap)) return avg_latency_s_;
  const double sigma = std::sqrt(latency_var_);
  const double draws = 1.0 / std::max(1.0 - config_.finish_quantile, 1e-6);
  const auto slowest = [&](double n) {
    return sigma * std::sqrt(2.0 * std::log(std::max(n, 1.0) * draws)) - (n - 1.0) * gap;
  };
  // The most is where k sqrt(2 ln (k / (1 - q))) = sigma / gap: a fixed point that settles
  // in a few steps, as the root hardly moves.
  double k = at_once;
  if (gap > 0.0) {
    const double target = sigma / gap;
    k = std::max(target, 1.0);
    for (int i = 0; i < 4; ++i) k = std::max(target / std::sqrt(2.0 * std::log(k * draws)), 1.0);
    k = std::min(k, at_once);
  }
  const double beyond =
      std::max(slowest(std::max(std::floor(k), 1.0)), slowest(std::min(std::ceil(k), at_once)));
  return avg_latency_s_ + std::max(beyond, 0.0);
}

double Estimator::alone_seconds(UserId user, std::int64_t pages,
                                std::int64_t tokens_per_page) const {
  const double steady = mu();
  if (std::isinf(steady) || pages <= 0) return avg_latency_s_;
  const auto count = static_cast<double>(pages);
  const double own_units = used_units(user, count * scale_for(static_cast<double>(tokens_per_page)),
                                      static_cast<double>(tokens_per_page));
  const double sending = pages_equivalent(0.0, 0.0, count, own_units) / steady;
  return sending + last_answer_s(count, sending, count);
}

std::optional<JobEstimate> Estimator::job(UserId user, JobId job, Refunds refunds,
                                          Competition competition,
                                          std::span<const LaneTail> left_out) const {
  const auto place = scheduler_.job_place(user, job);
  if (!place) return std::nullopt;
  // The user's earlier jobs at their own costs, then this one's.
  const double before = units(place->tokens_before, place->next_index - 1);
  const double job_units = units(place->tokens, place->queued);
  const double first = place->queued > 0 ? job_units / static_cast<double>(place->queued) : 0.0;
  const double cost = place->queued > 0
                          ? static_cast<double>(place->tokens) / static_cast<double>(place->queued)
                          : 0.0;
  const double used_before = used_units(user, before);
  const double job_use = used_units(user, 1.0, cost);  // each of its units, at its usage
  return estimate(user, place->next_index, place->last_index,
                  Units{before + first, used_before + first * job_use},
                  Units{before + job_units, used_before + job_units * job_use}, refunds,
                  competition, left_out);
}

JobEstimate Estimator::estimate_new(UserId user, std::int64_t pages,
                                    std::int64_t tokens_per_page) const {
  const std::int64_t queued = scheduler_.lane_length(user);
  const std::int64_t count = std::max<std::int64_t>(pages, 1);
  // The user's queued pages at their own costs, then the new ones at theirs.
  const double before = units(scheduler_.lane_tokens(user), queued);
  const double used_before = used_units(user, before);
  const auto cost = static_cast<double>(tokens_per_page);
  const double scale = scale_for(cost);
  const double scaled = static_cast<double>(count) * scale;
  const double new_use = used_units(user, 1.0, cost);  // each of its units, at its usage
  const double used = scaled * new_use;
  JobEstimate e = estimate(user, queued + 1, queued + count,
                           Units{before + scale, used_before + scale * new_use},
                           Units{before + scaled, used_before + used}, Refunds::when_back);
  const double sending =
      seconds_for(Work{pages_equivalent(0.0, 0.0, static_cast<double>(count), used),
                       pages_equivalent(0.0, 0.0, static_cast<double>(count), scaled)});
  e.own_seconds =
      sending + last_answer_s(static_cast<double>(count), sending, static_cast<double>(count));
  return e;
}

}  // namespace fairlane
