// Retention: `serve --retain`'s pruning (docs/operations.md, "Retention"). Jobs that finished
// longer ago than the retention are deleted from the store (Store::prune) with their pages,
// texts, images and spend, by the instance that leads (one is enough), a batch of pages at a
// time, so that whatever else the store does waits for one short transaction at most: a full
// batch is followed by the next a moment later, and once none is due the next look is a
// minute away. An instance that does not lead looks every second whether it leads now.
//
// On a server's database (PostgreSQL, with StoreReaders) the batches run on a reader's
// connection and thread, off the io thread; on SQLite in place, as the group commits do.
//
// Thread safety: everything on the io_context's thread (a batch on a reader hands its answer
// back there).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>

#include "fairlane/core/result.hpp"
#include "fairlane/core/wall_clock.hpp"
#include "fairlane/store/store.hpp"
#include "service/membership.hpp"

namespace fairlane::service {

class StoreReaders;

struct RetentionConfig {
  // Jobs that finished longer ago than this are pruned; 0: none ever is.
  std::chrono::seconds retain{0};
  // Pages in one batch (an image page counts kPruneImageWeight): some milliseconds of work.
  std::int64_t batch_pages = 256;
  // Between one full batch and the next, while more are due.
  std::chrono::milliseconds pause{50};
  // Between looks once none is due.
  std::chrono::milliseconds every{std::chrono::minutes(1)};
  // Between looks while this instance does not lead (no store is read): one that takes over
  // prunes within this.
  std::chrono::milliseconds not_leading{1000};
};

class Retention {
 public:
  // `store`, `membership`, `readers` (may be null) and `wall_clock` (null: the system's) must
  // outlive the Retention.
  Retention(boost::asio::io_context& io, Store& store, const Membership& membership,
            RetentionConfig config, StoreReaders* readers = nullptr,
            const WallClock* wall_clock = nullptr);
  Retention(const Retention&) = delete;
  Retention& operator=(const Retention&) = delete;

  // The first look at once, then on the timer; nothing when config.retain is 0.
  void start();
  // No batch starts after this; one under way on a reader ends unheeded.
  void stop();

  // One batch now, if this instance leads and none is under way; the timer's look. On SQLite
  // it has run when this returns.
  void look();

  [[nodiscard]] std::int64_t pruned_jobs() const { return jobs_; }
  [[nodiscard]] std::int64_t pruned_pages() const { return pages_; }

 private:
  void arm(std::chrono::milliseconds after);
  // A batch's answer: counted, logged at the end of a round, and the next look armed.
  void batch_done(const Result<Pruned>& pruned);

  boost::asio::io_context& io_;
  Store& store_;
  const Membership& membership_;
  const RetentionConfig config_;
  StoreReaders* const readers_;
  const SystemWallClock system_clock_;
  const WallClock& wall_clock_;
  boost::asio::steady_timer timer_;
  bool started_ = false;
  bool stopped_ = false;
  bool in_batch_ = false;
  std::int64_t jobs_ = 0;  // in all, since start
  std::int64_t pages_ = 0;
  std::int64_t round_jobs_ = 0;  // in the batches since the last look that found none due
  std::int64_t round_pages_ = 0;
};

}  // namespace fairlane::service
