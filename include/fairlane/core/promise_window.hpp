// PromiseWindow: the door's promise, made once the uploads that came with a job are known.
//
// The door answers uploads one at a time. When several come together (a step of the lab's
// ramp, fifty users at once), the first is quoted the provider as it stands and then shares
// it with the rest: its promise is broken the moment the second one is accepted. So when
// others are on their way (the service: other uploads still being read; the simulator:
// other books arriving in the same instant) the promise waits out a short window after the
// door accepted the job. At its end, if nothing
// else was accepted meanwhile, the promise is the door's estimate, unchanged; if something
// was, it is made again from the lanes as they are then (Estimator::job, which counts the
// others that came), never earlier than the door's estimate. Refusals are not held: only
// an accepted job waits for its window.
//
// Windows all have the same length, so they close in the order they opened: a queue.
//
// Thread safety: none, by design; it lives on the io_context thread with the door.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

#include "fairlane/core/clock.hpp"
#include "fairlane/core/ids.hpp"

namespace fairlane {

class PromiseWindow {
 public:
  // A job's window that has closed: what to promise it.
  struct Closed {
    JobId job = 0;
    Clock::time_point door_promise;  // now + the door's ETA, when it accepted the job
    bool others_came = false;        // other jobs were accepted within its window
  };

  // `clock` must outlive it. A window of zero closes at once and nothing comes in it.
  PromiseWindow(const Clock& clock, Clock::duration window);

  // The door accepted `job` now, with an ETA `door_eta` from now: its window opens, and it
  // comes within the window of every job whose window is open.
  void accepted(JobId job, Clock::duration door_eta);
  // The door accepted a job promised at once (nothing came with it): it comes within the
  // window of every job whose window is open, and has none of its own.
  void accepted_at_once();
  // When the next window closes; nullopt when none is open.
  [[nodiscard]] std::optional<Clock::time_point> next_close() const;
  // The next window that has closed by now, oldest first; nullopt when none has.
  [[nodiscard]] std::optional<Closed> take_closed();
  // The promise for a closed window: the door's, or, when others came, the later of the
  // door's and now + the ETA now (nullopt: the job has no page left to queue, so the
  // door's stands).
  [[nodiscard]] static Clock::time_point promise(const Closed& closed, Clock::time_point now,
                                                 std::optional<Clock::duration> eta_now);
  [[nodiscard]] Clock::duration window() const { return window_; }
  [[nodiscard]] const Clock& clock() const { return clock_; }
  [[nodiscard]] std::size_t open() const { return open_.size(); }

 private:
  struct Open {
    JobId job;
    Clock::time_point closes_at;
    Clock::time_point door_promise;
    std::int64_t accepted_before;  // accepted_ when it opened, itself included
  };

  // Constant after construction.
  const Clock& clock_;
  const Clock::duration window_;
  // Only touched on the owning thread.
  std::deque<Open> open_;      // by closes_at
  std::int64_t accepted_ = 0;  // jobs accepted so far
};

}  // namespace fairlane
