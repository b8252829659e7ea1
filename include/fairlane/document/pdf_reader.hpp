// Reading untrusted PDFs in a child process. poppler can be driven by a small, valid PDF
// into minutes of CPU and gigabytes of memory, and a crash in it would take the service
// down; so the service hands each uploaded PDF to a child (`fairlane read-pdf`), which
// limits its own CPU time and memory, and kills it when it overruns a wall-clock timeout.
//
//   parent: read_pdf_in_child(bytes, options)  --stdin: the PDF-->  child: read_pdf_child()
//                                             <--stdout: pages---
//
// Thread safety: read_pdf_in_child may run on any number of threads at once; a
// ReaderProcesses is shared by them (it locks).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fairlane/core/result.hpp"
#include "fairlane/document/document.hpp"

namespace fairlane {

struct PdfReaderOptions {
  // The child's argv; it must read a PDF on stdin and answer as read_pdf_child does.
  std::vector<std::string> command;
  // A child that has not answered in this long is killed and the PDF refused.
  std::chrono::milliseconds timeout{60'000};
  // How pages are read, and what is read back from the child: at most `max_pages` pages
  // (--max-pages), each with at most `max_page_bytes` bytes of text (--max-page-kb) or an
  // image of at most `max_image_bytes`, all the pages' texts and images together at most
  // `max_total_bytes`, checked as the answer arrives. An answer past any is refused
  // naming the limit and the child killed, so that the parent never holds more than the
  // limits allow (a small PDF of compressed text can hold gigabytes of it). The child should
  // be given the same (read_pdf_child's `reading`).
  PdfReading reading{.input = PageInputMode::automatic,
                     .render = {},
                     .max_pages = 10'000,
                     .max_page_bytes = std::int64_t{64} * 1024,
                     .max_image_bytes = std::int64_t{8} * 1024 * 1024,
                     .max_total_bytes = std::int64_t{256} * 1024 * 1024};
};

// The children reading now, so that a stopping service can end them at once.
class ReaderProcesses {
 public:
  // False once stopping: no child is started, the read fails.
  bool add(pid_t pid);
  void remove(pid_t pid);
  // Kills every child reading, and any started later.
  void stop();
  [[nodiscard]] bool stopping() const;
  // Children reading now.
  [[nodiscard]] std::size_t reading() const;

 private:
  mutable std::mutex mutex_;
  std::set<pid_t> pids_;  // guarded by mutex_
  bool stopping_ = false;
};

// Runs the reader on `bytes` and returns its pages, as read_pdf (and check_pages) would. A
// refusal of the reader (a damaged, encrypted, empty or all-blank PDF) comes back as its
// invalid_argument, however the reader ends after it; a reader ended by its limits
// (SIGXCPU, SIGKILL) or by a crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT), or that
// overruns the timeout, is an invalid_argument naming the limits; a reader that exits
// non-zero or is ended by another signal without such a refusal (127: it could not load a
// library; SIGTERM: it was stopped from outside) is unavailable, its message naming the
// reader and how it ended, for the operator; an answer with more pages, or a page with more
// text, or pages with more bytes together than `options` allow (or the reader's own refusal
// for them) is payload_too_large naming the limit; a reader that cannot be started, or whose
// answer cannot be read, is internal. Ignores SIGPIPE in the process (once), so that a
// reader dying while it is sent the PDF is an error, not the end of the service.
[[nodiscard]] Result<std::vector<DocumentPage>> read_pdf_in_child(std::string_view bytes,
                                                                  const PdfReaderOptions& options,
                                                                  ReaderProcesses* processes);

// The reader's side (`fairlane read-pdf`): limits this process to `cpu_seconds` of CPU and
// `memory_mb` of address space (not under AddressSanitizer, which needs terabytes of it),
// and to no core dump (a PDF that ends it at a limit or in a crash must not leave up to
// `memory_mb` of core on the service's disk each time it is sent),
// reads a PDF from `in`, reads its pages as `reading` says (read_pdf) and writes the answer
// to `out`, each page as soon as it is read:
//   "ok N\n", then N times one of
//     "text LENGTH\n" and the text's bytes,
//     "image MEDIA_TYPE WIDTH HEIGHT LENGTH\n" and the encoded image's bytes,
//     "blank\n";
//   or, at the start or in a page's place, "refused MESSAGE\n" (one line of printable text;
//   "too_large MESSAGE\n" for a limit passed), which ends the answer.
// Returns the process's exit status (0 for all of these).
int read_pdf_child(std::istream& in, std::ostream& out, std::int64_t cpu_seconds,
                   std::int64_t memory_mb, const PdfReading& reading);

}  // namespace fairlane
