// Leadership: which instance of a cluster dispatches (DESIGN.md section 10), decided through
// the store's lease (ClusterStore) and carried out on the Dispatcher.
//
// Every instance claims the lease on a timer. The one that holds it leads: its Dispatcher
// runs lead() with the lease's epoch, so that every page transition it writes is fenced by
// it. The others follow: their Dispatcher holds a view of the lanes (follow()), read again
// when the store notifies a change (at most once a second), for the door's answers and the
// positions; their uploads and cancellations are written to the store like the leader's.
// The leader adopts the jobs others accepted when it hears of them (and, when that read
// fails for a passing reason, reads the lanes again at each renewal until one goes through),
// and drops the queued pages of a job another instance cancelled when it hears the job
// changed.
//
// The times, for a lease of L = --lease-s (5 s by default):
//   - the lease is claimed for 3/4 L and renewed every L/4 by its holder;
//   - a follower tries to claim it every L/10, so it leads within 3/4 L + L/10 of the
//     leader's last renewal, inside L of the leader's death;
//   - a leader that could not renew for 3/4 L (the database away, a long pause) deposes
//     itself before anyone could have taken over; a commit refused as fenced deposes it at
//     once, and so does one whose outcome is unknown (its connection broke while it was
//     out), which also gives the lease up, so that the next leader, this instance or
//     another, starts from what the store holds. Either way it stops dispatching: calls still
//     out are abandoned, and the next leader holds their places under the cap and requeues
//     their pages;
//   - a leader whose renewal finds the lease its own under a newer epoch (another instance
//     claimed it while this one was paused, and its lease ran out in turn: fenced, whether
//     it is gone or paused itself) leads again from the store, as at a takeover.
//
// Thread safety: the io_context's thread, like the store and the dispatcher.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "fairlane/core/status.hpp"
#include "fairlane/store/cluster.hpp"
#include "fairlane/store/store.hpp"
#include "service/dispatcher.hpp"
#include "service/failure_log.hpp"
#include "service/membership.hpp"
#include "service/router.hpp"

namespace boost::asio {
class io_context;
}

namespace fairlane::service {

struct LeadershipConfig {
  std::string instance;                           // this instance's id, unique in the cluster
  std::chrono::milliseconds lease{5'000};         // --lease-s: the bound on a takeover
  std::chrono::milliseconds view_refresh{1'000};  // a follower's view, at most this often
};

class Leadership {
 public:
  // All must outlive it; `store.cluster()` must not be null. It keeps `membership` (which
  // the Router shows) up to date.
  Leadership(boost::asio::io_context& io, Store& store, Dispatcher& dispatcher, Router& router,
             Membership& membership, LeadershipConfig config);
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  // Claims the lease once, leads or follows accordingly, and starts the timer.
  Status start();
  // Stops the timer and, when leading, gives the lease up so a follower leads at once. The
  // Dispatcher's own stop() finishes what is out.
  void stop();

  // A notification from the store (PgNotifications): a job enqueued or changed elsewhere.
  void notified(std::string_view channel, std::string_view payload);
  // Notifications may have been missed (the listener reconnected): read everything again.
  void resync();

  [[nodiscard]] const Membership& membership() const { return membership_; }
  [[nodiscard]] std::int64_t takeovers() const { return takeovers_; }

 private:
  void claim();
  void schedule();
  Status become_leader(std::int64_t epoch);
  void become_follower(std::string_view why);
  void refresh_view_soon();
  // A follower reads its view of the lanes; when it cannot, it reads again soon.
  void read_view();
  void adopt(JobId job);
  // A job the leader holds pages of changed elsewhere: if it was cancelled, its pages leave
  // the lanes (nothing is written: the store has them cancelled already); if a follower made
  // its promise again (its promise window closed), the leader keeps the new one.
  void follow_change(JobId job);

  Store& store_;
  ClusterStore& cluster_;
  Dispatcher& dispatcher_;
  Router& router_;
  Membership& membership_;
  const LeadershipConfig config_;
  boost::asio::steady_timer timer_;
  boost::asio::steady_timer view_timer_;
  bool view_timer_armed_ = false;
  bool view_stale_ = false;
  bool stopped_ = false;
  // The view's reads that fail while the database is away, logged once a minute.
  FailureLog view_reads_{"the lanes could not be read", "the lanes are read again"};
  // When the last renewal that went through was asked for.
  std::chrono::steady_clock::time_point renewed_at_{};
  std::int64_t takeovers_ = 0;
  // The epoch its dispatcher leads under (lead()), while it leads.
  std::int64_t led_epoch_ = 0;
  // A job accepted elsewhere could not be read (adopt), or a job changed elsewhere (a cancel,
  // follow_change), or the lanes (resync): nothing would bring the job back, as it will not
  // change again, so the lanes are read again (resync) at a renewal, the waits between
  // tries doubling from L/4 to a minute, until a read goes through.
  bool resync_owed_ = false;
  std::chrono::steady_clock::time_point resync_due_{};    // not before then (owe_resync)
  std::chrono::steady_clock::duration resync_backoff_{};  // the wait after the next failure
  // A read for resync failed: owes one, at a renewal of the lease after a wait that doubles.
  void owe_resync();
};

}  // namespace fairlane::service
