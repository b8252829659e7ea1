#include "fairlane/core/promise_window.hpp"

#include <algorithm>

namespace fairlane {

PromiseWindow::PromiseWindow(const Clock& clock, Clock::duration window)
    : clock_(clock), window_(std::max(window, Clock::duration::zero())) {}

void PromiseWindow::accepted(JobId job, Clock::duration door_eta) {
  const Clock::time_point now = clock_.now();
  ++accepted_;
  open_.push_back(Open{job, now + window_, now + door_eta, accepted_});
}

void PromiseWindow::accepted_at_once() {
  ++accepted_;
}

std::optional<Clock::time_point> PromiseWindow::next_close() const {
  if (open_.empty()) return std::nullopt;
  return open_.front().closes_at;
}

std::optional<PromiseWindow::Closed> PromiseWindow::take_closed() {
  if (open_.empty() || open_.front().closes_at > clock_.now()) return std::nullopt;
  const Open first = open_.front();
  open_.pop_front();
  return Closed{first.job, first.door_promise, accepted_ > first.accepted_before};
}

Clock::time_point PromiseWindow::promise(const Closed& closed, Clock::time_point now,
                                         std::optional<Clock::duration> eta_now) {
  if (!closed.others_came || !eta_now) return closed.door_promise;
  return std::max(closed.door_promise, now + *eta_now);
}

}  // namespace fairlane
