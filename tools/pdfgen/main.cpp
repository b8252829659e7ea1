// fairlane-pdfgen: writes a sample book, a PDF of N pages of generated text, each page
// starting with "Page K of N":
//   --pages N                  N pages of text, with a text layer
//   --scanned                  every page its text drawn as a gray image with no text layer,
//                              like a scan without OCR (--scan-dpi, 100; --no-specks)
//   --kinds LETTERS            each page's kind, one letter a page: t text, s scanned,
//                              b blank (no text, no ink); --kinds tsbt is text, scanned,
//                              blank, text
//   --no-text                  every page blank
//   --encrypted                a PDF readers report as encrypted
// Text and scanned pages say "Page K of N", as text or in their image. Exit status 0 when
// the file was written, 1 when it could not be, 2 for a bad command line.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "book_pdf.hpp"
#include "fairlane/version.hpp"

// An exception that reaches here is a bug; it is reported, not left to std::terminate.
int main(int argc, char** argv) try {
  CLI::App app{
      "fairlane-pdfgen: writes a sample book, a PDF of generated text whose pages\n"
      "start with \"Page K of N\" (as text, or drawn in a scanned page's image).",
      "fairlane-pdfgen"};
  app.set_version_flag("--version", std::string("fairlane-pdfgen ") + fairlane::kVersion);
  int pages = 0;
  std::string out;
  fairlane::pdfgen::BookPdfOptions book;
  book.pdf = {.title = "A fairlane sample book", .locked = false};
  bool no_text = false;
  bool scanned = false;
  std::string kinds_letters;
  bool no_specks = false;
  auto* pages_option = app.add_option("--pages", pages, "Number of pages (0: an empty page tree)")
                           ->check(CLI::NonNegativeNumber);
  app.add_option("--out", out, "The PDF file to write ('-': standard output)")->required();
  app.add_option("--seed", book.seed,
                 "Seed of the text and the scans' specks: the same seed, the same book")
      ->capture_default_str();
  app.add_option("--title", book.pdf.title, "The document's title")->capture_default_str();
  app.add_flag("--encrypted", book.pdf.locked,
               "Write a PDF that is encrypted with a password nobody knows");
  auto* no_text_flag =
      app.add_flag("--no-text", no_text, "Write blank pages: no text and no ink (a kind b book)");
  auto* scanned_flag = app.add_flag(
      "--scanned", scanned,
      "Write every page's text drawn as an image, with no text layer, like a scan without OCR "
      "(a kind s book)");
  auto* kinds_option =
      app.add_option("--kinds", kinds_letters,
                     "Each page's kind, one letter a page from page 1: t text, s scanned, b blank "
                     "(\"tsbt\": text, scanned, blank, text); gives --pages, which if given must "
                     "agree")
          ->type_name("LETTERS")
          ->excludes(no_text_flag)
          ->excludes(scanned_flag);
  no_text_flag->excludes(scanned_flag);
  app.add_option("--scan-dpi", book.scan_dpi,
                 "Resolution of scanned pages (pages larger than 4000 pixels a side at it are "
                 "rendered coarser)")
      ->capture_default_str()
      ->check(CLI::Range(10, 600));
  app.add_flag("--no-specks", no_specks, "Scanned pages without the few grey specks of dust");
  try {
    app.parse(argc, argv);
    if (pages_option->count() == 0 && kinds_option->count() == 0) {
      throw CLI::RequiredError("--pages (or --kinds)");
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  std::vector<fairlane::pdfgen::PageKind> kinds;
  if (kinds_option->count() > 0) {
    auto parsed = fairlane::pdfgen::parse_page_kinds(kinds_letters);
    if (!parsed) {
      std::cerr << "fairlane-pdfgen: --kinds takes letters t (text), s (scanned) and b (blank), "
                   "not \""
                << kinds_letters << "\"\n";
      return 2;
    }
    if (pages_option->count() > 0 && static_cast<std::size_t>(pages) != parsed->size()) {
      std::cerr << "fairlane-pdfgen: --kinds names " << parsed->size() << " pages, --pages says "
                << pages << '\n';
      return 2;
    }
    kinds = std::move(*parsed);
  } else {
    using fairlane::pdfgen::PageKind;
    kinds.assign(static_cast<std::size_t>(pages), no_text   ? PageKind::blank
                                                  : scanned ? PageKind::scanned
                                                            : PageKind::text);
  }
  book.specks = !no_specks;

  const std::string pdf = fairlane::pdfgen::write_book_pdf(kinds, book);
  if (out == "-") {
    std::cout.write(pdf.data(), static_cast<std::streamsize>(pdf.size()));
    std::cout.flush();
    return std::cout ? 0 : 1;
  }
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  file.write(pdf.data(), static_cast<std::streamsize>(pdf.size()));
  file.close();
  if (!file) {
    std::cerr << "fairlane-pdfgen: cannot write " << out << ": "
              << std::system_category().message(errno) << '\n';
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "fairlane-pdfgen: internal error: " << e.what() << '\n';
  return 1;
}
