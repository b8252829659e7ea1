// A TCP proxy on 127.0.0.1 for tests of a server that goes silent (a partition, a host that
// lost power): it forwards every connection to an upstream port on 127.0.0.1 until
// go_silent(). That ends the connections forwarded so far, for the client to find broken,
// and from then on a new connection is accepted and never answered: what it sends is read
// and dropped, and it stays open until the client gives up and closes it, or release()
// closes it and goes back to forwarding. One thread of its own runs the proxy; the methods
// may be called from any thread.
#pragma once

#include <poll.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

namespace fairlane::testing {

class TcpProxy {
 public:
  // Fails the test if it cannot listen.
  explicit TcpProxy(std::uint16_t upstream_port);
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;
  ~TcpProxy();

  [[nodiscard]] std::uint16_t port() const { return port_; }
  // Ends every forwarded connection and holds new ones without a word; returns once done.
  void go_silent();
  // Closes the connections held and forwards new ones again; returns once done.
  void release();
  // Connections held in silence that their clients have not closed.
  [[nodiscard]] int held() const { return held_.load(); }
  // Connections accepted since the proxy started.
  [[nodiscard]] int accepted() const { return accepted_.load(); }

 private:
  enum class Mode { forwarding, silent, stopping };
  // Asks the proxy's thread for `mode` and waits until it has taken it.
  void set_mode(Mode mode);
  // The proxy's thread: polls its descriptors and sees to each ready one.
  void run();
  // Takes the mode set_mode asked for, closing what the new one does not keep; false when
  // it is to stop.
  bool take_mode();
  // Moves what came on each forwarded connection to its other side (`polled`: theirs, client
  // then upstream, in pairs_' order).
  void forward(std::span<const pollfd> polled);
  // Reads and drops what the held connections sent (`polled`: theirs, in silent_'s order).
  void drop_from_held(std::span<const pollfd> polled);
  // A new connection: forwarded, or held in silence.
  void accept_one();

  std::uint16_t upstream_port_;
  int listener_ = -1;
  int wake_[2] = {-1, -1};  // a pipe: written to make the thread look at the mode
  std::uint16_t port_ = 0;
  std::atomic<int> held_{0};
  std::atomic<int> accepted_{0};

  std::mutex mutex_;
  std::condition_variable taken_;
  Mode wanted_ = Mode::forwarding;  // guarded by mutex_
  long asked_ = 0;                  // guarded by mutex_: set_mode calls
  long done_ = 0;                   // guarded by mutex_: of those, taken by the thread
  // Only the proxy's thread touches these.
  Mode mode_ = Mode::forwarding;
  std::vector<std::pair<int, int>> pairs_;  // forwarded: client, upstream
  std::vector<int> silent_;                 // clients held without a word
  std::array<char, 16384> buffer_{};
  std::thread thread_;
};

}  // namespace fairlane::testing
