// SendOrder: what settled calls teach the estimator, in the order the calls were SENT.
//
// Calls sent together end fastest first. Fed to the estimator's averages as they end, a
// burst's slow calls come last and weigh most in an EWMA, so after every burst the average
// latency leans to its slowest calls (simulator 5b: 2.3 to 2.8 s read where calls take
// 2.2 s on average), and every promise made then is long. Here a call that ends waits until
// every call sent before it has ended (answered, failed, or never made), and then they go on
// in the order they were sent: the averages see each burst whole, in the order it went out.
// What it costs: an answer teaches the estimator no sooner than the slowest call sent before
// it ends (the call timeout bounds the call; the dispatch's commit and the text's read come
// before it). A call whose end never comes (a bug) must not stop the learning for good: once
// kHeldAtMost calls wait behind the oldest, it is taken as ended without an answer.
//
// Cost: sent() and ended() O(1) amortized; memory, the calls from the oldest one still out to
// the newest, at most kHeldAtMost.
//
// Thread safety: none, by design; the dispatch loop's thread owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <stdexcept>

#include "fairlane/core/clock.hpp"

namespace fairlane {

class SendOrder {
 public:
  // Far more than can be out at once (the in-flight cap, 200 by default).
  static constexpr std::size_t kHeldAtMost = 4096;

  // What an answered call used, what it had reserved, and how long it took.
  struct Settled {
    std::int64_t used = 0;
    std::int64_t reserved = 0;
    Clock::duration latency{};
  };

  // A call goes out: its ticket, for ended().
  [[nodiscard]] std::uint64_t sent() {
    calls_.emplace_back();
    return first_ + calls_.size() - 1;
  }

  // The call `ticket` has ended, with what it settled when it was answered (std::nullopt
  // for a call that failed or was never made). `learn(const Settled&)` is called for each
  // answered call that no earlier call holds back any more, oldest first. The end of a call
  // given up on (kHeldAtMost) is ignored. Throws std::invalid_argument for a ticket never
  // given or ended twice (a bug in the caller).
  template <class Learn>
  void ended(std::uint64_t ticket, std::optional<Settled> settled, Learn&& learn) {
    if (ticket < first_) return;  // given up on
    if (ticket - first_ >= calls_.size() || calls_[ticket - first_].ended) {
      throw std::invalid_argument("SendOrder::ended: the call is not out");
    }
    Call& call = calls_[ticket - first_];
    call.ended = true;
    call.settled = settled;
    while (!calls_.empty() && (calls_.front().ended || calls_.size() > kHeldAtMost)) {
      if (calls_.front().settled) learn(*calls_.front().settled);
      calls_.pop_front();
      ++first_;
    }
  }

  // Calls out, or ended and held back by one sent before them.
  [[nodiscard]] std::size_t held() const { return calls_.size(); }

 private:
  struct Call {
    bool ended = false;
    std::optional<Settled> settled;
  };

  // Only touched on the owning thread: calls_[i] is the call with ticket first_ + i.
  std::uint64_t first_ = 0;
  std::deque<Call> calls_;
};

}  // namespace fairlane
