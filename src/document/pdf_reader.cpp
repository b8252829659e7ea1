#include "fairlane/document/pdf_reader.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>
#include <exception>
#include <istream>
#include <iterator>
#include <new>
#include <optional>
#include <ostream>
#include <system_error>
#include <thread>

#include "fairlane/document/document.hpp"
#include "fairlane/document/image.hpp"
#include "reader_answer.hpp"
#include "refusals.hpp"

namespace fairlane {
namespace {

using Clock = std::chrono::steady_clock;

// A file descriptor, closed with its owner.
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { close(); }
  void close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// Whether the reader ending by `signal` is the PDF's doing: its CPU limit (SIGXCPU, then
// SIGKILL at the hard limit, as the parent's at the timeout), or a crash the PDF drove poppler
// into (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP and SIGSYS, a hardened build's traps;
// SIGABRT, poppler's answer to a failed allocation under the memory limit). Any other signal
// came from outside: a service being stopped.
bool ended_by_the_pdf(int signal) {
  for (const int limit_or_crash :
       {SIGXCPU, SIGKILL, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS}) {
    if (signal == limit_or_crash) return true;
  }
  return false;
}

}  // namespace

bool ReaderProcesses::add(pid_t pid) {
  const std::lock_guard lock(mutex_);
  if (stopping_) return false;
  pids_.insert(pid);
  return true;
}

void ReaderProcesses::remove(pid_t pid) {
  const std::lock_guard lock(mutex_);
  pids_.erase(pid);
}

void ReaderProcesses::stop() {
  const std::lock_guard lock(mutex_);
  stopping_ = true;
  for (const pid_t pid : pids_) ::kill(pid, SIGKILL);
}

std::size_t ReaderProcesses::reading() const {
  const std::lock_guard lock(mutex_);
  return pids_.size();
}

bool ReaderProcesses::stopping() const {
  const std::lock_guard lock(mutex_);
  return stopping_;
}

Result<std::vector<DocumentPage>> read_pdf_in_child(std::string_view bytes,
                                                    const PdfReaderOptions& options,
                                                    ReaderProcesses* processes) {
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { (void)std::signal(SIGPIPE, SIG_IGN); });
  if (options.command.empty()) return Status(StatusCode::internal, "no PDF reader is set");
  if (processes != nullptr && processes->stopping()) {
    return Status(StatusCode::unavailable, "the service is stopping");
  }

  // From here on, a failure of the service's side (no descriptor, no process left, a reader
  // that cannot start) is `unavailable`: the PDF is not at fault, and the upload is worth
  // sending again.
  int to_child[2];
  int from_child[2];
  if (pipe2(to_child, O_CLOEXEC) != 0) {
    return Status(StatusCode::unavailable,
                  "no pipe for the PDF reader: the service is out of "
                  "descriptors");
  }
  Fd child_in(to_child[0]);
  Fd pdf_out(to_child[1]);
  if (pipe2(from_child, O_CLOEXEC) != 0) {
    return Status(StatusCode::unavailable,
                  "no pipe for the PDF reader: the service is out of "
                  "descriptors");
  }
  Fd answer_in(from_child[0]);
  Fd child_out(from_child[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, child_in.fd, STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, child_out.fd, STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  // The reader is there to contain a hostile PDF: it gets none of the service's descriptors
  // (its listening socket, its clients' connections, the database) and none of its
  // environment (the admin and provider keys).
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  std::vector<char*> argv;
  std::vector<std::string> args = options.command;
  argv.reserve(args.size() + 1);
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  char* no_environment[] = {nullptr};
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), no_environment);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    return Status(StatusCode::unavailable,
                  fmt::format("the PDF reader {} could not start: {}", argv[0],
                              std::system_category().message(spawned)));
  }
  if (processes != nullptr && !processes->add(pid)) ::kill(pid, SIGKILL);
  child_in.close();
  child_out.close();
  fcntl(pdf_out.fd, F_SETFL, O_NONBLOCK);

  // Sends the PDF and reads the answer at once (the reader may answer before it has read
  // everything, when it refuses), until the answer ends or the time is up.
  const Clock::time_point deadline = Clock::now() + options.timeout;
  reader::ReaderAnswer answer(options.reading);
  std::optional<Status> bad_answer;
  std::size_t sent = 0;
  bool timed_out = false;
  char buffer[65536];
  while (answer_in.fd >= 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{answer_in.fd, POLLIN, 0}, {pdf_out.fd, POLLOUT, 0}};
    const nfds_t count = pdf_out.fd >= 0 ? 2 : 1;
    const int ready = ::poll(fds, count, static_cast<int>(std::min<std::int64_t>(left, 1'000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    if (count == 2 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
      const ssize_t n = ::write(pdf_out.fd, bytes.data() + sent, bytes.size() - sent);
      if (n > 0) sent += static_cast<std::size_t>(n);
      if ((n < 0 && errno != EAGAIN && errno != EINTR) || sent == bytes.size()) pdf_out.close();
    }
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t n = ::read(answer_in.fd, buffer, sizeof buffer);
      if (n > 0) {
        bad_answer = answer.add(std::string_view(buffer, static_cast<std::size_t>(n)));
        if (bad_answer) {
          // Killed while its pipe is still open, so that it stops here, writing.
          ::kill(pid, SIGKILL);
          break;
        }
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        answer_in.close();
      }
    }
  }
  // The answer has ended (or the time is up, or poll failed): the child gets what is left
  // of the time to exit, then is killed. It is reaped only after it has left `processes`,
  // so that a stop() meanwhile cannot kill another process that reused its pid.
  siginfo_t info{};
  while (!timed_out) {
    info.si_pid = 0;
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == pid) {
      break;
    }
    if (Clock::now() >= deadline) {
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (timed_out) ::kill(pid, SIGKILL);
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
  if (processes != nullptr) processes->remove(pid);
  int wait_status = 0;
  while (::waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  if (processes != nullptr && processes->stopping()) {
    return Status(StatusCode::unavailable, "the service is stopping");
  }
  if (bad_answer) return std::move(*bad_answer);
  const auto seconds = options.timeout.count() / 1000;
  // Out of time (the parent's clock, or the CPU limit of the same seconds) midway through its
  // pages: a long document, a scanned book most likely, each of whose pages takes its time.
  // Exported again it would be no faster; parts of the size read in the time go through.
  const bool out_of_time =
      timed_out || (WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGXCPU);
  if (out_of_time && answer.received() > 0 && answer.received() < answer.announced()) {
    const std::int64_t part = std::max<std::int64_t>(answer.received() * 4 / 5, 1);
    return refusals::refused(fmt::format(
        "the PDF took longer than {} s to read, more than fairlane allows: {} of its {} pages "
        "were read by then. Split it into parts of at most {} page{} and upload each (the "
        "service's --pdf-timeout sets the time)",
        seconds, answer.received(), answer.announced(), part, part == 1 ? "" : "s"));
  }
  if (timed_out) {
    return refusals::refused(fmt::format(
        "the PDF took longer than {} s to read, more than fairlane allows: it may be damaged or "
        "far too complex; export it again (print to PDF) or split it",
        seconds));
  }
  auto pages = answer.finish();
  // A refusal the reader answered stands, however it ended after it.
  if (!pages.ok() && pages.status().code() != StatusCode::internal) return pages;
  if (WIFSIGNALED(wait_status) && ended_by_the_pdf(WTERMSIG(wait_status))) {
    return refusals::refused(fmt::format(
        "the PDF could not be read within fairlane's limits on time and memory (the reader "
        "ended with signal {}): it may be damaged or far too complex; export it again or "
        "split it",
        WTERMSIG(wait_status)));
  }
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    // Nothing the PDF can do ends the reader so: the service's side failed, and the upload
    // is worth sending again. What happened goes to the operator.
    return Status(
        StatusCode::unavailable,
        fmt::format("the PDF reader {} {} before it answered in full, for no fault of the PDF: "
                    "check that it runs on this host (status 127: a library it needs is "
                    "missing, or was replaced under the running service, which a restart "
                    "mends; a signal: something outside the service stopped it)",
                    options.command.front(),
                    WIFSIGNALED(wait_status)
                        ? fmt::format("was ended by signal {}", WTERMSIG(wait_status))
                        : fmt::format("exited with status {}", WEXITSTATUS(wait_status))));
  }
  if (!pages.ok()) return pages;
  if (Status checked = check_pages(pages.value(), options.reading.input); !checked.ok()) {
    return checked;
  }
  return pages;
}

// ASan and TSan reserve terabytes of address space for their shadow memory, so a limit on
// the address space ends the reader at its first allocation: their builds go without it.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FAIRLANE_SANITIZER_SHADOW_MEMORY 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FAIRLANE_SANITIZER_SHADOW_MEMORY 1
#endif
#endif

namespace {

// A refusal as one line: "too_large MESSAGE" for a limit, "refused MESSAGE" otherwise.
void write_refusal(std::ostream& out, const Status& status) {
  std::string message = status.message();
  for (char& c : message) {
    if (c == '\n') c = ' ';
  }
  const bool limit = status.code() == StatusCode::payload_too_large;
  out << (limit ? "too_large " : "refused ") << message << '\n';
}

void write_page(std::ostream& out, const DocumentPage& page) {
  switch (page.kind) {
    case PageKind::text:
      out << "text " << page.text.size() << '\n' << page.text;
      break;
    case PageKind::image:
      out << "image " << page.image->media_type << ' ' << page.image->width << ' '
          << page.image->height << ' ' << page.image->bytes.size() << '\n'
          << page.image->bytes;
      break;
    case PageKind::blank:
      out << "blank\n";
      break;
  }
}

}  // namespace

int read_pdf_child(std::istream& in, std::ostream& out, std::int64_t cpu_seconds,
                   std::int64_t memory_mb, const PdfReading& reading) {
  // No core dump, whatever ends the reader: a PDF that drives it to its CPU limit (SIGXCPU)
  // or into an abort under its memory limit would otherwise leave a core of up to that
  // limit in the service's directory each time it is sent, on a host that keeps cores.
  // Not dumpable either, so that no core pattern piping to a handler gets it. Set with the
  // other limits, when they are asked for (the reader process always is; a test reading in
  // its own process is left as it is).
  if (cpu_seconds > 0 || memory_mb > 0) {
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): prctl is the only way to ask
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  }
  if (cpu_seconds > 0) {
    // The soft limit sends SIGXCPU (the process ends); the hard one a second later, SIGKILL.
    const rlimit cpu{static_cast<rlim_t>(cpu_seconds), static_cast<rlim_t>(cpu_seconds + 1)};
    setrlimit(RLIMIT_CPU, &cpu);
  }
#if !defined(FAIRLANE_SANITIZER_SHADOW_MEMORY)
  if (memory_mb > 0) {
    const auto bytes = static_cast<rlim_t>(memory_mb) * 1024 * 1024;
    const rlimit memory{bytes, bytes};
    setrlimit(RLIMIT_AS, &memory);
  }
#else
  (void)memory_mb;
#endif
  // Each page is written as soon as it is read, so that the reader holds one page's image at
  // a time and the parent can stop it at the first page past a limit.
  Status read;
  try {
    const std::string pdf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    read = read_pdf(
        pdf, reading,
        [&](std::int64_t count) {
          out << "ok " << count << '\n';
          return Status();
        },
        [&](const DocumentPage& page) {
          write_page(out, page);
          return out ? Status() : Status(StatusCode::internal, "the answer could not be written");
        });
  } catch (const std::bad_alloc&) {
    // Past the memory limit: the PDF's doing, said as such (an exit without an answer would
    // read as the reader failing to run).
    read = refusals::refused(
        "the PDF could not be read within fairlane's limits on time and memory (the reader ran "
        "out of memory): it may be damaged or far too complex; export it again or split it");
  } catch (const std::exception& e) {
    // poppler, or the reading, threw on what the PDF holds (a length from the file that no
    // container takes, say): the PDF's doing too, refused naming it.
    read = refusals::refused(fmt::format(
        "the PDF could not be read ({}): it may be damaged; export it again (print to PDF)",
        e.what()));
  }
  if (!read.ok() && out) write_refusal(out, read);
  out.flush();
  return out ? 0 : 1;
}

}  // namespace fairlane
