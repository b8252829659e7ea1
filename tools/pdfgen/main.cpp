// fairlane-pdfgen: writes a sample book, a PDF of N pages of generated text, each page
// starting with "Page K of N", or a hostile PDF for the reader's limits:
//   --pages N                  N pages of text, with a text layer
//   --scanned                  every page its text drawn as a gray image with no text layer,
//                              like a scan without OCR (--scan-dpi, 100; --no-specks)
//   --kinds LETTERS            each page's kind, one letter a page: t text, s scanned,
//                              b blank (no text, no ink); --kinds tsbt is text, scanned,
//                              blank, text
//   --no-text                  every page blank
//   --encrypted                a PDF readers report as encrypted
//   --huge-page                every page 14400 x 14400 pt, PDF 1.7's largest
//   --page-size WIDTHxHEIGHT   every page that size in points, e.g. 100000x100000
//   --bomb [--bomb-side PX]    a decompression bomb: one page holding a gray image of PX x PX
//                              (30000), a few KB that inflate to PX squared bytes (900 MB);
//                              with --huge-page or --page-size, on a page that big
// Text and scanned pages say "Page K of N", as text or in their image. Exit status 0 when
// the file was written, 1 when it could not be, 2 for a bad command line.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "book_pdf.hpp"
#include "document/pdf_writer.hpp"
#include "fairlane/version.hpp"

namespace {

// The largest page side in PDF 1.7's implementation limits (ISO 32000-1, annex C: Acrobat's);
// poppler, and fairlane's reader, accept more.
constexpr int kHugePage_pt = 14400;

// "WIDTHxHEIGHT" in whole points, each 1 to 10,000,000; nullopt otherwise.
std::optional<std::pair<int, int>> parse_page_size(const std::string& text) {
  const std::size_t x = text.find('x');
  if (x == std::string::npos) return std::nullopt;
  const auto side = [](const std::string& digits) -> std::optional<int> {
    if (digits.empty() || digits.size() > 8 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    const int value = std::stoi(digits);
    if (value < 1 || value > 10'000'000) return std::nullopt;
    return value;
  };
  const auto width = side(text.substr(0, x));
  const auto height = side(text.substr(x + 1));
  if (!width || !height) return std::nullopt;
  return std::pair{*width, *height};
}

}  // namespace

// An exception that reaches here is a bug; it is reported, not left to std::terminate.
int main(int argc, char** argv) try {
  CLI::App app{
      "fairlane-pdfgen: writes a sample book, a PDF of generated text whose pages\n"
      "start with \"Page K of N\" (as text, or drawn in a scanned page's image), or a\n"
      "hostile PDF for the reader's limits (--huge-page, --bomb).",
      "fairlane-pdfgen"};
  app.set_version_flag("--version", std::string("fairlane-pdfgen ") + fairlane::kVersion);
  int pages = 0;
  std::string out;
  fairlane::pdfgen::BookPdfOptions book;
  book.pdf = {.title = "A fairlane sample book", .locked = false};
  bool no_text = false;
  bool scanned = false;
  std::string kinds_letters;
  bool huge_page = false;
  std::string page_size;
  bool no_specks = false;
  bool bomb = false;
  std::int64_t bomb_side_px = 30000;
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
  auto* huge_flag = app.add_flag(
      "--huge-page", huge_page,
      "Make every page 14400 x 14400 pt (200 inches a side), PDF 1.7's largest, text in "
      "its top left corner");
  auto* size_option =
      app.add_option("--page-size", page_size,
                     "Make every page WIDTHxHEIGHT points (1/72 inch), e.g. 30000x30000; text "
                     "pages are never smaller than Letter (612x792)")
          ->type_name("WIDTHxHEIGHT")
          ->excludes(huge_flag);
  auto* bomb_flag = app.add_flag(
      "--bomb", bomb,
      "Write a decompression bomb instead of a book: one page, no text, a black gray image "
      "--bomb-side pixels square compressed twice with Flate, a few KB that inflate to "
      "--bomb-side squared bytes; on a Letter page, or as --huge-page or --page-size say");
  app.add_option("--bomb-side", bomb_side_px, "The bomb's image side in pixels")
      ->type_name("PX")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{100'000}));
  for (auto* book_option : {pages_option, kinds_option, no_text_flag, scanned_flag}) {
    bomb_flag->excludes(book_option);
  }
  try {
    app.parse(argc, argv);
    if (!bomb && pages_option->count() == 0 && kinds_option->count() == 0) {
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
  if (huge_page) {
    book.width_pt = kHugePage_pt;
    book.height_pt = kHugePage_pt;
  } else if (size_option->count() > 0) {
    const auto size = parse_page_size(page_size);
    if (!size) {
      std::cerr << "fairlane-pdfgen: --page-size takes WIDTHxHEIGHT in whole points, each 1 to "
                   "10000000 (e.g. 612x792), not \""
                << page_size << "\"\n";
      return 2;
    }
    book.width_pt = size->first;
    book.height_pt = size->second;
  }
  book.specks = !no_specks;

  const std::string pdf =
      bomb ? fairlane::write_flate_bomb_pdf(
                 {.side_px = bomb_side_px, .width_pt = book.width_pt, .height_pt = book.height_pt},
                 book.pdf)
           : fairlane::pdfgen::write_book_pdf(kinds, book);
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
