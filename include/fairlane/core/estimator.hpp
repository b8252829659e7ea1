// Estimator: how fast pages leave and how long each job will wait, as DESIGN.md section 5
// defines it.
//
//   mu (pages/s) = min(RPM/60, (TPM/60) / avg_tokens, max_in_flight / avg_latency)
//   position of a job = pages fair order dispatches before the job's next page
//                     = sum over other lanes v of min(q_v, j * w_v / w_u) + (j - 1)
//   pages_ahead_of_last = sum over other lanes v of min(q_v, k * w_v / w_u) + (k - 1)
//   eta_seconds = (pages_ahead_of_last + 1) / mu + avg_latency
//
// where j and k are the 1-based indices of the job's next and last page in its own lane u,
// q_v a lane's length and w its weight. Pages of a job that cost s times the average
// reservation count s times in the tokens: deficit round robin shares tokens, so while u
// sends k such pages, every other lane sends up to k * s of its own; each page still takes
// one request and one call, and the limit whose total takes longest sets the time. For the
// tokens limit the other lanes count their own tokens (the scheduler's token index: sum over
// v of min(T_v, tokens u sends x w_v / w_u)), not their page counts. avg_tokens and
// avg_latency are EWMAs of settled calls; until the first, a page uses what it reserves (the
// configured tokens a page, or the mean reservation of the pages that have arrived). A
// restarted service, a new leader and a follower start them from the calls the store kept
// (record_settled); a follower's view and a new leader go on with the arrivals of the
// state before (continue_arrivals), and a first start rebuilds them from the jobs the store
// kept (record_arrived). An unlimited
// limit (0) drops out of mu. Given the Budget, the limits are those in force (lowered to what the
// provider announces, Budget::effective_limits), not the configured ones.
//
// Given the Budget, the ETA also counts what the buckets hold now, which the formula
// above (a steady state) does not: with n = pages_ahead_of_last + 1, B = the pages the
// current bucket levels pay for (at what pages use: refunds come back at settle), F = the
// pages that can start at once (free permits, and the reservations the tokens level holds),
// c = the in-flight rate (what can be out at once over avg_latency), the n pages are sent
// when both the credit with its refill and the calls allow:
//   eta_seconds = max((n - B) / mu, (n - F) / c, 0) + avg_latency
// With empty buckets (B = 0) and c >= mu this is exactly the formula above; after an idle
// spell it keeps the ETA honest instead of several times too long (docs/architecture.md).
// Pages beyond F go as the calls out end, a latency after they were sent: calls sent
// together end together (InFlightCap::mean_sent, Estimator::after_free).
//
// The weighted term is min(q_v, k * w_v / w_u): while u sends k pages, a lane of twice the
// weight sends 2k (DESIGN.md writes min(q_v * w_v / w_u, k); both agree at equal weights,
// and only this one counts pages of heavier lanes correctly; see docs/architecture.md).
//
// When reservations exceed usage (R > U), a third bound: calls go in waves a latency apart,
// each as many pages as the tokens level holds at R, and the level after a wave is
// level - U x wave + refill x latency; the waves tend geometrically (ratio 1 - U / R) to
// mu x latency pages, so the pages of the first x waves have a closed form, S(x), and the
// n-th page goes with the wave x at which S(x) covers n (docs/architecture.md, Estimator).
//
// Arrivals (when the estimator has a clock): work keeps arriving while a job waits, and the
// part of it that fair order puts ahead of the job's last page (Arrivals::competing_rate at
// the job's last round K = k / w_u, a pages-a-second rate lambda) takes its share of each
// bound at that bound's own rate: the fluid equation T = T0 + lambda T / rate gives
//   credit: (n - B) / (mu - lambda)   calls: ((n - F) / c) / (1 - lambda / c)
//   waves: the first x with S(x) >= n + lambda x latency
// each share at most max_competition (docs/architecture.md, "Promises under arrivals").
// Until three of the arrivals' window's slots have ended, the rate is measured over a tenth of
// it, where the busiest slot counts as the next busiest (Busiest::as_next).
//
// own_seconds is the job's own time as if nothing else were queued, from the buckets as they
// are and without arrivals: the door bounds wait = eta_seconds - own_seconds, what the queue
// (and the work expected to arrive) adds. alone_seconds is the same at the steady rate mu,
// whatever the buckets hold now: the door's max_job_s bounds it.
//
// Every estimate costs O(weight classes x log longest lane + arrival buckets): the sums come
// from LaneLengths' Fenwick trees, never from a walk over pages or lanes.
//
// Thread safety: none, by design; it lives on the io_context thread with the scheduler.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>

#include "fairlane/core/arrivals.hpp"
#include "fairlane/core/budget.hpp"
#include "fairlane/core/clock.hpp"
#include "fairlane/core/fair_scheduler.hpp"
#include "fairlane/core/ids.hpp"
#include "fairlane/core/limit.hpp"

namespace fairlane {

struct EstimatorConfig {
  BudgetLimits limits = {};
  double initial_tokens_per_page = 800.0;  // reserved and used, until pages arrive
  double initial_latency_s = 2.0;          // until the first settled call
  double ewma_alpha = 0.1;                 // weight of each new observation of tokens
  // The same for a call's latency and its spread, learned in the order calls were sent
  // (SendOrder). A spread read from few calls is noisy: in simulator 5b alpha 0.05 and 0.1
  // left more books late than 0.02, which spans a burst of a hundred calls.
  double latency_alpha = 0.02;
  // How surely a job's slowest call is done by its promise, q: where the largest of k draws
  // is expected about sqrt(2 ln k) deviations above the average, the promise allows
  // sqrt(2 ln (k / (1 - q))), the expected largest of k / (1 - q) draws. That holds with
  // probability near q for latencies with a long tail (lognormal: 98.8% at k = 1) and more
  // for normal ones (99.9%). The door's target is 95% of books within promise + 10%, and
  // the arrivals' spread takes most of those 5% (docs/architecture.md, Estimator). In
  // [0.5, 1).
  double finish_quantile = 0.99;
  // Arrivals older than about this weigh little in the competing rate.
  Clock::duration arrival_window = std::chrono::minutes(5);
  // The largest share of the rate that arriving work may be expected to take (rho's cap).
  double max_competition = 0.9;
};

// How an ETA counts the refunds of the calls out, where pages reserve more than they use:
// each call gives back what it reserved and did not use when it settles, within a latency.
enum class Refunds : std::uint8_t {
  // The tokens level as it is: what the door promises, and what a promise is checked
  // against (PromiseOrder, a PromiseWindow's promise made again). Leaving the refunds out of
  // the credit is the promise's margin for work that arrives after it, which no correction
  // for arrivals foresees (docs/architecture.md, "Promises under arrivals").
  when_back,
  // As they will come back: what a job is told while it waits (its eta_seconds, a
  // revision), the expected finish.
  expected,
};

// Whether an ETA counts the work expected to arrive ahead of the job while it waits.
enum class Competition : std::uint8_t {
  // It does (Arrivals): the door's promise, a job's eta_seconds.
  expected,
  // It does, unless the job is alone in its user's lane: then the PromiseOrder holds that
  // work off (newer work gives the job its turns once its promise is at risk), and only the
  // work queued now counts. How the PromiseWatch projects a job where promises are kept.
  held_off,
};

// Queued work an ETA leaves out: the last `pages` pages of `user`'s lane, worth `tokens`.
// Work that gives its turns to the job estimated (PromiseOrder::project) is not ahead of it.
struct LaneTail {
  UserId user = 0;
  std::int64_t pages = 0;
  std::int64_t tokens = 0;
};

// Where a job stands: pages ahead of its next page, and seconds until its last is done.
struct JobEstimate {
  std::int64_t position = 0;
  double eta_seconds = 0.0;
  // The job's own pages with nothing else queued, from now (estimate_new only; 0 from job()).
  double own_seconds = 0.0;
};

class Estimator {
 public:
  // `scheduler` (and `budget` and `clock`, when given) must outlive the estimator. Without a
  // budget the ETA is the steady-state formula alone; without a clock it counts no arrivals.
  Estimator(const FairScheduler& scheduler, const EstimatorConfig& config,
            const Budget* budget = nullptr, const Clock* clock = nullptr);

  // `pages` pages of `user`, reserving `reserved_tokens` in all (0: not said), are about to
  // join their lane (call it before they do; DispatchPolicy::enqueue_job does both, in that
  // order): they count as arrivals at the rounds they will take. Until the first call
  // settles, a page is taken to use its whole reservation (the mean of those seen so far).
  void record_arrival(UserId user, std::int64_t pages, std::int64_t reserved_tokens = 0);

  // A restart's arrivals, from the jobs the store kept, before any arrival of its own: as if
  // it had been counting them for `counted` until now, and each job, given oldest first, had
  // joined its lane `ago` before now, behind `ahead` pages of it.
  void arrivals_counted_for(Clock::duration counted);
  void record_arrived(Clock::duration ago, UserId user, std::int64_t pages, std::int64_t ahead);

  // An estimator built again from the store (a cluster's view read again, a takeover) goes on
  // counting what `before`, with the same configuration, saw arrive: the competition a
  // promise expects is not rebuilt from the lanes, which show what waits, not what came.
  void continue_arrivals(const Estimator& before);

  // A call settled: it reserved `reserved_tokens`, used `tokens` and took `latency` from
  // dispatch to answer. Calls that settled before this estimator existed (a restart's, the
  // leader's) are given the same way, oldest first, before any of its own. The n-th weighs
  // max(alpha, 1 / n), so the averages and the latency's spread are the calls' own (in effect
  // the last 1 / alpha of them), never pulled towards the configured guesses.
  void record_settled(std::int64_t tokens, std::int64_t reserved_tokens, Clock::duration latency);

  [[nodiscard]] double avg_tokens_per_page() const { return avg_tokens_; }
  [[nodiscard]] double avg_reserved_tokens_per_page() const { return avg_reserved_; }
  [[nodiscard]] double avg_latency_s() const { return avg_latency_s_; }

  // Pages per second the provider's limits allow at the current averages; +infinity when
  // nothing is limited.
  [[nodiscard]] double mu() const;
  // The same for pages that use `tokens_per_page` tokens each: what the provider's limits
  // and its latency allow, whatever the pages use now.
  [[nodiscard]] double mu_at(double tokens_per_page) const;
  // The limit that sets mu ("requests" on a tie, as the cheapest to reason about;
  // concurrency when nothing is limited).
  [[nodiscard]] Limit binding() const;

  // A queued job's position and ETA; std::nullopt when none of its pages is queued.
  // `left_out`: the tails of other users' lanes that are not ahead of it (their pages and
  // tokens counted as if they were not queued; at most one tail a lane).
  [[nodiscard]] std::optional<JobEstimate> job(UserId user, JobId job,
                                               Refunds refunds = Refunds::expected,
                                               Competition competition = Competition::expected,
                                               std::span<const LaneTail> left_out = {}) const;

  // What a new job of `pages` pages from `user`, of `tokens_per_page` each (0: the
  // average), would get if it were enqueued now.
  [[nodiscard]] JobEstimate estimate_new(UserId user, std::int64_t pages,
                                         std::int64_t tokens_per_page = 0) const;

  // Seconds `pages` pages from `user` of `tokens_per_page` each (0: the average) take alone:
  // at the steady rate, with nothing ahead and no arrivals, plus a call's latency. The pages
  // count at what the user's pages use (usage_of), as in its ETA.
  [[nodiscard]] double alone_seconds(UserId user, std::int64_t pages,
                                     std::int64_t tokens_per_page = 0) const;

  // The share of the rate that arriving work is expected to take ahead of a page `rounds`
  // rounds from the front: rho above, 0 without a clock.
  [[nodiscard]] double competition(double rounds) const;

 private:
  // Sum over lanes other than `user`'s of min(q_v, t * w_v / w_u): pages, each counted as
  // an average one. A lane's tail in `left_out` is taken out of its q_v.
  [[nodiscard]] double others_ahead(UserId user, double t,
                                    std::span<const LaneTail> left_out = {}) const;
  // The same in tokens, in pages of the average use: sum over the other lanes of min(U_v,
  // t x avg_tokens x w_v / w_u) / avg_tokens, U_v what a lane's queued pages are expected
  // to use: their tokens at the lane's own usage once it has learned it, at the average
  // usage before. Deficit round robin shares what pages are charged, which is that, so a
  // lane of big pages puts its tokens ahead, not its page count, and a lane whose pages use
  // a quarter of what they reserve a quarter of its tokens. A lane's tail in `left_out` is
  // taken out of its U_v.
  [[nodiscard]] double others_tokens_ahead(UserId user, double t,
                                           std::span<const LaneTail> left_out = {}) const;
  // `others` pages worth `others_units` average pages of tokens, and `own` pages worth
  // `own_units`, in average pages' time under the limits: each limit counts its own total (a
  // page is one request and one call whatever its size, and its tokens in average pages) and
  // the slowest sets the time. So a cheap page still costs a whole request under an RPM limit.
  [[nodiscard]] double pages_equivalent(double others, double others_units, double own,
                                        double own_units) const;
  // The tokens bucket's level that calls can take now: above the headroom it keeps.
  [[nodiscard]] double tokens_free() const;
  // Seconds until the last of `waiting` pages that cannot start at once starts, calls going
  // out at `burst_rate` (pages a second) once they flow.
  [[nodiscard]] double after_free(double waiting, double burst_rate) const;
  // Seconds until the last of `pages` pages is sent when reservations exceed usage: calls go
  // in waves a latency apart, each as many as the tokens level holds at the reservation.
  [[nodiscard]] double reservation_waves(double pages, double competing = 0.0) const;
  // Work to be sent, as two sizes in pages of the average (pages_equivalent()): `used`
  // counts each lane's tokens at what its pages use, which the buckets' refill pays for;
  // `reserved` counts the asking user's own at what they reserve, which is what the calls
  // out hold of the tokens level. They differ when the user's pages use a share of their
  // reservation unlike the average page's.
  struct Work {
    double used = 0.0;
    double reserved = 0.0;
  };
  // Seconds until the last page of `work` from now is answered, with `competing` pages a
  // second arriving ahead of it meanwhile.
  [[nodiscard]] double seconds_for(Work work, double competing = 0.0,
                                   Refunds refunds = Refunds::when_back) const;
  // Tokens of a lane's pages as pages of the average: at what they reserve (units()), and
  // at what they are expected to use (used_units()).
  struct Units {
    double reserved = 0.0;
    double used = 0.0;
  };
  // The job's pages are the lane's next_index-th to last_index-th; `to_next` and `to_last`
  // are the tokens of the lane's pages up to them. Deficit round robin shares what pages are
  // expected to use: while u sends pages worth t pages of the average use, another lane
  // sends t of its own (times the weights' ratio).
  [[nodiscard]] JobEstimate estimate(UserId user, std::int64_t next_index, std::int64_t last_index,
                                     Units to_next, Units to_last, Refunds refunds,
                                     Competition competition = Competition::expected,
                                     std::span<const LaneTail> left_out = {}) const;
  [[nodiscard]] double scale_for(double tokens_per_page) const;
  // Seconds from a job's last call going out until its last answer, for a job of `pages`
  // whose last goes out in `sending_s`: a latency, and the spread of the slowest of the calls
  // that go shortly before it, less how much sooner they went. The job's pages are the last
  // of the `lane_pages` its lane sends in that time (its user's earlier jobs first), one
  // every `sending_s / lane_pages`.
  [[nodiscard]] double last_answer_s(double pages, double sending_s, double lane_pages) const;
  // The limits in force: the budget's (which follow what the provider announces), else the
  // configured ones.
  [[nodiscard]] BudgetLimits limits() const;
  // `tokens` of `pages` pages in average reservations (the pages themselves without one).
  [[nodiscard]] double units(std::int64_t tokens, std::int64_t pages) const;
  // What `user`'s pages of `cost_per_page` tokens (0: its lane's own) use of what they
  // reserve: its lane's ratio once one of its pages has settled (FairScheduler::lane_usage),
  // the average over every call until then, and for pages unlike those it was learned from
  // (more than twice or less than half their average cost: another max_tokens, say).
  [[nodiscard]] double usage_of(UserId user, double cost_per_page = 0.0) const;
  // `units` average reservations of `user`'s pages of `cost_per_page` (usage_of), in pages of
  // the average use: as many as their tokens at that usage are worth of avg_tokens_. The
  // same number when they use what the average page does.
  [[nodiscard]] double used_units(UserId user, double units, double cost_per_page = 0.0) const;

  // Constant after construction.
  const FairScheduler& scheduler_;
  const EstimatorConfig config_;
  const Budget* budget_;
  std::optional<Arrivals> arrivals_;  // with a clock
  // The same over a tenth of the window, counted only until arrivals_ is measuring: the first
  // minutes after a start would otherwise expect nothing to arrive.
  std::optional<Arrivals> warmup_;

  // Until the first call settles: the average reservation is that of the pages seen (the
  // configured tokens a page until one is), and usage at most the reservation.
  void prime(std::int64_t pages, double reserved_tokens);
  // Only touched on the owning thread.
  double avg_tokens_;
  double avg_reserved_;
  double avg_latency_s_;
  double latency_var_ = 0.0;      // EWMA of the squared deviation from avg_latency_s_
  double settled_calls_ = 0.0;    // calls given to record_settled (> 0: the averages measured)
  double primed_pages_ = 0.0;     // pages seen with a reservation before that
  double primed_reserved_ = 0.0;  // and their reservations
};

}  // namespace fairlane
