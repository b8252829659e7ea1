#include "fairlane/document/pdf_reader.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>
#include <istream>
#include <iterator>
#include <optional>
#include <ostream>
#include <system_error>
#include <thread>

#include "fairlane/document/document.hpp"
#include "fairlane/document/image.hpp"
#include "refusals.hpp"

namespace fairlane {
namespace {

using Clock = std::chrono::steady_clock;

Status refused(std::string message) {
  return Status(StatusCode::invalid_argument, std::move(message));
}

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

Status unreadable_answer() {
  return Status(StatusCode::internal, "the PDF reader's answer could not be read");
}

// A refusal line ("refused MESSAGE" or "too_large MESSAGE", the latter for a limit on pages
// or bytes) as the Status it stands for; nullopt for any other line.
std::optional<Status> refusal_of(std::string_view line) {
  if (line.rfind("refused ", 0) == 0) return refused(std::string(line.substr(8)));
  if (line.rfind("too_large ", 0) == 0) {
    return Status(StatusCode::payload_too_large, std::string(line.substr(10)));
  }
  return std::nullopt;
}

// The number `text` is, if it is one (digits only).
std::optional<std::int64_t> number(std::string_view text) {
  std::int64_t value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  const auto [end, error] = std::from_chars(first, last, value);
  if (first == last || error != std::errc() || end != last || value < 0) return std::nullopt;
  return value;
}

// `line` cut at its spaces.
std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  while (!line.empty()) {
    const std::size_t space = line.find(' ');
    out.push_back(line.substr(0, space));
    if (space == std::string_view::npos) break;
    line.remove_prefix(space + 1);
  }
  return out;
}

// One page's header line: "text LENGTH", "image MEDIA_TYPE WIDTH HEIGHT LENGTH" or "blank".
struct PageHeader {
  PageKind kind = PageKind::blank;
  std::string_view media_type;
  std::int64_t width = 0;
  std::int64_t height = 0;
  std::int64_t length = 0;  // the bytes that follow the line
};

std::optional<PageHeader> page_header(std::string_view line) {
  const std::vector<std::string_view> w = words(line);
  if (w.size() == 1 && w[0] == "blank") return PageHeader{};
  if (w.size() == 2 && w[0] == "text") {
    const auto length = number(w[1]);
    if (!length) return std::nullopt;
    return PageHeader{PageKind::text, {}, 0, 0, *length};
  }
  if (w.size() == 5 && w[0] == "image" && (w[1] == "image/png" || w[1] == "image/jpeg")) {
    const auto width = number(w[2]);
    const auto height = number(w[3]);
    const auto length = number(w[4]);
    if (!width || !height || !length || *width == 0 || *height == 0) return std::nullopt;
    return PageHeader{PageKind::image, w[1], *width, *height, *length};
  }
  return std::nullopt;
}

// The child's answer as it arrives, checked against the limits as it grows, so that no more
// of it is held than the limits allow: the first line ("ok N" with N within max_pages, or a
// refusal of at most kMaxLine bytes), then each page's header line (a text within
// max_page_bytes, an image within max_image_bytes and all images within
// max_total_image_bytes) before the page's bytes, or a refusal in a page's place (the child
// found a limit or a damage only at that page), and nothing after the last page.
class Answer {
 public:
  explicit Answer(const PdfReading& limits) : limits_(limits) {}

  // Appends bytes from the child; a Status once the answer breaks a limit or cannot be an
  // answer (read no more of it then).
  std::optional<Status> add(std::string_view data) {
    bytes_.append(data);
    return check();
  }

  [[nodiscard]] const std::string& bytes() const { return bytes_; }

 private:
  static constexpr std::size_t kMaxLine = 4096;

  // The line that starts at next_, once it is whole.
  [[nodiscard]] std::optional<std::string_view> line_at_next() const {
    const std::size_t end = bytes_.find('\n', next_);
    if (end == std::string::npos) return std::nullopt;
    return std::string_view(bytes_).substr(next_, end - next_);
  }

  std::optional<Status> check() {
    if (!head_read_) {
      const auto head = line_at_next();
      if (!head) {
        if (bytes_.size() > kMaxLine) return unreadable_answer();
        return std::nullopt;
      }
      head_read_ = true;
      if (head->size() > kMaxLine) return unreadable_answer();
      if (refusal_of(*head)) {
        ended_ = true;
      } else if (head->rfind("ok ", 0) == 0) {
        const auto count = number(head->substr(3));
        if (!count) return unreadable_answer();
        if (limits_.max_pages > 0 && *count > limits_.max_pages) {
          return refusals::too_many_pages(*count, limits_.max_pages);
        }
        pages_ = *count;
      } else {
        return unreadable_answer();
      }
      next_ += head->size() + 1;
    }
    while (!ended_ && pages_read_ < pages_ && next_ < bytes_.size()) {
      const auto line = line_at_next();
      if (!line) {
        if (bytes_.size() - next_ > kMaxLine) return unreadable_answer();
        return std::nullopt;
      }
      if (line->size() > kMaxLine) return unreadable_answer();
      if (refusal_of(*line)) {
        ended_ = true;
        next_ += line->size() + 1;
        break;
      }
      const auto header = page_header(*line);
      if (!header) return unreadable_answer();
      ++pages_read_;
      if (auto over = over_limit(*header)) return over;
      next_ += line->size() + 1 + static_cast<std::size_t>(header->length);
    }
    // Bytes past the end of the last page (or of the refusal) belong to no answer.
    if ((ended_ || pages_read_ == pages_) && bytes_.size() > next_) return unreadable_answer();
    return std::nullopt;
  }

  std::optional<Status> over_limit(const PageHeader& header) {
    if (header.kind == PageKind::text && limits_.max_page_bytes > 0 &&
        header.length > limits_.max_page_bytes) {
      return refusals::page_too_long(pages_read_, header.length, limits_.max_page_bytes);
    }
    if (header.kind == PageKind::blank && header.length != 0) return unreadable_answer();
    if (header.kind == PageKind::image) {
      if (limits_.max_image_bytes > 0 && header.length > limits_.max_image_bytes) {
        return refusals::image_too_large(pages_read_, header.length, limits_.max_image_bytes);
      }
      image_bytes_ += header.length;
      if (limits_.max_total_image_bytes > 0 && image_bytes_ > limits_.max_total_image_bytes) {
        return refusals::images_too_large(pages_read_, limits_.max_total_image_bytes);
      }
    }
    return std::nullopt;
  }

  PdfReading limits_;
  std::string bytes_;
  bool head_read_ = false;
  bool ended_ = false;            // a refusal ended the answer
  std::int64_t pages_ = 0;        // announced by "ok N"
  std::int64_t pages_read_ = 0;   // whose header line has been checked
  std::int64_t image_bytes_ = 0;  // announced by the image pages' headers so far
  std::size_t next_ = 0;          // where the next line starts, or the answer ends
};

// Reads "ok N\n" + N pages (each a header line and its bytes; a refusal line may stand in a
// page's place), or a refusal line alone. An Answer has checked its form and limits; this
// also checks that an image is the PNG or JPEG, of the size, that its header says.
Result<std::vector<DocumentPage>> parse_answer(std::string_view answer) {
  const auto line_end = answer.find('\n');
  if (line_end == std::string_view::npos) return Status(StatusCode::internal, "no answer");
  const std::string_view head = answer.substr(0, line_end);
  if (auto refusal = refusal_of(head)) return std::move(*refusal);
  if (head.rfind("ok ", 0) != 0) return Status(StatusCode::internal, "an unknown answer");
  const auto count = number(head.substr(3));
  if (!count) return unreadable_answer();
  std::vector<DocumentPage> pages;
  pages.reserve(static_cast<std::size_t>(*count));
  std::size_t at = line_end + 1;
  for (std::int64_t i = 0; i < *count; ++i) {
    const auto end = answer.find('\n', at);
    if (end == std::string_view::npos) return Status(StatusCode::internal, "a cut answer");
    const std::string_view line = answer.substr(at, end - at);
    if (auto refusal = refusal_of(line)) return std::move(*refusal);
    const auto header = page_header(line);
    if (!header) return unreadable_answer();
    const auto length = static_cast<std::size_t>(header->length);
    if (end + 1 + length > answer.size()) return Status(StatusCode::internal, "a cut answer");
    const std::string_view bytes = answer.substr(end + 1, length);
    DocumentPage page{header->kind, {}, {}};
    if (header->kind == PageKind::text) {
      page.text = std::string(bytes);
      if (page.text.empty()) page.kind = PageKind::blank;
    } else if (header->kind == PageKind::image) {
      const auto announced = read_image_header(bytes);
      if (!announced || announced->media_type != header->media_type ||
          announced->width != header->width || announced->height != header->height) {
        return unreadable_answer();
      }
      page.image = PageImage{std::string(header->media_type), header->width, header->height,
                             std::string(bytes)};
    }
    pages.push_back(std::move(page));
    at = end + 1 + length;
  }
  return pages;
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
    return Status(StatusCode::internal, "the service is stopping");
  }

  int to_child[2];
  int from_child[2];
  if (pipe2(to_child, O_CLOEXEC) != 0)
    return Status(StatusCode::internal, "no pipe for the reader");
  Fd child_in(to_child[0]);
  Fd pdf_out(to_child[1]);
  if (pipe2(from_child, O_CLOEXEC) != 0)
    return Status(StatusCode::internal, "no pipe for the reader");
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
    return Status(StatusCode::internal,
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
  Answer answer(options.reading);
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
    return Status(StatusCode::internal, "the service is stopping");
  }
  if (bad_answer) return std::move(*bad_answer);
  if (timed_out) {
    return refused(fmt::format(
        "the PDF took longer than {} s to read, more than fairlane allows: it may be damaged or "
        "far too complex; export it again (print to PDF) or split it",
        options.timeout.count() / 1000));
  }
  if (WIFSIGNALED(wait_status) || !WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    return refused(fmt::format(
        "the PDF could not be read within fairlane's limits on time and memory (the reader "
        "ended with {}): it may be damaged or far too complex; export it again or split it",
        WIFSIGNALED(wait_status) ? fmt::format("signal {}", WTERMSIG(wait_status))
                                 : fmt::format("status {}", WEXITSTATUS(wait_status))));
  }
  auto pages = parse_answer(answer.bytes());
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
  const std::string pdf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Each page is written as soon as it is read, so that the reader holds one page's image at
  // a time and the parent can stop it at the first page past a limit.
  const Status read = read_pdf(
      pdf, reading,
      [&](std::int64_t count) {
        out << "ok " << count << '\n';
        return Status();
      },
      [&](const DocumentPage& page) {
        write_page(out, page);
        return out ? Status() : Status(StatusCode::internal, "the answer could not be written");
      });
  if (!read.ok() && out) write_refusal(out, read);
  out.flush();
  return out ? 0 : 1;
}

}  // namespace fairlane
