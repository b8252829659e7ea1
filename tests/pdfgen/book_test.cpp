#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "book.hpp"
#include "document/pdf_writer.hpp"
#include "fairlane/document/document.hpp"

using fairlane::pdfgen::generate_book;

TEST_CASE(
    "pdfgen: a generated book's pages say Page K of N, and the same seed gives the same book") {
  const std::vector<std::string> book = generate_book(3, 7);
  REQUIRE(book.size() == 3);
  CHECK(book[0].starts_with("Page 1 of 3\n\n"));
  CHECK(book[1].starts_with("Page 2 of 3\n\n"));
  CHECK(book[2].starts_with("Page 3 of 3\n\n"));
  CHECK(book[0].size() > 1000);
  CHECK(generate_book(3, 7) == book);
  CHECK(generate_book(3, 8) != book);
  CHECK(generate_book(0, 7).empty());
}

TEST_CASE("pdfgen: a generated book survives write_pdf and split_pdf page for page") {
  const std::vector<std::string> book = generate_book(5, 42);
  const auto pages = fairlane::split_pdf(fairlane::write_pdf(book));
  REQUIRE(pages.ok());
  REQUIRE(pages->size() == 5);
  for (std::size_t i = 0; i < book.size(); ++i) {
    CAPTURE(i);
    CHECK((*pages)[i].starts_with("Page " + std::to_string(i + 1) + " of 5\n"));
    // Wrapping moves line breaks, never words.
    std::string expected = book[i];
    std::string got = (*pages)[i];
    for (auto* text : {&expected, &got}) {
      for (char& c : *text) {
        if (c == '\n') c = ' ';
      }
    }
    auto squeeze = [](const std::string& s) {
      std::string out;
      for (const char c : s) {
        if (c != ' ' || (!out.empty() && out.back() != ' ')) out += c;
      }
      while (!out.empty() && out.back() == ' ') out.pop_back();
      return out;
    };
    CHECK(squeeze(got) == squeeze(expected));
  }
}
