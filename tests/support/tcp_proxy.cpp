#include "support/tcp_proxy.hpp"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
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
  std::vector<std::pair<int, int>> pairs;  // client, upstream
  std::vector<int> silent;                 // clients held without a word
  Mode mode = Mode::forwarding;
  const auto close_pairs = [&] {
    for (const auto& [client, upstream] : pairs) {
      ::close(client);
      ::close(upstream);
    }
    pairs.clear();
  };
  const auto close_silent = [&] {
    for (const int client : silent) ::close(client);
    silent.clear();
  };
  std::array<char, 16384> buffer{};
  while (true) {
    held_ = static_cast<int>(silent.size());
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listener_, POLLIN, 0}};
    for (const auto& [client, upstream] : pairs) {
      fds.push_back({client, POLLIN, 0});
      fds.push_back({upstream, POLLIN, 0});
    }
    for (const int client : silent) fds.push_back({client, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) continue;

    if (fds[0].revents != 0) {
      (void)::read(wake_[0], buffer.data(), buffer.size());
      std::lock_guard lock(mutex_);
      if (wanted_ != mode) {
        if (wanted_ != Mode::forwarding) close_pairs();
        if (wanted_ != Mode::silent) close_silent();
        mode = wanted_;
      }
      held_ = static_cast<int>(silent.size());
      done_ = asked_;
      taken_.notify_all();
      if (mode == Mode::stopping) return;
      continue;  // the descriptors polled may be closed
    }
    // Forwarded connections: a side that ends or fails ends both.
    std::vector<std::pair<int, int>> open;
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      const auto [client, upstream] = pairs[i];
      bool alive = true;
      for (const auto& [from, to] : {std::pair{client, upstream}, std::pair{upstream, client}}) {
        const pollfd& polled = fds[2 + 2 * i + (from == client ? 0 : 1)];
        if (!alive || polled.revents == 0) continue;
        const ssize_t n = ::recv(from, buffer.data(), buffer.size(), 0);
        alive = n > 0 && write_all(to, buffer.data(), n);
      }
      if (alive) {
        open.emplace_back(client, upstream);
      } else {
        ::close(client);
        ::close(upstream);
      }
    }
    // Held connections: what they send is dropped; one whose client closed is let go.
    std::vector<int> still;
    for (std::size_t i = 0; i < silent.size(); ++i) {
      const pollfd& polled = fds[2 + 2 * pairs.size() + i];
      if (polled.revents != 0 && ::recv(silent[i], buffer.data(), buffer.size(), 0) <= 0) {
        ::close(silent[i]);
      } else {
        still.push_back(silent[i]);
      }
    }
    pairs = std::move(open);
    silent = std::move(still);
    // Last, once the descriptors polled are all seen to: a new connection.
    if (fds[1].revents != 0) {
      const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        ++accepted_;
        if (mode == Mode::silent) {
          silent.push_back(client);
        } else {
          const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
          const sockaddr_in address = loopback(upstream_port_);
          if (upstream >= 0 && ::connect(upstream, reinterpret_cast<const sockaddr*>(&address),
                                         sizeof address) == 0) {
            pairs.emplace_back(client, upstream);
          } else {
            if (upstream >= 0) ::close(upstream);
            ::close(client);
          }
        }
      }
    }
  }
}

}  // namespace fairlane::testing
