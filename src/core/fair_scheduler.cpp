#include "fairlane/fair_scheduler.hpp"

#include <algorithm>

namespace fairlane {

FairScheduler::FairScheduler(std::int64_t quantum)
    : configured_quantum_(std::max<std::int64_t>(quantum, 0)) {}

std::int64_t FairScheduler::quantum() const {
  return std::max(configured_quantum_, largest_cost_);
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
  lane.weight = weight;
  lengths_.update(lane.weight, 0, length);
}

std::int64_t FairScheduler::weight(UserId user) const {
  const auto it = lanes_.find(user);
  return it == lanes_.end() ? 1 : it->second.weight;
}

std::int64_t FairScheduler::lane_length(UserId user) const {
  const auto it = lanes_.find(user);
  return it == lanes_.end() ? 0 : static_cast<std::int64_t>(it->second.pages.size());
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
  lane.credited = false;
}

void FairScheduler::resize(Lane& lane, std::int64_t before) {
  lengths_.update(lane.weight, before, static_cast<std::int64_t>(lane.pages.size()));
}

void FairScheduler::add(const QueuedPage& page) {
  Lane& lane = lane_of(page.user_id);
  const auto before = static_cast<std::int64_t>(lane.pages.size());
  lane.pages.push_back(page);
  ++lane.enqueued;
  JobMarks& marks = lane.jobs[page.job_id];
  if (marks.queued == 0) marks.first = lane.enqueued;
  marks.last = lane.enqueued;
  ++marks.queued;
  ++size_;
  largest_cost_ = std::max(largest_cost_, page.cost);
  resize(lane, before);
  join_ring(page.user_id, lane);
}

void FairScheduler::put_back(const QueuedPage& page) {
  Lane& lane = lane_of(page.user_id);
  const auto before = static_cast<std::int64_t>(lane.pages.size());
  lane.pages.push_front(page);
  const std::int64_t position = lane.consumed;  // the slot just before the head
  --lane.consumed;
  JobMarks& marks = lane.jobs[page.job_id];
  if (marks.queued == 0) marks.last = position;
  marks.first = position;
  ++marks.queued;
  ++size_;
  largest_cost_ = std::max(largest_cost_, page.cost);
  resize(lane, before);
  if (lane.in_ring) {
    // Its cost was charged when it was taken; the call never happened, so refund it.
    lane.credit += page.cost;
    return;
  }
  // The lane had emptied: it comes back as the lane being visited, with the page's credit,
  // so the page is the next one out, as if it had never left.
  lane.in_ring = ring_.insert(current_, page.user_id);
  current_ = *lane.in_ring;
  lane.credit = page.cost;
  lane.credited = true;
}

const QueuedPage* FairScheduler::peek() {
  if (ring_.empty()) return nullptr;
  // Every lane in the ring is non-empty and the quantum covers any single page, so a full
  // turn of the ring always finds a page: this loop ends within two visits of each lane.
  while (true) {
    Lane& lane = lanes_.at(*current_);
    if (!lane.credited) {
      lane.credit += quantum() * lane.weight;
      lane.credited = true;
    }
    if (lane.pages.front().cost <= lane.credit) return &lane.pages.front();
    // This visit is over: the lane keeps its remaining credit for the next one.
    lane.credited = false;
    if (++current_ == ring_.end()) current_ = ring_.begin();
  }
}

std::optional<QueuedPage> FairScheduler::take() {
  if (peek() == nullptr) return std::nullopt;
  Lane& lane = lanes_.at(*current_);
  const auto before = static_cast<std::int64_t>(lane.pages.size());
  QueuedPage page = lane.pages.front();
  lane.pages.pop_front();
  lane.credit -= page.cost;
  ++lane.consumed;
  --size_;
  auto marks = lane.jobs.find(page.job_id);
  if (marks != lane.jobs.end()) {
    if (--marks->second.queued == 0) {
      lane.jobs.erase(marks);
    } else {
      marks->second.first = lane.consumed + 1;
    }
  }
  resize(lane, before);
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

  const auto before = static_cast<std::int64_t>(lane.pages.size());
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
  size_ -= count;
  resize(lane, before);
  leave_ring_if_empty(lane);
  return removed;
}

std::optional<FairScheduler::JobPlace> FairScheduler::job_place(UserId user, JobId job) const {
  const auto lane = lanes_.find(user);
  if (lane == lanes_.end()) return std::nullopt;
  const auto marks = lane->second.jobs.find(job);
  if (marks == lane->second.jobs.end()) return std::nullopt;
  const std::int64_t head = lane->second.consumed;
  return JobPlace{marks->second.first - head, marks->second.last - head};
}

}  // namespace fairlane
