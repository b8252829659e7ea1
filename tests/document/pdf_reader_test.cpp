// read_pdf_in_child against stand-in readers (small shell scripts), so that each way a
// reader can answer, refuse, die or hang is driven on purpose; and read_pdf_child itself.
#include "fairlane/document/pdf_reader.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <istream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include "document/pdf_writer.hpp"
#include "fairlane/document/document.hpp"

using fairlane::PdfReaderOptions;
using fairlane::read_pdf_in_child;
using fairlane::StatusCode;

namespace {

PdfReaderOptions shell(const std::string& script,
                       std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  PdfReaderOptions options;
  options.command = {"/bin/sh", "-c", script};
  options.timeout = timeout;
  return options;
}

// A file of this test's own, removed with its owner.
struct TempFile {
  std::filesystem::path path;
  explicit TempFile(const std::string& name)
      : path(std::filesystem::temp_directory_path() /
             fmt::format("fairlane-reader-test-{}-{}", ::getpid(), name)) {
    std::filesystem::remove(path);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() { std::filesystem::remove(path); }
};

// What the real reader (read_pdf_child, as `fairlane read-pdf` runs it) answers for `pdf`,
// handed to read_pdf_in_child by a stand-in that replays it: the whole way from the
// child's answer to the parent's result.
fairlane::Result<std::vector<fairlane::DocumentPage>> through_child(
    const std::string& pdf, PdfReaderOptions options, std::int64_t child_max_page_bytes = 0) {
  std::istringstream in(pdf);
  std::ostringstream out;
  REQUIRE(fairlane::read_pdf_child(in, out, 0, 0,
                                   fairlane::PdfReading{.max_pages = options.reading.max_pages,
                                                        .max_page_bytes = child_max_page_bytes}) ==
          0);
  const TempFile answer("answer");
  std::ofstream(answer.path, std::ios::binary) << out.str();
  options.command = {"/bin/sh", "-c", "cat >/dev/null; cat '" + answer.path.string() + "'"};
  return read_pdf_in_child(pdf, options, nullptr);
}

// The texts of the pages read (an empty one for a blank page).
std::vector<std::string> texts(const std::vector<fairlane::DocumentPage>& pages) {
  std::vector<std::string> out;
  for (const auto& page : pages) out.push_back(page.text);
  return out;
}

}  // namespace

TEST_CASE("Reader: the pages the child answers come back in order, bytes exact") {
  const auto pages = read_pdf_in_child(
      "%PDF", shell("cat >/dev/null; printf 'ok 3\\ntext 2\\nabblank\\ntext 5\\nx\\ny\\nz'"),
      nullptr);
  REQUIRE(pages.ok());
  CHECK(texts(pages.value()) == std::vector<std::string>{"ab", "", "x\ny\nz"});
  CHECK(pages->at(1).kind == fairlane::PageKind::blank);
}

TEST_CASE("Reader: a refusal comes back as invalid_argument with the child's sentence") {
  const auto pages = read_pdf_in_child(
      "%PDF", shell("cat >/dev/null; echo 'refused the PDF is encrypted: remove it'"), nullptr);
  REQUIRE_FALSE(pages.ok());
  CHECK(pages.status().code() == StatusCode::invalid_argument);
  CHECK(pages.status().message() == "the PDF is encrypted: remove it");
}

TEST_CASE("Reader: a child that dies, even before reading its input, is a refusal naming limits") {
  // 4 MB of input to a child that never reads it: the write fails, the service does not.
  const std::string big(4 * 1024 * 1024, 'x');
  const auto pages = read_pdf_in_child(big, shell("kill -SEGV $$"), nullptr);
  REQUIRE_FALSE(pages.ok());
  CHECK(pages.status().code() == StatusCode::invalid_argument);
  CHECK(pages.status().message().find("limits on time and memory") != std::string::npos);
  CHECK(pages.status().message().find("signal 11") != std::string::npos);
}

TEST_CASE("Reader: the limits' own signals and a crash refuse the PDF, naming the signal") {
  // SIGXCPU: the CPU limit; SIGKILL: its hard limit; SIGABRT: poppler out of memory under
  // the address-space limit; SIGBUS, SIGFPE, SIGILL: a crash the PDF drove it into.
  for (const std::string signal : {"XCPU", "KILL", "ABRT", "BUS", "FPE", "ILL"}) {
    CAPTURE(signal);
    const auto pages =
        read_pdf_in_child("%PDF", shell("cat >/dev/null; kill -" + signal + " $$"), nullptr);
    REQUIRE_FALSE(pages.ok());
    CHECK(pages.status().code() == StatusCode::invalid_argument);
    CHECK(pages.status().message().find("limits on time and memory") != std::string::npos);
  }
}

TEST_CASE("Reader: a reader that cannot run, or is stopped, is unavailable, not the PDF's fault") {
  // Exit 127: the dynamic loader could not load a library (one upgraded under the running
  // service); SIGTERM: the reader stopped from outside (the service being stopped); SIGUSR1,
  // any other signal. (Not SIGINT: a shell that starts the tests in the background has it
  // ignored, and the stand-in would inherit that.)
  const std::pair<std::string, std::string> cases[] = {
      {"cat >/dev/null; exit 127", "exited with status 127"},
      {"exit 1", "exited with status 1"},
      {"cat >/dev/null; kill -TERM $$", "was ended by signal 15"},
      {"kill -USR1 $$", "was ended by signal 10"},
  };
  for (const auto& [script, how] : cases) {
    CAPTURE(script);
    const auto pages = read_pdf_in_child("%PDF", shell(script), nullptr);
    REQUIRE_FALSE(pages.ok());
    CHECK(pages.status().code() == StatusCode::unavailable);
    // The operator's line: which reader, and how it ended.
    CHECK(pages.status().message().rfind("the PDF reader /bin/sh " + how + " before it answered",
                                         0) == 0);
  }
}

TEST_CASE("Reader: a refusal the reader answered stands, however the reader then ends") {
  const auto pages = read_pdf_in_child(
      "%PDF", shell("cat >/dev/null; echo 'refused the PDF is encrypted: remove it'; exit 3"),
      nullptr);
  REQUIRE_FALSE(pages.ok());
  CHECK(pages.status().code() == StatusCode::invalid_argument);
  CHECK(pages.status().message() == "the PDF is encrypted: remove it");
}

TEST_CASE("Reader: a child past its timeout is killed and the PDF refused") {
  const auto pages =
      read_pdf_in_child("%PDF", shell("exec sleep 30", std::chrono::milliseconds(200)), nullptr);
  REQUIRE_FALSE(pages.ok());
  CHECK(pages.status().code() == StatusCode::invalid_argument);
  CHECK(pages.status().message().find("took longer than") != std::string::npos);
}

TEST_CASE("Reader: a PDF past the timeout midway names how many pages it read, and a split") {
  // A scanned book reads a page at a time: 10 of its 300 pages by the timeout. Exporting it
  // again would make it no faster; parts of a size read in the time would go through.
  std::string script = "cat >/dev/null; printf 'ok 300\\n";
  for (int i = 0; i < 10; ++i) script += "text 1\\nx";
  script += "'; exec sleep 30";
  const auto pages = read_pdf_in_child("%PDF", shell(script, std::chrono::seconds(1)), nullptr);
  REQUIRE_FALSE(pages.ok());
  CHECK(pages.status().code() == StatusCode::invalid_argument);
  const std::string& message = pages.status().message();
  CHECK(message.find("took longer than 1 s") != std::string::npos);
  CHECK(message.find("10 of its 300 pages") != std::string::npos);
  CHECK(message.find("parts of at most 8 pages") != std::string::npos);
  CHECK(message.find("--pdf-timeout") != std::string::npos);
  CHECK(message.find("export it again") == std::string::npos);

  // The same when the reader's CPU limit, of the same seconds, ends it first.
  script.replace(script.find("exec sleep 30"), std::string("exec sleep 30").size(),
                 "kill -XCPU $$");
  const auto cpu = read_pdf_in_child("%PDF", shell(script, std::chrono::seconds(1)), nullptr);
  REQUIRE_FALSE(cpu.ok());
  CHECK(cpu.status().code() == StatusCode::invalid_argument);
  CHECK(cpu.status().message().find("10 of its 300 pages") != std::string::npos);
}

TEST_CASE("Reader: a stop kills the children reading and refuses new reads") {
  fairlane::ReaderProcesses processes;
  // A reader that would take 30 s, with 20 s allowed. It writes its pid once it has
  // started (to a file, renamed into place whole), then sleeps.
  const TempFile started("started");
  const TempFile writing("started.tmp");
  const std::string script =
      fmt::format("echo $$ >'{}' && mv '{}' '{}' && exec sleep 30", writing.path.string(),
                  writing.path.string(), started.path.string());
  std::optional<fairlane::Result<std::vector<fairlane::DocumentPage>>> pages;
  std::thread reading([&] { pages.emplace(read_pdf_in_child("%PDF", shell(script), &processes)); });
  // The stop must come while the child reads, not before it has started (a stop before it
  // refuses the read as well, and proves nothing of the kill): wait for it, 10 s at most.
  const auto waited = [](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    return done();
  };
  // The child can write its file before posix_spawn has returned in the parent, so the
  // parent counts it a moment later: both are waited for.
  const bool child_reading =
      waited([&] { return std::filesystem::exists(started.path) && processes.reading() == 1; });
  if (!child_reading) {
    processes.stop();  // so that the thread has ended when the test fails
    reading.join();
  }
  REQUIRE_MESSAGE(child_reading, "the child did not start reading, counted, within 10 s");
  pid_t child = 0;
  std::ifstream(started.path) >> child;
  REQUIRE(child > 0);
  processes.stop();
  // The stop killed it: it is soon dead (a zombie, or reaped), not asleep until the
  // timeout.
  const auto dead = [child] {
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return true;
    const auto state = line.find(") ");
    return state != std::string::npos && (line[state + 2] == 'Z' || line[state + 2] == 'X');
  };
  CHECK_MESSAGE(waited(dead), "the child was still alive 10 s after the stop");
  reading.join();
  REQUIRE(pages.has_value());
  REQUIRE_FALSE(pages->ok());
  // A service that stops is not the PDF's fault: 503, to be sent again (to another instance).
  CHECK(pages->status().code() == StatusCode::unavailable);
  CHECK(processes.reading() == 0);

  const auto later = read_pdf_in_child("%PDF", shell("exec sleep 30"), &processes);
  REQUIRE_FALSE(later.ok());
  CHECK(later.status().code() == StatusCode::unavailable);
}

TEST_CASE("Reader: a child that answers and then does not exit is killed at the timeout") {
  const auto pages =
      read_pdf_in_child("%PDF",
                        shell("cat >/dev/null; printf 'ok 1\\ntext 1\\nx'; exec >&-; exec sleep 30",
                              std::chrono::milliseconds(300)),
                        nullptr);
  REQUIRE_FALSE(pages.ok());
  CHECK(pages.status().message().find("took longer than") != std::string::npos);
}

TEST_CASE("Reader: the child gets no descriptor and no environment of its own parent") {
  // A descriptor this process holds open (not close-on-exec), and a variable it has.
  const int fd = ::open("/dev/null", O_RDONLY);
  REQUIRE(fd > 2);
  ::setenv("FAIRLANE_READER_TEST_SECRET", "s3cret", 1);
  // Answers two pages: "yes" or "no" (is the descriptor open?), then the variable or "none".
  const std::string script = fmt::format(
      R"(cat >/dev/null; if [ -e /proc/self/fd/{} ]; then open=yes; else open=no; fi; )"
      R"(secret=${{FAIRLANE_READER_TEST_SECRET:-none}}; )"
      R"(printf 'ok 2\ntext %s\n%stext %s\n%s' "${{#open}}" "$open" "${{#secret}}" "$secret")",
      fd);
  const auto pages = read_pdf_in_child("%PDF", shell(script), nullptr);
  ::close(fd);
  ::unsetenv("FAIRLANE_READER_TEST_SECRET");
  REQUIRE(pages.ok());
  REQUIRE(pages->size() == 2);
  CHECK((*pages)[0].text == "no");
  CHECK((*pages)[1].text == "none");
}

TEST_CASE("Reader: a command that cannot start is unavailable, not the client's fault") {
  const auto pages =
      read_pdf_in_child("%PDF", PdfReaderOptions{.command = {"/nonexistent/reader"}}, nullptr);
  REQUIRE_FALSE(pages.ok());
  // glibc's posix_spawn reports the failed exec itself. The upload is worth sending again
  // (503 with Retry-After), as when a reader that started fails for no fault of the PDF.
  CHECK(pages.status().code() == StatusCode::unavailable);
  CHECK(pages.status().message().find("could not start") != std::string::npos);
}

TEST_CASE("read_pdf_child: a PDF's pages framed, a bad one refused, a long one cut short") {
  std::istringstream pdf(fairlane::write_pdf({"One.", "Two."}));
  std::ostringstream out;
  CHECK(fairlane::read_pdf_child(pdf, out, 0, 0, fairlane::PdfReading{.max_pages = 10}) == 0);
  CHECK(out.str() == "ok 2\ntext 5\nOne.\ntext 5\nTwo.\n");

  std::istringstream junk("not a pdf");
  std::ostringstream refused;
  CHECK(fairlane::read_pdf_child(junk, refused, 0, 0, fairlane::PdfReading{.max_pages = 10}) == 0);
  CHECK(refused.str().rfind("refused this is not a PDF but text, so it could not be read", 0) == 0);

  std::istringstream three(fairlane::write_pdf({"a", "b", "c"}));
  std::ostringstream too_many;
  CHECK(fairlane::read_pdf_child(three, too_many, 0, 0, fairlane::PdfReading{.max_pages = 2}) == 0);
  CHECK(too_many.str() ==
        "too_large the PDF has 3 pages; at most 2 are taken in one upload: split it\n");
}

namespace {
// A stream whose reading throws, as poppler or a container may on what a PDF holds.
class ThrowingBuffer final : public std::streambuf {
 protected:
  int_type underflow() override { throw std::length_error("vector::_M_default_append"); }
};
}  // namespace

// An exception the reading throws is the PDF's doing, refused as such: out of the reader it
// became an exit with status 1, which the service now tells as its own failure (503, retry).
TEST_CASE("read_pdf_child: an exception while reading is a refusal, not an exit") {
  ThrowingBuffer buffer;
  std::istream in(&buffer);
  std::ostringstream out;
  CHECK(fairlane::read_pdf_child(in, out, 0, 0, fairlane::PdfReading{.max_pages = 10}) == 0);
  CHECK(out.str().find("vector::_M_default_append") != std::string::npos);
  CHECK(out.str().find("it may be damaged") != std::string::npos);
}

TEST_CASE("read_pdf_child: the reader can leave no core dump, whatever ends it") {
  // In a process of its own, as `fairlane read-pdf` runs it (the limits are the process's):
  // a PDF that ends it at its CPU limit (SIGXCPU) or in poppler's abort under its memory
  // limit must not write a core of up to that limit to the service's disk, each time it is
  // sent. The child exits 0 when its core limit, soft and hard, is 0 and it is not dumpable.
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::istringstream pdf(fairlane::write_pdf({"One."}));
    std::ostringstream out;
    (void)fairlane::read_pdf_child(pdf, out, 30, 4096, fairlane::PdfReading{.max_pages = 10});
    rlimit core{};
    const bool no_core = ::getrlimit(RLIMIT_CORE, &core) == 0 && core.rlim_cur == 0 &&
                         core.rlim_max == 0 && ::prctl(PR_GET_DUMPABLE) == 0;
    ::_exit(no_core ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE(
    "Reader: the real reader's refusal of a file that is not a PDF reaches the parent whole") {
  const std::string png = std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16);
  for (const std::string& bytes : {std::string(R"({"name": "book", "pages": ["one"]})"), png,
                                   std::string("\x1b[2J\"quoted\"\n\\")}) {
    CAPTURE(bytes);
    const auto pages = through_child(bytes, PdfReaderOptions{});
    REQUIRE_FALSE(pages.ok());
    CHECK(pages.status().code() == StatusCode::invalid_argument);
    CHECK(pages.status().message() == fairlane::split_pdf(bytes).status().message());
    CHECK(pages.status().message().rfind("this is not a PDF", 0) == 0);
  }
}

TEST_CASE("Reader: a padded PDF and one with junk before its header come through the child") {
  const std::string pdf = fairlane::write_pdf({"Page 1 of 2\nOne.", "Page 2 of 2\nTwo."});
  for (const std::string& bytes :
       {pdf + std::string(4096, '\0'), std::string(500, ' ') + pdf + std::string(4096, '\n')}) {
    const auto pages = through_child(bytes, PdfReaderOptions{});
    REQUIRE(pages.ok());
    CHECK(texts(pages.value()) ==
          std::vector<std::string>{"Page 1 of 2\nOne.\n", "Page 2 of 2\nTwo.\n"});
  }
}

TEST_CASE(
    "Reader: an answer with a page longer than max_page_bytes is refused and the child killed") {
  PdfReaderOptions options;
  options.reading.max_page_bytes = 4096;
  // The child claims a second page of 100,000 bytes and sends 30 MB: the parent stops at the
  // length, kills the child before it gets to the marker, and names the limit.
  const TempFile marker("marker");
  options.command = {"/bin/sh", "-c",
                     "cat >/dev/null; printf 'ok 2\\ntext 3\\nab\\ntext 100000\\n'; "
                     "head -c 30000000 /dev/zero; touch '" +
                         marker.path.string() + "'"};
  const auto pages = read_pdf_in_child("%PDF", options, nullptr);
  REQUIRE_FALSE(pages.ok());
  CHECK(pages.status().code() == StatusCode::payload_too_large);
  CHECK(pages.status().message() ==
        "page 2 has 100000 bytes of text; a page may have at most 4096 (--max-page-kb): split the "
        "page");
  CHECK_FALSE(std::filesystem::exists(marker.path));

  // One byte within the limit is taken.
  options.command = {"/bin/sh", "-c",
                     "cat >/dev/null; printf 'ok 1\\ntext 4096\\n'; head -c 4096 /dev/zero"};
  const auto within = read_pdf_in_child("%PDF", options, nullptr);
  REQUIRE(within.ok());
  CHECK(texts(within.value()) == std::vector<std::string>{std::string(4096, '\0')});
}

TEST_CASE("Reader: an answer with more pages than max_pages is refused naming the limit") {
  PdfReaderOptions options;
  options.reading.max_pages = 3;
  options.command = {"/bin/sh", "-c",
                     "cat >/dev/null; printf 'ok 4\\ntext 1\\natext 1\\nbtext 1\\nctext 1\\nd'"};
  const auto pages = read_pdf_in_child("%PDF", options, nullptr);
  REQUIRE_FALSE(pages.ok());
  CHECK(pages.status().code() == StatusCode::payload_too_large);
  CHECK(pages.status().message() ==
        "the PDF has 4 pages; at most 3 are taken in one upload: split it");
}

TEST_CASE("Reader: an answer that goes on past its end is not held") {
  PdfReaderOptions options;
  options.reading.max_page_bytes = 4096;
  // "ok 1", a page of 5 bytes, then 30 MB more than the answer said: the child is killed
  // before it gets to the marker.
  const TempFile marker("marker");
  const std::string then_mark = "; touch '" + marker.path.string() + "'";
  options.command = {
      "/bin/sh", "-c",
      "cat >/dev/null; printf 'ok 1\\ntext 5\\nhello'; head -c 30000000 /dev/zero" + then_mark};
  const auto pages = read_pdf_in_child("%PDF", options, nullptr);
  REQUIRE_FALSE(pages.ok());
  CHECK(pages.status().code() == StatusCode::internal);
  CHECK_FALSE(std::filesystem::exists(marker.path));
  // A refusal line without an end is cut off too.
  options.command = {"/bin/sh", "-c",
                     "cat >/dev/null; printf 'refused '; head -c 30000000 /dev/zero" + then_mark};
  const auto endless = read_pdf_in_child("%PDF", options, nullptr);
  REQUIRE_FALSE(endless.ok());
  CHECK(endless.status().code() == StatusCode::internal);
  CHECK_FALSE(std::filesystem::exists(marker.path));
}

TEST_CASE(
    "Reader: a PDF whose pages have more text than max_page_bytes is refused, from the child") {
  std::string long_page;
  for (int i = 0; i < 800; ++i) long_page += "word" + std::to_string(i) + " ";
  REQUIRE(long_page.size() > 5'000);
  const std::string pdf = fairlane::write_pdf({"Page 1 of 3\nShort.", long_page, long_page});
  PdfReaderOptions options;
  options.reading.max_page_bytes = 4096;
  // The child stops at the page past its limit: page 1 has gone out already, the refusal
  // takes page 2's place and ends the answer...
  std::istringstream in(pdf);
  std::ostringstream out;
  CHECK(fairlane::read_pdf_child(
            in, out, 0, 0, fairlane::PdfReading{.max_pages = 10, .max_page_bytes = 4096}) == 0);
  const std::string page_1 = "ok 3\ntext 19\nPage 1 of 3\nShort.\n";
  REQUIRE(out.str().rfind(page_1, 0) == 0);
  const std::string refusal = out.str().substr(page_1.size());
  CHECK(refusal.rfind("too_large page 2 has ", 0) == 0);
  CHECK(refusal.find("; a page may have at most 4096 (--max-page-kb): split the page\n") !=
        std::string::npos);
  const auto refused = through_child(pdf, options, 4096);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::payload_too_large);
  CHECK(refused.status().message() == refusal.substr(10, refusal.size() - 11));
  // ...and a child that is not told the limit is stopped by the parent, at the same page.
  const auto stopped = through_child(pdf, options);
  REQUIRE_FALSE(stopped.ok());
  CHECK(stopped.status().code() == StatusCode::payload_too_large);
  CHECK(stopped.status().message() == refused.status().message());
}

TEST_CASE("Reader: image and blank pages come through the child whole, in page order") {
  const std::string pdf = fairlane::write_pdf({"Page 1 of 3\nOne.", "", "Page 3 of 3\nThree."});
  PdfReaderOptions options;
  options.reading.input = fairlane::PageInputMode::image;
  std::istringstream in(pdf);
  std::ostringstream out;
  REQUIRE(fairlane::read_pdf_child(in, out, 0, 0, options.reading) == 0);
  const TempFile answer("answer");
  std::ofstream(answer.path, std::ios::binary) << out.str();
  options.command = {"/bin/sh", "-c", "cat >/dev/null; cat '" + answer.path.string() + "'"};
  const auto pages = read_pdf_in_child(pdf, options, nullptr);
  REQUIRE(pages.ok());
  const auto in_process = fairlane::read_pdf(pdf, options.reading);
  REQUIRE(in_process.ok());
  REQUIRE(pages->size() == 3);
  CHECK(pages->at(0).kind == fairlane::PageKind::image);
  CHECK(pages->at(1).kind == fairlane::PageKind::blank);
  CHECK(pages->at(2).kind == fairlane::PageKind::image);
  for (std::size_t i : {0U, 2U}) {
    CHECK(pages->at(i).image->bytes == in_process->at(i).image->bytes);
    CHECK(pages->at(i).image->width == in_process->at(i).image->width);
  }
}

TEST_CASE("Reader: an image whose header says another size than the child claims is refused") {
  // A PNG header of 3 x 2 pixels, claimed as 30 x 20: the estimate of its tokens would lie.
  const std::string png = std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x03\0\0\0\x02", 24);
  const TempFile image("image");
  std::ofstream(image.path, std::ios::binary) << png;
  for (const auto& [w, h, ok] : {std::tuple{30, 20, false}, std::tuple{3, 2, true}}) {
    CAPTURE(w);
    const std::string claim =
        fmt::format("cat >/dev/null; printf 'ok 1\\nimage image/png {} {} 24\\n'; cat '{}'", w, h,
                    image.path.string());
    const auto pages = read_pdf_in_child("%PDF", shell(claim), nullptr);
    CHECK(pages.ok() == ok);
    if (!ok) CHECK(pages.status().code() == StatusCode::internal);
  }
}

TEST_CASE("Reader: an answer with an image past max_image_bytes is refused and the child killed") {
  PdfReaderOptions options;
  options.reading.max_image_bytes = 1000;
  const TempFile marker("marker");
  options.command = {"/bin/sh", "-c",
                     "cat >/dev/null; printf 'ok 1\\nimage image/png 10 10 5000000\\n'; "
                     "head -c 30000000 /dev/zero; touch '" +
                         marker.path.string() + "'"};
  const auto pages = read_pdf_in_child("%PDF", options, nullptr);
  REQUIRE_FALSE(pages.ok());
  CHECK(pages.status().code() == StatusCode::payload_too_large);
  CHECK(pages.status().message().rfind("page 1's image is 5000000 bytes", 0) == 0);
  CHECK_FALSE(std::filesystem::exists(marker.path));
}

TEST_CASE("Reader: a refusal in a page's place ends the answer with it") {
  const auto pages = read_pdf_in_child(
      "%PDF",
      shell("cat >/dev/null; printf 'ok 2\\ntext 2\\nabtoo_large page 2 is too big: split it\\n'"),
      nullptr);
  REQUIRE_FALSE(pages.ok());
  CHECK(pages.status().code() == StatusCode::payload_too_large);
  CHECK(pages.status().message() == "page 2 is too big: split it");
}
