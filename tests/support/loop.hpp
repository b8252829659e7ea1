// Helpers for tests that run a real io_context: a bounded run, and whether a job has ended.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>

#include "fairlane/store/store.hpp"

namespace fairlane::testing {

// Runs `io` in slices of 10 ms until `done()` or `limit` has passed; returns done().
inline bool run_until(boost::asio::io_context& io, const std::function<bool()>& done,
                      std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.run_for(std::chrono::milliseconds(10));
  }
  return done();
}

// Whether the job has ended: done, failed or cancelled (false when it cannot be read).
inline bool job_ended(Store& store, JobId job) {
  const auto view = store.job(job);
  return view.ok() && view->state != JobState::queued && view->state != JobState::running;
}

}  // namespace fairlane::testing
