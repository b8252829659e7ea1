#include "serve_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <string_view>
#include <thread>

namespace fairlane::tools {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Our environment with `added` put in, each replacing a variable of the same name. The
// pointers are into `added` and environ, which outlive the spawn.
std::vector<char*> environment_with(std::vector<std::string>& added) {
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    bool replaced = false;
    for (const std::string& a : added) {
      const std::string_view name = std::string_view(a).substr(0, a.find('=') + 1);
      replaced = replaced || entry.starts_with(name);
    }
    if (!replaced) env.push_back(*e);
  }
  for (std::string& a : added) env.push_back(a.data());
  env.push_back(nullptr);
  return env;
}

}  // namespace

ServeProcess::~ServeProcess() {
  if (pid_ > 0) stop(std::chrono::seconds(5));
}

std::optional<std::string> ServeProcess::start(const ServeProcessOptions& options) {
  std::array<int, 2> out{};
  if (pipe2(out.data(), O_CLOEXEC) != 0) return std::nullopt;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, options.log.c_str(),
                                   O_WRONLY | O_CREAT | (options.append_log ? O_APPEND : O_TRUNC),
                                   0644);
  std::vector<std::string> args = options.args;
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> added = options.environment;
  std::vector<char*> env = environment_with(added);
  const int spawned = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (spawned != 0) {
    close(out[0]);
    pid_ = -1;
    return std::nullopt;
  }
  std::string text;
  const auto deadline = SteadyClock::now() + options.start_timeout;
  std::array<char, 256> buffer{};
  while (SteadyClock::now() < deadline && text.find('\n') == std::string::npos) {
    pollfd fd{out[0], POLLIN, 0};
    if (::poll(&fd, 1, 100) <= 0) continue;
    const ssize_t n = ::read(out[0], buffer.data(), buffer.size());
    if (n <= 0) break;
    text.append(buffer.data(), static_cast<std::size_t>(n));
  }
  close(out[0]);
  const auto at = text.find("http://");
  if (at == std::string::npos) {
    kill_now();
    reap();
    return std::nullopt;
  }
  return text.substr(at, text.find('\n', at) - at);
}

void ServeProcess::kill_now() const {
  if (pid_ > 0) ::kill(pid_, SIGKILL);
}

void ServeProcess::reap() {
  if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

int ServeProcess::stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  const auto deadline = SteadyClock::now() + grace;
  int status = 0;
  while (true) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    if (SteadyClock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill_now();
  reap();
  return -1;
}

}  // namespace fairlane::tools
