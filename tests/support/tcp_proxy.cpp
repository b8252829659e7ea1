#include "support/tcp_proxy.hpp"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <span>
#include <utility>
#include <vector>

namespace fairlane::testing {
namespace {

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

// Writes all of `size` bytes (small: a test's PostgreSQL traffic); false if the peer is gone.
bool write_all(int fd, const char* data, ssize_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, static_cast<std::size_t>(size), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data += n;
    size -= n;
  }
  return true;
}

}  // namespace

TcpProxy::TcpProxy(std::uint16_t upstream_port) : upstream_port_(upstream_port) {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listener_ >= 0);
  sockaddr_in address = loopback(0);
  REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::listen(listener_, 16) == 0);
  socklen_t length = sizeof address;
  REQUIRE(::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  port_ = ntohs(address.sin_port);
  REQUIRE(::pipe2(wake_, O_CLOEXEC) == 0);
  thread_ = std::thread([this] { run(); });
}

TcpProxy::~TcpProxy() {
  set_mode(Mode::stopping);
  thread_.join();
  ::close(listener_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void TcpProxy::go_silent() {
  set_mode(Mode::silent);
}

void TcpProxy::release() {
  set_mode(Mode::forwarding);
}

void TcpProxy::set_mode(Mode mode) {
  std::unique_lock lock(mutex_);
  wanted_ = mode;
  const long ticket = ++asked_;
  const char byte = 1;
  REQUIRE(::write(wake_[1], &byte, 1) == 1);
  taken_.wait(lock, [&] { return done_ >= ticket; });
}

void TcpProxy::run() {
  while (true) {
    held_ = static_cast<int>(silent_.size());
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listener_, POLLIN, 0}};
    for (const auto& [client, upstream] : pairs_) {
      fds.push_back({client, POLLIN, 0});
      fds.push_back({upstream, POLLIN, 0});
    }
    for (const int client : silent_) fds.push_back({client, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) continue;
    if (fds[0].revents != 0) {
      if (!take_mode()) return;
      continue;  // the descriptors polled may be closed
    }
    const std::span<const pollfd> polled(fds);
    forward(polled.subspan(2, 2 * pairs_.size()));
    drop_from_held(polled.subspan(2 + 2 * pairs_.size()));
    // Last, once the descriptors polled are all seen to: a new connection.
    if (fds[1].revents != 0) accept_one();
  }
}

bool TcpProxy::take_mode() {
  (void)::read(wake_[0], buffer_.data(), buffer_.size());
  std::lock_guard lock(mutex_);
  if (wanted_ != mode_) {
    if (wanted_ != Mode::forwarding) {  // forwarded connections end
      for (const auto& [client, upstream] : pairs_) {
        ::close(client);
        ::close(upstream);
      }
      pairs_.clear();
    }
    if (wanted_ != Mode::silent) {  // held ones are let go
      for (const int client : silent_) ::close(client);
      silent_.clear();
    }
    mode_ = wanted_;
  }
  held_ = static_cast<int>(silent_.size());
  done_ = asked_;
  taken_.notify_all();
  return mode_ != Mode::stopping;
}

void TcpProxy::forward(std::span<const pollfd> polled) {
  // A side that ends or fails ends both.
  std::vector<std::pair<int, int>> open;
  for (std::size_t i = 0; i < pairs_.size(); ++i) {
    const auto [client, upstream] = pairs_[i];
    bool alive = true;
    for (const auto& [from, to] : {std::pair{client, upstream}, std::pair{upstream, client}}) {
      const pollfd& side = polled[2 * i + (from == client ? 0 : 1)];
      if (!alive || side.revents == 0) continue;
      const ssize_t n = ::recv(from, buffer_.data(), buffer_.size(), 0);
      alive = n > 0 && write_all(to, buffer_.data(), n);
    }
    if (alive) {
      open.emplace_back(client, upstream);
    } else {
      ::close(client);
      ::close(upstream);
    }
  }
  pairs_ = std::move(open);
}

void TcpProxy::drop_from_held(std::span<const pollfd> polled) {
  // What they send is dropped; one whose client closed is let go.
  std::vector<int> still;
  for (std::size_t i = 0; i < silent_.size(); ++i) {
    if (polled[i].revents != 0 && ::recv(silent_[i], buffer_.data(), buffer_.size(), 0) <= 0) {
      ::close(silent_[i]);
    } else {
      still.push_back(silent_[i]);
    }
  }
  silent_ = std::move(still);
}

void TcpProxy::accept_one() {
  const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
  if (client < 0) return;
  ++accepted_;
  if (mode_ == Mode::silent) {
    silent_.push_back(client);
    return;
  }
  const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in address = loopback(upstream_port_);
  if (upstream >= 0 &&
      ::connect(upstream, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) {
    pairs_.emplace_back(client, upstream);
    return;
  }
  if (upstream >= 0) ::close(upstream);
  ::close(client);
}

}  // namespace fairlane::testing
