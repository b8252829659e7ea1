#include "fairlane/core/fair_scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace fairlane {

FairScheduler::FairScheduler(std::int64_t quantum)
    : configured_quantum_(std::max<std::int64_t>(quantum, 0)) {}

namespace {
constexpr double kUsageAlpha = 0.1;  // the weight of each settled page in a usage average
// A page's usage over its cost is counted up to this: one call the provider counted far
// above its estimate must not make its lane's charges, and every turn's quantum, huge.
constexpr double kMaxUsage = 2.0;

// `average` moved towards `sample`, the n-th of which weighs max(kUsageAlpha, 1 / n).
void follow(double& average, double& count, double sample) {
  count += 1.0;
  average += std::max(kUsageAlpha, 1.0 / count) * (sample - average);
}
}  // namespace

std::int64_t FairScheduler::quantum() const {
  std::int64_t largest_head = 1;
  if (!head_charges_.empty()) largest_head = std::max(largest_head, head_charges_.rbegin()->first);
  if (!unlearned_head_costs_.empty()) {
    largest_head = std::max(largest_head, charge_at(unlearned_head_costs_.rbegin()->first, usage_));
  }
  return std::max(configured_quantum_, largest_head);
}

std::int64_t FairScheduler::charge_at(std::int64_t cost, double usage) {
  if (cost <= 0) return 0;
  return std::max<std::int64_t>(std::llround(static_cast<double>(cost) * usage), 1);
}

std::int64_t FairScheduler::charge_for(const Lane& lane, std::int64_t cost) const {
  return charge_at(cost, lane.settled > 0.0 ? lane.usage : usage_);
}

void FairScheduler::index_head(Lane& lane) {
  std::optional<HeadKey> key;
  if (!lane.pages.empty()) {
    const std::int64_t cost = lane.pages.front().cost;
    key = lane.settled > 0.0 ? HeadKey{charge_for(lane, cost), true} : HeadKey{cost, false};
  }
  if (key == lane.head) return;
  if (lane.head) {
    auto& index = lane.head->learned ? head_charges_ : unlearned_head_costs_;
    const auto it = index.find(lane.head->value);
    if (--it->second == 0) index.erase(it);
  }
  if (key) ++(key->learned ? head_charges_ : unlearned_head_costs_)[key->value];
  lane.head = key;
}

FairScheduler::Lane& FairScheduler::lane_of(UserId user) {
  return lanes_[user];
}

void FairScheduler::set_weight(UserId user, std::int64_t weight) {
  Lane& lane = lane_of(user);
  weight = std::max<std::int64_t>(weight, 1);
  if (weight == lane.weight) return;
  const auto length = static_cast<std::int64_t>(lane.pages.size());
  lengths_.update(lane.weight, length, 0);
  const std::int64_t weight_before = std::exchange(lane.weight, weight);
  lengths_.update(lane.weight, 0, length);
  index_tokens(lane, weight_before);
}

std::int64_t FairScheduler::weight(UserId user) const {
  const auto it = lanes_.find(user);
  return it == lanes_.end() ? 1 : it->second.weight;
}

std::int64_t FairScheduler::lane_length(UserId user) const {
  const auto it = lanes_.find(user);
  return it == lanes_.end() ? 0 : static_cast<std::int64_t>(it->second.pages.size());
}

std::int64_t FairScheduler::lane_tokens(UserId user) const {
  const auto it = lanes_.find(user);
  return it == lanes_.end() ? 0 : it->second.tokens;
}

std::optional<double> FairScheduler::lane_usage(UserId user) const {
  const auto it = lanes_.find(user);
  if (it == lanes_.end() || !(it->second.settled > 0.0)) return std::nullopt;
  return it->second.use_ratio();
}

double FairScheduler::lane_cost(UserId user) const {
  const auto it = lanes_.find(user);
  return it == lanes_.end() ? 0.0 : it->second.cost_average;
}

std::int64_t FairScheduler::expected_use(std::int64_t tokens, double usage) {
  return std::llround(static_cast<double>(tokens) * usage);
}

void FairScheduler::join_ring(UserId user, Lane& lane) {
  if (lane.in_ring) return;
  // A lane that joins goes to the end of the current round: just before the lane being
  // visited, so everyone already waiting has their turn first.
  lane.in_ring = ring_.insert(current_, user);
  lane.credit = 0;
  lane.credited = false;
  if (current_ == ring_.end()) current_ = *lane.in_ring;
}

void FairScheduler::leave_ring_if_empty(Lane& lane) {
  if (!lane.pages.empty() || !lane.in_ring) return;
  auto position = *lane.in_ring;
  if (current_ == position) {
    current_ = std::next(position);
    if (current_ == ring_.end()) current_ = ring_.begin();
  }
  ring_.erase(position);
  if (ring_.empty()) current_ = ring_.end();
  lane.in_ring.reset();
  lane.credit = 0;
  lane.refunded = 0;
  lane.credited = false;
}

void FairScheduler::changed(Lane& lane, std::int64_t length_before) {
  lengths_.update(lane.weight, length_before, static_cast<std::int64_t>(lane.pages.size()));
  index_tokens(lane, lane.weight);
  index_head(lane);
}

void FairScheduler::index_tokens(Lane& lane, std::int64_t weight_before) {
  const bool used = lane.settled > 0.0;
  const std::int64_t value = used ? expected_use(lane.tokens, lane.use_ratio()) : lane.tokens;
  // A lane with pages is in an index, under key 1 at least (a page may cost nothing).
  const std::int64_t key =
      lane.pages.empty() ? 0 : std::max<std::int64_t>((value + kTokenUnit - 1) / kTokenUnit, 1);
  if (key == lane.indexed && value == lane.indexed_tokens && used == lane.indexed_used &&
      weight_before == lane.weight) {
    return;
  }
  (lane.indexed_used ? used_lengths_ : token_lengths_)
      .update(weight_before, lane.indexed, lane.indexed_tokens, 0, 0);
  (used ? used_lengths_ : token_lengths_).update(lane.weight, 0, 0, key, value);
  lane.indexed = key;
  lane.indexed_tokens = value;
  lane.indexed_used = used;
}

void FairScheduler::refile(Lane& lane, JobId job, JobMarks& marks) {
  lane.order.erase(marks.filed_under, job);
  marks.filed_under = first_page(lane, marks);
  lane.order.insert(marks.filed_under, job, marks.tokens);
}

void FairScheduler::add(const QueuedPage& page) {
  Lane& lane = lane_of(page.user_id);
  if (!lane.pages.empty() && page.page_id < lane.pages.back().page_id) {
    insert_in_order(lane, page);
    return;
  }
  const auto length_before = static_cast<std::int64_t>(lane.pages.size());
  lane.pages.push_back(page);
  ++lane.enqueued;
  file(lane, page, lane.enqueued);
  changed(lane, length_before);
  join_ring(page.user_id, lane);
}

void FairScheduler::insert_in_order(Lane& lane, const QueuedPage& page) {
  const auto length_before = static_cast<std::int64_t>(lane.pages.size());
  // The page may go ahead of the head page's job, which takes left filed where it was.
  const JobId head_job = lane.pages.front().job_id;
  refile(lane, head_job, lane.jobs[head_job]);
  const auto at = std::ranges::upper_bound(lane.pages, page.page_id, {}, &QueuedPage::page_id);
  const auto index = at - lane.pages.begin();
  const std::int64_t position = lane.consumed + index + 1;
  // The pages from there on move one slot towards the tail, and their jobs' marks with them.
  for (auto& [job, marks] : lane.jobs) {
    if (marks.first >= position) ++marks.first;
    if (marks.last >= position) ++marks.last;
  }
  ++lane.enqueued;
  lane.pages.insert(at, page);
  file(lane, page, position);
  changed(lane, length_before);
  join_ring(page.user_id, lane);
}

void FairScheduler::file(Lane& lane, const QueuedPage& page, std::int64_t position) {
  JobMarks& marks = lane.jobs[page.job_id];
  const bool leads_job = marks.queued == 0 || position < marks.first;
  if (marks.queued == 0) {
    marks.first = marks.last = position;
  } else {
    marks.first = std::min(marks.first, position);
    marks.last = std::max(marks.last, position);
  }
  ++marks.queued;
  marks.tokens += page.cost;
  lane.tokens += page.cost;
  if (marks.queued == 1) {
    marks.filed_under = page.page_id;
    lane.order.insert(page.page_id, page.job_id, page.cost);
  } else if (leads_job) {
    refile(lane, page.job_id, marks);  // under its new first page
  } else {
    // Where it is filed. The head page's job may be filed stale (see Lane::order): no job's
    // place counts its tokens, so adding to them changes nothing.
    lane.order.add_tokens(marks.filed_under, page.job_id, page.cost);
  }
  ++size_;
}

void FairScheduler::put_back(const QueuedPage& page) {
  Lane& lane = lane_of(page.user_id);
  const auto length_before = static_cast<std::int64_t>(lane.pages.size());
  // The page may go ahead of the head page's job, which takes left filed where it was.
  if (!lane.pages.empty()) {
    const JobId head_job = lane.pages.front().job_id;
    refile(lane, head_job, lane.jobs[head_job]);
  }
  // Pages that came back sit at the head in page order, as if they had never left: the
  // page goes after those with smaller ids. The head moves back one slot, and the pages
  // before the insertion point move with it.
  std::size_t index = 0;
  while (index < lane.pages.size() && lane.pages[index].page_id < page.page_id) ++index;
  const std::int64_t moved_from = lane.consumed + 1;
  const auto moved_to = moved_from + static_cast<std::int64_t>(index) - 1;
  // Each job among the moved pages moves once, however many of its pages moved: a lane's
  // jobs hold contiguous stretches, so a job's pages are neighbours here.
  for (std::size_t i = 0; i < index; ++i) {
    if (i > 0 && lane.pages[i - 1].job_id == lane.pages[i].job_id) continue;
    JobMarks& moved = lane.jobs[lane.pages[i].job_id];
    if (moved.first >= moved_from && moved.first <= moved_to) --moved.first;
    if (moved.last >= moved_from && moved.last <= moved_to) --moved.last;
  }
  --lane.consumed;
  const std::int64_t position = lane.consumed + static_cast<std::int64_t>(index) + 1;
  lane.pages.insert(lane.pages.begin() + static_cast<std::ptrdiff_t>(index), page);
  file(lane, page, position);
  changed(lane, length_before);
  if (lane.in_ring) {
    // It was charged when it was taken; the call never happened, so refund it.
    lane.credit += page.charged;
  } else {
    join_ring(page.user_id, lane);
  }
}

void FairScheduler::settle(const QueuedPage& page, std::int64_t used) {
  const auto it = lanes_.find(page.user_id);
  if (page.cost > 0) {
    const double usage =
        std::clamp(static_cast<double>(used) / static_cast<double>(page.cost), 0.0, kMaxUsage);
    follow(usage_, settled_, usage);
    if (it != lanes_.end()) {
      Lane& lane = it->second;
      const double weight = std::max(kUsageAlpha, 1.0 / (lane.settled + 1.0));
      lane.used_average +=
          weight * (static_cast<double>(std::max<std::int64_t>(used, 0)) - lane.used_average);
      lane.cost_average += weight * (static_cast<double>(page.cost) - lane.cost_average);
      follow(it->second.usage, it->second.settled, usage);
      index_tokens(it->second, it->second.weight);
      index_head(it->second);
    }
  }
  if (page.charged == 0) return;  // sent out of turn: its lane paid nothing
  if (it == lanes_.end() || !it->second.in_ring) return;
  if (used > page.charged) {
    it->second.credit -= used - page.charged;  // owed, however much
  } else {
    give_back(it->second, page.charged - used);
  }
}

void FairScheduler::refund(const QueuedPage& page) {
  const auto it = lanes_.find(page.user_id);
  if (it == lanes_.end() || !it->second.in_ring) return;
  it->second.credit += page.charged;  // as if it had never been taken (put_back())
}

void FairScheduler::give_back(Lane& lane, std::int64_t tokens) {
  lane.refunded = std::min(lane.refunded + tokens, quantum() * lane.weight);
}

const QueuedPage* FairScheduler::peek() {
  if (ring_.empty()) return nullptr;
  // Every lane in the ring is non-empty and each visit earns at least a head page's cost, so
  // a lane whose credit is not negative finds a page on its first fresh visit; one that owes
  // (settle()) pays its debt off a quantum a visit first.
  while (true) {
    Lane& lane = lanes_.at(*current_);
    if (!lane.credited) {
      lane.credit += quantum() * lane.weight + std::exchange(lane.refunded, 0);
      lane.credited = true;
    }
    if (charge_for(lane, lane.pages.front().cost) <= lane.credit) return &lane.pages.front();
    // This visit is over: the lane keeps its remaining credit for the next one.
    lane.credited = false;
    if (++current_ == ring_.end()) current_ = ring_.begin();
  }
}

std::optional<QueuedPage> FairScheduler::take() {
  if (peek() == nullptr) return std::nullopt;
  Lane& lane = lanes_.at(*current_);
  const std::int64_t charge = charge_for(lane, lane.pages.front().cost);
  lane.credit -= charge;
  QueuedPage page = pop_head(lane);
  page.charged = charge;
  return page;
}

void FairScheduler::give_turn() {
  if (peek() == nullptr) return;
  Lane& lane = lanes_.at(*current_);
  lane.credit -= charge_for(lane, lane.pages.front().cost);
}

std::size_t FairScheduler::lane_jobs(UserId user) const {
  const auto it = lanes_.find(user);
  return it == lanes_.end() ? 0 : it->second.jobs.size();
}

const QueuedPage* FairScheduler::peek_lane(UserId user) const {
  const auto it = lanes_.find(user);
  return it == lanes_.end() || it->second.pages.empty() ? nullptr : &it->second.pages.front();
}

std::optional<QueuedPage> FairScheduler::take_from(UserId user) {
  const auto it = lanes_.find(user);
  if (it == lanes_.end() || it->second.pages.empty()) return std::nullopt;
  return pop_head(it->second);
}

QueuedPage FairScheduler::pop_head(Lane& lane) {
  const auto length_before = static_cast<std::int64_t>(lane.pages.size());
  QueuedPage page = lane.pages.front();
  page.charged = 0;
  lane.pages.pop_front();
  lane.tokens -= page.cost;
  ++lane.consumed;
  --size_;
  auto marks = lane.jobs.find(page.job_id);
  if (marks != lane.jobs.end()) {
    marks->second.tokens -= page.cost;
    if (--marks->second.queued == 0) {
      lane.order.erase(marks->second.filed_under, page.job_id);
      lane.jobs.erase(marks);
    } else {
      marks->second.first = lane.consumed + 1;
    }
  }
  changed(lane, length_before);
  leave_ring_if_empty(lane);
  return page;
}

std::vector<QueuedPage> FairScheduler::remove_job(UserId user, JobId job) {
  std::vector<QueuedPage> removed;
  const auto found = lanes_.find(user);
  if (found == lanes_.end()) return removed;
  Lane& lane = found->second;
  const auto marks = lane.jobs.find(job);
  if (marks == lane.jobs.end()) return removed;
  const JobMarks gone = marks->second;
  lane.jobs.erase(marks);
  lane.order.erase(gone.filed_under, job);

  const auto length_before = static_cast<std::int64_t>(lane.pages.size());
  std::deque<QueuedPage> kept;
  for (QueuedPage& page : lane.pages) {
    if (page.job_id == job) {
      removed.push_back(page);
    } else {
      kept.push_back(page);
    }
  }
  lane.pages = std::move(kept);
  const auto count = static_cast<std::int64_t>(removed.size());
  // Jobs behind the removed one move up by its size.
  for (auto& [other, other_marks] : lane.jobs) {
    if (other_marks.first > gone.last) {
      other_marks.first -= count;
      other_marks.last -= count;
    }
  }
  lane.enqueued -= count;
  lane.tokens -= gone.tokens;
  size_ -= count;
  changed(lane, length_before);
  leave_ring_if_empty(lane);
  return removed;
}

std::optional<FairScheduler::JobPlace> FairScheduler::job_place(UserId user, JobId job) const {
  const auto lane = lanes_.find(user);
  if (lane == lanes_.end()) return std::nullopt;
  const auto marks = lane->second.jobs.find(job);
  if (marks == lane->second.jobs.end()) return std::nullopt;
  const std::int64_t head = lane->second.consumed;
  // The lane is in page-id order and its jobs hold contiguous stretches of it: the jobs
  // behind this one are those filed after its first page, every one of them filed exactly
  // (only the head page's job may be filed stale, and it is never behind).
  const std::int64_t tokens_behind =
      lane->second.order.tokens_after(first_page(lane->second, marks->second));
  const std::int64_t tokens_before = lane->second.tokens - marks->second.tokens - tokens_behind;
  return JobPlace{marks->second.first - head, marks->second.last - head, marks->second.queued,
                  marks->second.tokens, tokens_before};
}

}  // namespace fairlane
