#include "service/leadership.hpp"

#include <fmt/format.h>

#include <boost/asio.hpp>
#include <charconv>
#include <iostream>
#include <optional>
#include <unordered_set>

namespace fairlane::service {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;

// How long a claim holds the lease, how often its holder renews it, how often a follower
// tries: the header's table.
milliseconds held_for(milliseconds lease) {
  return lease * 3 / 4;
}
milliseconds renew_every(milliseconds lease) {
  return lease / 4;
}
milliseconds try_every(milliseconds lease) {
  return lease / 10;
}

std::optional<JobId> job_id_of(std::string_view payload) {
  JobId id = 0;
  const auto [end, error] = std::from_chars(payload.data(), payload.data() + payload.size(), id);
  if (error != std::errc{} || end != payload.data() + payload.size() || id <= 0)
    return std::nullopt;
  return id;
}

}  // namespace

Leadership::Leadership(asio::io_context& io, Store& store, Dispatcher& dispatcher, Router& router,
                       Membership& membership, LeadershipConfig config)
    : store_(store),
      cluster_(*store.cluster()),
      dispatcher_(dispatcher),
      router_(router),
      membership_(membership),
      config_(std::move(config)),
      timer_(io),
      view_timer_(io) {
  membership_.instance = config_.instance;
  dispatcher_.on_deposed([this](const Status& why) {
    if (!membership_.leading) return;
    become_follower(why.message());
    // A batch whose outcome is unknown: the lease is still this instance's, and is given up
    // so that the next leader, whichever it is, starts from what the store holds (the pages
    // in flight requeued, the calls out held under the cap). If it cannot be given up it
    // runs out.
    if (why.code() == StatusCode::outcome_unknown) {
      if (Status released = cluster_.release_lease(config_.instance); !released.ok()) {
        std::cerr << "fairlane: the lease could not be given up (it runs out): "
                  << released.message() << '\n';
      }
    }
  });
}

Status Leadership::start() {
  auto lease = cluster_.claim_lease(config_.instance, held_for(config_.lease));
  if (!lease.ok()) return lease.status();
  membership_.leader = lease->leader;
  membership_.epoch = lease->epoch;
  Status status;
  if (lease->held) {
    renewed_at_ = std::chrono::steady_clock::now();
    status = become_leader(lease->epoch);
  } else {
    status = dispatcher_.follow();
    if (status.ok()) {
      std::cerr << fmt::format("fairlane: instance {} follows; {} leads (epoch {})\n",
                               config_.instance, lease->leader, lease->epoch);
    }
  }
  if (status.ok()) schedule();
  return status;
}

void Leadership::stop() {
  stopped_ = true;
  timer_.cancel();
  view_timer_.cancel();
  if (!membership_.leading) return;
  if (Status released = cluster_.release_lease(config_.instance); !released.ok()) {
    std::cerr << "fairlane: the lease could not be given up (a follower takes over when it "
                 "runs out): "
              << released.message() << '\n';
  }
}

void Leadership::schedule() {
  if (stopped_) return;
  timer_.expires_after(membership_.leading ? renew_every(config_.lease) : try_every(config_.lease));
  timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error) claim();
  });
}

void Leadership::claim() {
  if (stopped_) return;  // a wait that had ended when stop() cancelled the timer
  const auto asked = std::chrono::steady_clock::now();
  auto lease = cluster_.claim_lease(config_.instance, held_for(config_.lease));
  if (!lease.ok()) {
    // The database cannot be reached: a leader keeps going while its lease may still run,
    // and stops before another instance could have taken it.
    if (membership_.leading && asked - renewed_at_ >= held_for(config_.lease)) {
      become_follower(fmt::format("the lease could not be renewed: {}", lease.status().message()));
    }
    schedule();
    return;
  }
  membership_.leader = lease->leader;
  membership_.epoch = lease->epoch;
  if (lease->held) {
    renewed_at_ = asked;
    // Held again under a newer epoch: another instance led in between, while this one was
    // paused past its lease. Its dispatcher's lanes and fence are of the old epoch, and the
    // store holds what the other did (jobs accepted, calls out): it leads again from there.
    const bool led_between = membership_.leading && lease->epoch != led_epoch_;
    if (led_between) {
      std::cerr << fmt::format(
          "fairlane: instance {} holds the lease again (epoch {}) after another instance led "
          "since its epoch {}: it leads again from the store\n",
          config_.instance, lease->epoch, led_epoch_);
    }
    if (!membership_.leading || led_between) {
      if (Status led = become_leader(lease->epoch); !led.ok()) {
        // Not leading after all: give the lease up so that another instance can.
        std::cerr << "fairlane: could not start leading: " << led.message() << '\n';
        (void)cluster_.release_lease(config_.instance);
        become_follower(led.message());
      }
    }
  } else if (membership_.leading) {
    become_follower(
        fmt::format("instance {} holds the lease now (epoch {})", lease->leader, lease->epoch));
  }
  schedule();
  if (membership_.leading && resync_owed_ && std::chrono::steady_clock::now() >= resync_due_) {
    resync();
  }
}

Status Leadership::become_leader(std::int64_t epoch) {
  const auto began = std::chrono::steady_clock::now();
  if (Status led = dispatcher_.lead(config_.instance, epoch); !led.ok()) return led;
  resync_owed_ = false;  // lead() read the lanes whole
  resync_backoff_ = {};
  led_epoch_ = epoch;
  membership_.leading = true;
  membership_.leader = config_.instance;
  ++takeovers_;
  // The jobs it found promised are its to keep now, as are those of the jobs it adopts.
  for (const JobView& job : dispatcher_.restored_promises()) router_.watch(job);
  const auto took = std::chrono::duration<double>(std::chrono::steady_clock::now() - began);
  std::cerr << fmt::format(
      "fairlane: instance {} leads (epoch {}): {} pages queued, {} calls of the previous "
      "leader held under the cap; started in {:.3f} s\n",
      config_.instance, epoch, dispatcher_.scheduler().size(), dispatcher_.inherited_in_flight(),
      took.count());
  router_.watchers().notify();
  return {};
}

void Leadership::become_follower(std::string_view why) {
  membership_.leading = false;
  std::cerr << fmt::format("fairlane: instance {} stops dispatching: {}\n", config_.instance, why);
  read_view();
  router_.watchers().notify();
}

void Leadership::notified(std::string_view channel, std::string_view payload) {
  router_.watchers().notify();
  if (!membership_.leading) {
    view_stale_ = true;
    refresh_view_soon();
    return;
  }
  const auto job = job_id_of(payload);
  if (!job) return;
  if (channel == kJobEnqueuedChannel) {
    adopt(*job);
  } else if (channel == kJobChangedChannel) {
    follow_change(*job);
  }
}

void Leadership::resync() {
  router_.watchers().notify();
  if (!membership_.leading) {
    view_stale_ = true;
    refresh_view_soon();
    return;
  }
  // Jobs accepted elsewhere while nobody listened: the lanes as the store has them. A page
  // the dispatcher knows is not added twice.
  resync_owed_ = false;
  auto lanes = cluster_.lanes_view();
  if (!lanes.ok()) {
    std::cerr << "fairlane: the lanes could not be read again (they are, at a renewal of the "
                 "lease, later each time): "
              << lanes.status().message() << '\n';
    owe_resync();
    return;
  }
  std::unordered_set<JobId> queued;  // jobs with a page queued in the store
  std::unordered_set<JobId> adopted;
  for (const Lane& lane : lanes.value()) {
    for (const LanePage& page : lane.pages) {
      queued.insert(page.job_id);
      if (!dispatcher_.policy().knows(page.page_id) && adopted.insert(page.job_id).second) {
        adopt(page.job_id);
      }
    }
  }
  // Cancels made elsewhere while nobody listened: a job this one holds pages of, with none
  // queued in the store any more, is read once (a job whose pages are all out is too, and
  // left as it is).
  for (const JobId job : dispatcher_.policy().tracked_jobs()) {
    if (!queued.contains(job)) follow_change(job);
  }
  if (!resync_owed_) resync_backoff_ = {};  // every read went through
}

void Leadership::adopt(JobId job) {
  auto queued = cluster_.queued_job(job);
  if (!queued.ok()) {
    if (queued.status().code() != StatusCode::not_found) {
      std::cerr << fmt::format(
          "fairlane: job {} accepted elsewhere could not be read (the lanes are read again at "
          "a renewal of the lease): {}\n",
          job, queued.status().message());
      owe_resync();
    }
    return;
  }
  auto user = store_.find_user_by_name(queued->job.user_name);
  // Unread, the user keeps the weight their lane has (1 for a lane it does not know): a read
  // that failed once must not cut a weight-5 user to a fifth of their share.
  const std::int64_t weight =
      user.ok() ? user->weight : dispatcher_.scheduler().weight(queued->job.user_id);
  if (dispatcher_.add(queued.value(), weight)) router_.watch(queued->job);
}

void Leadership::owe_resync() {
  resync_owed_ = true;
  // The first retry at the next renewal; each one after that failed waits twice as long,
  // up to a minute: a read that keeps failing must not read every lane every L/4.
  resync_due_ = std::chrono::steady_clock::now() + resync_backoff_;
  resync_backoff_ = std::min<std::chrono::steady_clock::duration>(
      std::max<std::chrono::steady_clock::duration>(2 * resync_backoff_,
                                                    renew_every(config_.lease)),
      std::chrono::minutes(1));
}

void Leadership::follow_change(JobId job) {
  // A job it holds no page of has nothing to drop and is not read; one it holds pages of is
  // read at each notification (its own commits notify too, once a job a batch).
  if (!dispatcher_.tracks_job(job)) return;
  auto view = store_.job(job);
  if (!view.ok()) {
    if (view.status().code() != StatusCode::not_found) {
      // A cancel made elsewhere would be missed: the lanes are compared again (resync reads
      // a job it holds pages of with none queued in the store).
      std::cerr << fmt::format(
          "fairlane: job {} changed elsewhere could not be read (the lanes are read again at a "
          "renewal of the lease): {}\n",
          job, view.status().message());
      owe_resync();
    }
    return;
  }
  // Only a cancellation and a promise are another instance's to write; the job's other
  // changes are this one's (a page the leader has requeued may still be in flight in the
  // store until its commit goes through, so "no longer queued" alone would drop it). A
  // cancelled job reads `running` while a page of it is still out: its cancelled pages say
  // it (only a cancel cancels a page).
  if (view->state == JobState::cancelled || view->pages.cancelled > 0) {
    dispatcher_.cancelled_elsewhere(view->user_id, job);
    return;
  }
  router_.promise_moved(view.value());
}

void Leadership::refresh_view_soon() {
  if (view_timer_armed_ || stopped_) return;
  view_timer_armed_ = true;
  view_timer_.expires_after(config_.view_refresh);
  view_timer_.async_wait([this](const boost::system::error_code& error) {
    if (error) return;  // cancelled: by stop(), or with the Leadership itself
    view_timer_armed_ = false;
    if (membership_.leading || !view_stale_) return;
    view_stale_ = false;
    read_view();
  });
}

void Leadership::read_view() {
  const auto now = std::chrono::steady_clock::now();
  const Status read = dispatcher_.follow();
  const auto line =
      read.ok() ? view_reads_.succeeded(now) : view_reads_.failed(read.message(), now);
  if (line) std::cerr << *line << '\n';
  if (read.ok()) return;
  view_stale_ = true;
  refresh_view_soon();
}

}  // namespace fairlane::service
