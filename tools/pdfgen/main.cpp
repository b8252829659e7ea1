// fairlane-pdfgen: writes a sample book, a PDF of N pages of generated text, each page
// starting with "Page K of N". --encrypted writes a PDF that readers report as encrypted,
// --no-text one whose pages have no text (as a scan without OCR looks). Exit status 0 when
// the file was written, 1 when it could not be, 2 for a bad command line.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include "book.hpp"
#include "document/pdf_writer.hpp"
#include "fairlane/version.hpp"

// An exception that reaches here is a bug; it is reported, not left to std::terminate.
int main(int argc, char** argv) try {
  CLI::App app{
      "fairlane-pdfgen: writes a sample book, a PDF of generated text whose pages\n"
      "start with \"Page K of N\".",
      "fairlane-pdfgen"};
  app.set_version_flag("--version", std::string("fairlane-pdfgen ") + fairlane::kVersion);
  int pages = 0;
  std::string out;
  std::uint64_t seed = 1;
  fairlane::PdfWriterOptions options{.title = "A fairlane sample book", .locked = false};
  bool no_text = false;
  app.add_option("--pages", pages, "Number of pages (0: an empty page tree)")
      ->required()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--out", out, "The PDF file to write ('-': standard output)")->required();
  app.add_option("--seed", seed, "Seed of the text: the same seed, the same book")
      ->capture_default_str();
  app.add_option("--title", options.title, "The document's title")->capture_default_str();
  app.add_flag("--encrypted", options.locked,
               "Write a PDF that is encrypted with a password nobody knows");
  app.add_flag("--no-text", no_text, "Write pages without text, like a scan without OCR");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  const std::vector<std::string> book =
      no_text ? std::vector<std::string>(static_cast<std::size_t>(pages))
              : fairlane::pdfgen::generate_book(pages, seed);
  const std::string pdf = fairlane::write_pdf(book, options);
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
