#include "service/retention.hpp"

#include <fmt/format.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <iostream>

#include "service/store_readers.hpp"

namespace fairlane::service {

Retention::Retention(boost::asio::io_context& io, Store& store, const Membership& membership,
                     RetentionConfig config, StoreReaders* readers, const WallClock* wall_clock)
    : io_(io),
      store_(store),
      membership_(membership),
      config_(config),
      readers_(readers),
      wall_clock_(wall_clock != nullptr ? *wall_clock : system_clock_),
      timer_(io) {}

void Retention::start() {
  if (config_.retain.count() <= 0 || started_) return;
  started_ = true;
  arm(std::chrono::milliseconds(0));
}

void Retention::stop() {
  stopped_ = true;
  timer_.cancel();
}

void Retention::arm(std::chrono::milliseconds after) {
  if (stopped_) return;
  timer_.expires_after(after);
  timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error) look();
  });
}

void Retention::look() {
  if (stopped_ || in_batch_) return;
  if (!membership_.leading) {  // the leader prunes; this one may lead soon
    arm(config_.not_leading);
    return;
  }
  const WallTime cutoff = wall_clock_.now() - config_.retain;
  const std::int64_t budget = config_.batch_pages;
  in_batch_ = true;
  if (readers_ == nullptr) {
    batch_done(store_.prune(cutoff, budget));
    return;
  }
  // On a reader's thread, then back here; the loop has work until the answer is back. The
  // reader touches nothing of `this`: a Retention gone before the reader ran (the process
  // stopping) is not touched there.
  boost::asio::post(readers_->executor(), [this, work = boost::asio::make_work_guard(io_),
                                           readers = readers_, cutoff, budget] {
    Result<Pruned> pruned = Status{StatusCode::internal, "the prune did not run"};
    readers->read([&](Store& store) { pruned = store.prune(cutoff, budget); });
    boost::asio::post(work.get_executor(),
                      [this, pruned = std::move(pruned)] { batch_done(pruned); });
  });
}

void Retention::batch_done(const Result<Pruned>& pruned) {
  in_batch_ = false;
  if (!pruned.ok()) {
    std::cerr << fmt::format(
        "fairlane: retention: finished jobs could not be pruned (tried again in {} s): {}\n",
        std::chrono::duration_cast<std::chrono::seconds>(config_.every).count(),
        pruned.status().message());
    arm(config_.every);
    return;
  }
  jobs_ += pruned->jobs;
  pages_ += pruned->pages;
  round_jobs_ += pruned->jobs;
  round_pages_ += pruned->pages;
  if (pruned->more) {
    arm(config_.pause);
    return;
  }
  if (round_jobs_ > 0) {
    const double hours = std::chrono::duration<double>(config_.retain).count() / 3600.0;
    std::cerr << fmt::format(
        "fairlane: retention: jobs pruned: {}, pages: {} (finished more than {:g} h ago)\n",
        round_jobs_, round_pages_, hours);
  }
  round_jobs_ = 0;
  round_pages_ = 0;
  arm(config_.every);
}

}  // namespace fairlane::service
