#include <doctest/doctest.h>
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "document/pdf_writer.hpp"
#include "fairlane/document/document.hpp"
#include "support/pdf_pages.hpp"

using fairlane::GrayPixels;
using fairlane::PdfPage;
using fairlane::PdfWriterOptions;
using fairlane::split_pdf;
using fairlane::StatusCode;
using fairlane::write_pages_pdf;
using fairlane::write_pdf;
using fairlane::testing::check_xref;

namespace {

const std::string kDamaged =
    "the PDF could not be read: it is damaged or truncated; upload the file again";

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

// The message of a split that must fail with invalid_argument.
std::string refusal(const std::string& bytes) {
  const auto pages = split_pdf(bytes);
  REQUIRE_FALSE(pages.ok());
  CHECK(pages.status().code() == StatusCode::invalid_argument);
  return pages.status().message();
}

// zlib's inflate of one stream, each piece of output handed to `take` as it comes.
template <typename Take>
void inflate_each(std::string_view deflated, Take take) {
  z_stream z{};
  REQUIRE(inflateInit(&z) == Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(deflated.data()));
  z.avail_in = static_cast<uInt>(deflated.size());
  std::vector<char> buffer(std::size_t{1} << 20);
  int status = Z_OK;
  while (status == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buffer.data());
    z.avail_out = static_cast<uInt>(buffer.size());
    status = ::inflate(&z, Z_NO_FLUSH);
    take(std::string_view(buffer.data(), buffer.size() - z.avail_out));
  }
  inflateEnd(&z);
  REQUIRE(status == Z_STREAM_END);
}

std::string inflated(std::string_view deflated) {
  std::string out;
  inflate_each(deflated, [&](std::string_view chunk) { out += chunk; });
  return out;
}

std::string page_text(int thread, int page) {
  return "Thread " + std::to_string(thread) + " page " + std::to_string(page + 1);
}

}  // namespace

TEST_CASE("split_pdf of write_pdf gives every page's words back, in order") {
  const std::vector<std::string> pages = {
      "Page 1 of 3\nA first line.\n\nA paragraph after a blank line.",
      "Page 2 of 3\nHello (world), a) b( c\\ and back\\slash \\(both\\)", "Page 3 of 3\nThe end."};
  const auto split = split_pdf(write_pdf(pages));
  REQUIRE(split.ok());
  REQUIRE(split->size() == 3);
  for (std::size_t i = 0; i < pages.size(); ++i) {
    CAPTURE(i);
    CHECK(words((*split)[i]) == words(pages[i]));
  }
  // Lines come back as lines; poppler's reading order does not keep blank ones.
  CHECK((*split)[0] == "Page 1 of 3\nA first line.\nA paragraph after a blank line.\n");
}

TEST_CASE("split_pdf: a page's text ends with exactly one newline") {
  const auto split = split_pdf(write_pdf({"one line\n\n\n", "two\nlines"}));
  REQUIRE(split.ok());
  CHECK((*split)[0] == "one line\n");
  CHECK((*split)[1] == "two\nlines\n");
}

TEST_CASE(
    "write_pdf and split_pdf: Latin-1 and WinAnsi's typographic characters come back as the same "
    "UTF-8") {
  const std::string text = "caf\u00e9 na\u00efve \u201cquoted\u201d \u2014 \u20ac5 \u2022 \u00bd";
  const auto split = split_pdf(write_pdf({text}));
  REQUIRE(split.ok());
  CHECK((*split)[0] == text + "\n");
  // A character WinAnsi lacks is written as '?'.
  const auto greek = split_pdf(write_pdf({"alpha \u03b1 omega"}));
  REQUIRE(greek.ok());
  CHECK((*greek)[0] == "alpha ? omega\n");
}

TEST_CASE("write_pdf: long lines wrap and long pages grow, and no word is lost") {
  std::string paragraph;
  for (int i = 0; i < 400; ++i) paragraph += "word" + std::to_string(i) + " ";
  std::string many_lines;
  for (int i = 0; i < 120; ++i) many_lines += "line " + std::to_string(i) + "\n";
  const std::string unbroken(500, 'x');
  const std::vector<std::string> pages = {paragraph, many_lines, unbroken};
  const auto split = split_pdf(write_pdf(pages));
  REQUIRE(split.ok());
  REQUIRE(split->size() == 3);
  CHECK(words((*split)[0]) == words(paragraph));
  CHECK(std::count((*split)[0].begin(), (*split)[0].end(), '\n') > 10);
  CHECK(words((*split)[1]) == words(many_lines));
  // The unbroken word is cut at the margin: the same letters, on several lines.
  std::string letters;
  for (const auto& word : words((*split)[2])) letters += word;
  CHECK(letters == unbroken);
  CHECK(words((*split)[2]).size() > 1);
}

TEST_CASE("split_pdf: empty pages between pages with text are kept as empty strings") {
  const auto split = split_pdf(write_pdf({"", "Page two", "", "  \n ", "Page five"}));
  REQUIRE(split.ok());
  CHECK(*split == std::vector<std::string>{"", "Page two\n", "", "", "Page five\n"});
}

TEST_CASE("split_pdf: a truncated PDF is refused as damaged") {
  const std::string pdf = write_pdf({"Page 1 of 2\nSome text.", "Page 2 of 2\nMore text."});
  REQUIRE(split_pdf(pdf).ok());
  CHECK(refusal(pdf.substr(0, pdf.size() / 2)) == kDamaged);
  // Wherever the upload was cut, short of the end-of-file marker.
  for (const std::size_t size :
       {std::size_t{9}, pdf.size() / 10, pdf.size() * 9 / 10, pdf.size() - 7}) {
    CAPTURE(size);
    CHECK(refusal(pdf.substr(0, size)) == kDamaged);
  }
  // Cut to nothing, it is no PDF at all.
  CHECK(refusal(pdf.substr(0, 0)) ==
        "this is not a PDF, so it could not be read: the file is empty");
}

TEST_CASE("split_pdf: bytes that are not a PDF are refused as not a PDF, quoting their start") {
  CHECK(refusal(R"({"name": "book", "pages": ["one", "two"]})") ==
        R"(this is not a PDF but JSON, so it could not be read: it starts with )"
        R"("{\"name\": \"book\", \"pa" (a PDF starts with %PDF-); upload the PDF itself)");
  CHECK(refusal("hello, this is a text file\n") ==
        "this is not a PDF but text, so it could not be read: it starts with "
        "\"hello, this is a tex\" (a PDF starts with %PDF-); upload the PDF itself");
  CHECK(refusal("") == "this is not a PDF, so it could not be read: the file is empty");
  CHECK(refusal(std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\x01\0", 20) + "more") ==
        "this is not a PDF but a PNG image, so it could not be read: it starts with "
        "\"\\x89PNG\\r\\n\\x1a\\n\\x00\\x00\\x00\\rIHDR\\x00\\x00\\x01\\x00\" (a PDF "
        "starts with %PDF-); upload the PDF itself");
  CHECK(refusal("\xff\xd8\xff\xe0\0\x10JFIF").find("but a JPEG image,") != std::string::npos);
  CHECK(refusal("PK\x03\x04\x14\0\x06\0")
            .find("but a ZIP archive (a Word or other Office "
                  "document?),") != std::string::npos);
  CHECK(refusal("\n  <!DOCTYPE html><html>").find("but an HTML page,") != std::string::npos);
  CHECK(refusal("<html><body>Not found").find("but an HTML page,") != std::string::npos);

  std::string noise(4096, '\0');
  std::uint32_t state = 12345;
  for (char& c : noise) {
    state = state * 1664525u + 1013904223u;
    c = static_cast<char>(state >> 24);
  }
  const std::string said = refusal(noise);
  CHECK(said.rfind("this is not a PDF, so it could not be read: it starts with \"", 0) == 0);
  // A hostile start cannot put control characters or raw bytes into the message, and a
  // quote in it cannot end the quotation early.
  const std::string hostile = refusal("\x1b[2J\r\"\\\x7f\x80\n\ttext");
  CHECK(hostile.find(R"("\x1b[2J\r\"\\\x7f\x80\n\ttext")") != std::string::npos);
  for (const std::string& message : {said, hostile}) {
    CAPTURE(message);
    CHECK(std::all_of(message.begin(), message.end(), [](char c) { return c >= ' ' && c <= '~'; }));
  }
  // A PDF's header and footer around nothing readable.
  CHECK(refusal("%PDF-1.4\nnot really\n%%EOF\n") == kDamaged);
}

TEST_CASE("split_pdf: a JSON file sent as a multipart upload's file is refused as not a PDF") {
  const std::string json = R"({"pages": ["one"]})";
  const auto file = fairlane::multipart_file(
      "multipart/form-data; boundary=b",
      "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"book.json\"\r\n"
      "Content-Type: application/json\r\n\r\n" +
          json + "\r\n--b--\r\n");
  REQUIRE(file.ok());
  CHECK(refusal(file->data) == refusal(json));
  CHECK(refusal(file->data).rfind("this is not a PDF but JSON,", 0) == 0);
}

TEST_CASE("split_pdf: junk before the header, within the first 1024 bytes, is allowed") {
  const std::vector<std::string> pages = {"Page 1 of 2\nAfter junk.", "Page 2 of 2\nThe end."};
  const std::string pdf = write_pdf(pages);
  for (const std::size_t junk : {std::size_t{1}, std::size_t{100}, std::size_t{1018}}) {
    CAPTURE(junk);
    const auto split = split_pdf(std::string(junk - 1, 'j') + "\n" + pdf);
    REQUIRE(split.ok());
    REQUIRE(split->size() == 2);
    CHECK(words((*split)[0]) == words(pages[0]));
    CHECK(words((*split)[1]) == words(pages[1]));
  }
  // Further on, the file is not a PDF (poppler looks no further).
  CHECK(refusal(std::string(1019, 'j') + pdf).rfind("this is not a PDF but text,", 0) == 0);
}

TEST_CASE("split_pdf: padding after %%EOF, as viewers read it, is allowed") {
  const std::vector<std::string> pages = {"Page 1 of 2\nPadded.", "Page 2 of 2\nStill read."};
  const std::string pdf = write_pdf(pages);
  for (const std::string& padding :
       {std::string(4096, '\0'), std::string(4096, ' '), std::string(4096, '\n'),
        std::string(70'000, '\0'), std::string("\r\n\0 \t\f") + std::string(8000, '\0')}) {
    CAPTURE(padding.size());
    const auto split = split_pdf(pdf + padding);
    REQUIRE(split.ok());
    REQUIRE(split->size() == 2);
    CHECK((*split)[0] == "Page 1 of 2\nPadded.\n");
    CHECK((*split)[1] == "Page 2 of 2\nStill read.\n");
  }
}

TEST_CASE("split_pdf: an incremental update cut short after a complete revision is refused") {
  // The first revision ends in %%EOF; the update appended after it was cut in its objects.
  const std::string pdf = write_pdf({"Page 1 of 1\nFirst revision."});
  const std::string update =
      "4 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R >>\n"
      "endobj\n5 0 obj\n<< /Length 44 >>\nstream\nBT /F1 12 Tf 72 720 Td (Second revi";
  CHECK(refusal(pdf + update) == kDamaged);
  CHECK(refusal(pdf + "\n" + update.substr(0, 10)) == kDamaged);
}

TEST_CASE("split_pdf: an encrypted PDF is refused with the remedy") {
  const std::string locked =
      write_pdf({"Page 1 of 1\nSecret."}, PdfWriterOptions{.title = {}, .locked = true});
  CHECK(refusal(locked) == "the PDF is encrypted: remove the password and upload it again");
}

TEST_CASE("split_pdf: a PDF with an empty page tree is refused as having no pages") {
  const std::string pdf = write_pdf({});
  CHECK(pdf.find("/Kids [] /Count 0") != std::string::npos);
  CHECK(refusal(pdf) ==
        "the PDF has no pages that can be counted (its page tree's /Count is 0, missing or out "
        "of range): if a viewer shows pages in it, its page tree is damaged; export it again "
        "(print to PDF) and upload that");
}

TEST_CASE("split_pdf: a page tree that counts more pages than it holds names the missing page") {
  // A writer's bug, or an edit cut short: /Count says 5, the tree holds 3.
  std::string pdf = write_pdf({"Page 1 of 3", "Page 2 of 3", "Page 3 of 3"});
  const auto at = pdf.find("/Count 3");
  REQUIRE(at != std::string::npos);
  pdf.replace(at, 8, "/Count 5");  // the same length: the cross-references still hold
  CHECK(refusal(pdf) ==
        "page 4 of the 5 the PDF's page tree counts is missing: its page tree "
        "is damaged; export it again (print to PDF) and upload that");
}

TEST_CASE("split_pdf: a PDF whose pages have no text at all is refused as needing OCR") {
  CHECK(refusal(write_pdf({"", "", ""})) ==
        "the PDF has no text layer (scanned images?): run it through OCR first");
}

TEST_CASE("write_pdf: the title goes into the document information as UTF-16") {
  const std::string pdf = write_pdf({"x"}, PdfWriterOptions{.title = "Caf\u00e9", .locked = false});
  CHECK(pdf.find("/Title <FEFF00430061006600E9>") != std::string::npos);
}

TEST_CASE("write_pdf: the cross-reference table points at every object") {
  // The catalog, pages, font, 2 x (page, content), info, encrypt.
  check_xref(write_pdf({"one", "two"}, PdfWriterOptions{.title = {}, .locked = true}), 9);
}

TEST_CASE("write_pages_pdf: the cross-reference table points at every object, images included") {
  const std::vector<unsigned char> pixels(40 * 30, 128);
  const GrayPixels image{.data = pixels.data(), .width = 40, .height = 30, .stride = 40};
  const std::string pdf = write_pages_pdf(
      {PdfPage{.text = "one", .image = {}, .width_pt = 0, .height_pt = 0},
       PdfPage{.text = {}, .image = image, .width_pt = 300, .height_pt = 200},
       PdfPage{.text = {}, .image = {}, .width_pt = 0, .height_pt = 0},
       PdfPage{.text = "over an image", .image = image, .width_pt = 0, .height_pt = 0}},
      PdfWriterOptions{.title = "Images", .locked = true});
  // The catalog, pages, font, 4 x (page, content), 2 images, info, encrypt.
  check_xref(pdf, 15);
  check_xref(fairlane::write_flate_bomb_pdf({.side_px = 100, .width_pt = 0, .height_pt = 0}), 7);
}

TEST_CASE(
    "write_pages_pdf: pages of text alone are written byte for byte as write_pdf writes them") {
  const std::vector<std::string> texts = {"Page 1 of 3\nOne.", "", "Page 3 of 3\nThree."};
  std::vector<PdfPage> pages;
  for (const auto& text : texts)
    pages.push_back({.text = text, .image = {}, .width_pt = 0, .height_pt = 0});
  const PdfWriterOptions options{.title = "Same", .locked = true};
  CHECK(write_pages_pdf(pages, options) == write_pdf(texts, options));
  CHECK(write_pages_pdf({}) == write_pdf({}));
}

TEST_CASE(
    "write_pages_pdf: an image fills its page whatever its pixels, as a gray Flate image with no "
    "text") {
  // 60 x 20 pixels, the left half black and the right white, on a 300 x 100 pt page.
  std::vector<unsigned char> pixels(64 * 20, 255);  // a stride of 64
  for (std::size_t row = 0; row < 20; ++row)
    std::fill_n(pixels.begin() + static_cast<std::ptrdiff_t>(row * 64), 30, 0);
  const GrayPixels image{.data = pixels.data(), .width = 60, .height = 20, .stride = 64};
  const std::string pdf =
      write_pages_pdf({PdfPage{.text = {}, .image = image, .width_pt = 300, .height_pt = 100}});
  CHECK(pdf.find("/Type /XObject /Subtype /Image /Width 60 /Height 20 /ColorSpace /DeviceGray "
                 "/BitsPerComponent 8 /Filter /FlateDecode ") != std::string::npos);
  CHECK(pdf.find("q 300 0 0 100 0 0 cm /Im1 Do Q\n") != std::string::npos);
  CHECK(pdf.find("BT") == std::string::npos);
  const auto seen = fairlane::testing::see_pdf(pdf, 72);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].text.empty());
  CHECK(seen[0].width_pt == 300);
  CHECK(seen[0].height_pt == 100);
  REQUIRE(seen[0].width_px == 300);
  REQUIRE(seen[0].height_px == 100);
  // Away from the edge between the halves, each half is its colour.
  for (const int x : {5, 100, 140})
    CHECK(seen[0].gray[static_cast<std::size_t>(50 * 300 + x)] < 16);
  for (const int x : {160, 200, 295})
    CHECK(seen[0].gray[static_cast<std::size_t>(50 * 300 + x)] > 240);
  CHECK(refusal(pdf) == "the PDF has no text layer (scanned images?): run it through OCR first");
}

TEST_CASE("write_pages_pdf: text over an image is read back, and blank pages stay blank") {
  const std::vector<unsigned char> pixels(10 * 10, 200);
  const GrayPixels light{.data = pixels.data(), .width = 10, .height = 10, .stride = 10};
  const std::string pdf =
      write_pages_pdf({PdfPage{.text = "Page 1 of 2\nA scan with its OCR.",
                               .image = light,
                               .width_pt = 0,
                               .height_pt = 0},
                       PdfPage{.text = {}, .image = {}, .width_pt = 1000, .height_pt = 500}});
  const auto split = split_pdf(pdf);
  REQUIRE(split.ok());
  CHECK(*split == std::vector<std::string>{"Page 1 of 2\nA scan with its OCR.\n", ""});
  const auto seen = fairlane::testing::see_pdf(pdf);
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].width_pt == 612);
  CHECK(seen[0].height_pt == 792);
  CHECK(seen[0].ink() > 0);
  CHECK(seen[1].width_pt == 1000);
  CHECK(seen[1].height_pt == 500);
  CHECK(std::all_of(seen[1].gray.begin(), seen[1].gray.end(),
                    [](unsigned char v) { return v == 255; }));
}

TEST_CASE("write_pages_pdf: a page may be huge, its text still at the top left") {
  const std::string pdf = write_pages_pdf({PdfPage{
      .text = "Page 1 of 1\nOn a huge page.", .image = {}, .width_pt = 14400, .height_pt = 14400}});
  CHECK(pdf.find("/MediaBox [0 0 14400 14400]") != std::string::npos);
  const auto split = split_pdf(pdf);
  REQUIRE(split.ok());
  CHECK((*split)[0] == "Page 1 of 1\nOn a huge page.\n");
}

TEST_CASE(
    "write_flate_bomb_pdf: a few kilobytes on disk that declare a 30000 x 30000 image and inflate "
    "to 900 MB") {
  const std::string pdf = fairlane::write_flate_bomb_pdf({});
  CHECK(pdf.size() < 16 * 1024);
  CHECK(pdf.find("/Width 30000 /Height 30000 /ColorSpace /DeviceGray /BitsPerComponent 8 "
                 "/Filter [/FlateDecode /FlateDecode] /Length ") != std::string::npos);
  // The stream inflated twice, counted as it comes: 900,000,000 zero bytes.
  const std::size_t length_at = pdf.find("/Length ", pdf.find("/Subtype /Image"));
  REQUIRE(length_at != std::string::npos);
  const std::size_t length = std::stoul(pdf.substr(length_at + 8));
  const std::size_t data_at = pdf.find(">>\nstream\n", length_at) + 10;
  REQUIRE(data_at + length < pdf.size());
  CHECK(pdf.compare(data_at + length, 10, "\nendstream") == 0);
  const std::string once = inflated(pdf.substr(data_at, length));
  std::uint64_t bytes = 0;
  bool zeros = true;
  const std::string nothing(std::size_t{1} << 20, '\0');  // inflate_each's largest piece
  inflate_each(once, [&](std::string_view chunk) {
    bytes += chunk.size();
    zeros = zeros && chunk == std::string_view(nothing).substr(0, chunk.size());
  });
  CHECK(bytes == 900'000'000u);
  CHECK(zeros);
  // A page with no text: a reader takes it for a scan, to be rendered.
  CHECK(refusal(pdf) == "the PDF has no text layer (scanned images?): run it through OCR first");
  CHECK(pdf.find("/MediaBox [0 0 612 792]") != std::string::npos);
  // On a huge page, the rendering is huge as well.
  const std::string huge =
      fairlane::write_flate_bomb_pdf({.side_px = 300, .width_pt = 14400, .height_pt = 14400});
  CHECK(huge.find("/MediaBox [0 0 14400 14400]") != std::string::npos);
  CHECK(huge.find("q 14400 0 0 14400 0 0 cm /Im1 Do Q") != std::string::npos);
}

TEST_CASE("split_pdf runs on several threads at once, each with its own PDF") {
  constexpr int kThreads = 4;
  constexpr int kRounds = 10;
  std::vector<std::string> pdfs;
  for (int t = 0; t < kThreads; ++t) {
    std::vector<std::string> pages;
    for (int p = 0; p <= t; ++p) pages.push_back(page_text(t, p));
    pdfs.push_back(write_pdf(pages));
  }
  std::vector<int> correct(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        const auto split = split_pdf(pdfs[static_cast<std::size_t>(t)]);
        bool same = split.ok() && split->size() == static_cast<std::size_t>(t) + 1;
        for (int p = 0; same && p <= t; ++p) {
          same = (*split)[static_cast<std::size_t>(p)] == page_text(t, p) + "\n";
        }
        if (same) ++correct[static_cast<std::size_t>(t)];
      }
      // A damaged one on the side: errors do not disturb the other threads.
      if (!split_pdf("%PDF-1.4\n%%EOF\n").ok()) ++correct[static_cast<std::size_t>(t)];
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(correct == std::vector<int>(kThreads, kRounds + 1));
}

TEST_CASE("split_pdf: a page with more text than max_page_bytes is refused naming the page") {
  std::string long_page;
  for (int i = 0; i < 800; ++i) long_page += "word" + std::to_string(i) + " ";
  const std::string pdf = write_pdf({"Page 1 of 3\nShort.", long_page, "Page 3 of 3"});
  const auto whole = split_pdf(pdf);
  REQUIRE(whole.ok());
  const std::size_t bytes = (*whole)[1].size();
  REQUIRE(bytes > 4096);
  const auto pages = split_pdf(pdf, 0, 4096);
  REQUIRE_FALSE(pages.ok());
  CHECK(pages.status().code() == StatusCode::payload_too_large);
  CHECK(pages.status().message() ==
        "page 2 has " + std::to_string(bytes) +
            " bytes of text; a page may have at most 4096 (--max-page-kb): split the page");
  // Exactly at the limit is allowed.
  CHECK(split_pdf(pdf, 0, static_cast<std::int64_t>(bytes)).ok());
}

TEST_CASE("read_pdf: pages whose texts together pass max_total_bytes are refused as they come") {
  // Each page well within max_page_bytes; a small PDF can hold thousands of them, and their
  // texts are held until the upload is committed.
  const std::string pdf =
      write_pdf({"Page 1 of 3\nOne.", "Page 2 of 3\nTwo.", "Page 3 of 3\nThree."});
  const auto whole = split_pdf(pdf);
  REQUIRE(whole.ok());
  const auto first = static_cast<std::int64_t>((*whole)[0].size());
  std::int64_t handed_over = 0;
  const fairlane::Status read = fairlane::read_pdf(
      pdf,
      fairlane::PdfReading{.input = fairlane::PageInputMode::text, .max_total_bytes = first + 1},
      [](std::int64_t) { return fairlane::Status(); },
      [&](const fairlane::DocumentPage&) {
        ++handed_over;
        return fairlane::Status();
      });
  CHECK(read.code() == StatusCode::payload_too_large);
  CHECK(read.message() == fmt::format("the PDF's pages come to more than {} bytes of text and "
                                      "images by page 2, more than one upload may hold: split "
                                      "the PDF",
                                      first + 1));
  CHECK(handed_over == 1);  // the reading stopped at page 2, not after page 3
}
