// The reader child's answer read as it arrives: pages handed over as each is whole, and no
// more of the answer held than the page still coming.
#include "document/reader_answer.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fairlane/document/image.hpp"

using fairlane::PageKind;
using fairlane::reader::ReaderAnswer;

namespace {

constexpr std::size_t kChunk = 64 * 1024;  // what one read of the pipe brings at most

// Feeds `answer` in chunks of kChunk; returns the most bytes it held at once, or -1 when it
// refused the answer.
std::int64_t feed(ReaderAnswer& reader, const std::string& answer) {
  std::size_t most = 0;
  for (std::size_t at = 0; at < answer.size(); at += kChunk) {
    if (reader.add(std::string_view(answer).substr(at, kChunk))) return -1;
    most = std::max(most, reader.buffered());
  }
  return static_cast<std::int64_t>(most);
}

}  // namespace

TEST_CASE("ReaderAnswer: holds no more of the answer than the page still coming") {
  // Twenty pages of 1 MB of text and one image: 20 MB in all, each page handed over whole.
  std::vector<unsigned char> pixels(64 * 48, 200);
  const auto png = fairlane::encode_png({pixels.data(), 64, 48, 64});
  REQUIRE(png.ok());
  std::string answer = "ok 21\n";
  std::vector<std::string> texts;
  for (int i = 0; i < 20; ++i) {
    texts.push_back(std::string(1024 * 1024, static_cast<char>('a' + i)));
    answer += "text " + std::to_string(texts.back().size()) + "\n" + texts.back();
  }
  answer += "image image/png 64 48 " + std::to_string(png->size()) + "\n" + *png;
  ReaderAnswer reader(fairlane::PdfReading{});
  const std::int64_t most = feed(reader, answer);
  CHECK(most >= 0);
  CHECK(most <= static_cast<std::int64_t>(1024 * 1024 + kChunk));
  CHECK(reader.buffered() == 0);
  auto pages = reader.finish();
  REQUIRE(pages.ok());
  REQUIRE(pages->size() == 21);
  for (std::size_t i = 0; i < 20; ++i) CHECK((*pages)[i].text == texts[i]);
  CHECK((*pages)[20].kind == PageKind::image);
  CHECK((*pages)[20].image->bytes == *png);
}

TEST_CASE("ReaderAnswer: a small page does not keep a large one's buffer") {
  ReaderAnswer reader(fairlane::PdfReading{});
  const std::string big(1'000'000, 'x');
  // The large page and the small one's line come in one read; the small one's bytes alone.
  CHECK_FALSE(reader.add("ok 2\ntext 1000000\n" + big + "text 3\n"));
  CHECK_FALSE(reader.add("abc"));
  auto pages = reader.finish();
  REQUIRE(pages.ok());
  REQUIRE(pages->size() == 2);
  CHECK((*pages)[0].text == big);
  CHECK((*pages)[1].text == "abc");
  CHECK((*pages)[1].text.capacity() < 10'000);
}

TEST_CASE("ReaderAnswer: an answer cut short, or with bytes past its last page, is not one") {
  ReaderAnswer cut(fairlane::PdfReading{});
  CHECK_FALSE(cut.add("ok 2\ntext 3\nabctext 5\nab"));
  CHECK(cut.finish().status().message() == "a cut answer");
  ReaderAnswer extra(fairlane::PdfReading{});
  CHECK(extra.add("ok 1\nblank\nmore").has_value());
  ReaderAnswer refused(fairlane::PdfReading{});
  CHECK_FALSE(refused.add("ok 2\ntext 1\nxrefused page 2 is damaged\n"));
  CHECK(refused.finish().status().message() == "page 2 is damaged");
  // An image whose bytes are not what its line says.
  ReaderAnswer lying(fairlane::PdfReading{});
  CHECK(lying.add("ok 1\nimage image/png 64 48 4\nabcd").has_value());
}

TEST_CASE("ReaderAnswer: texts and images count against one total, refused at the line past it") {
  std::vector<unsigned char> pixels(64 * 48, 200);
  const auto png = fairlane::encode_png({pixels.data(), 64, 48, 64});
  REQUIRE(png.ok());
  const auto image_bytes = static_cast<std::int64_t>(png->size());
  // A page of 1,000 bytes of text and the image fit; another 1,000 bytes of text do not.
  ReaderAnswer reader(fairlane::PdfReading{.max_total_bytes = 1000 + image_bytes + 999});
  std::string answer = "ok 3\ntext 1000\n" + std::string(1000, 'a') + "image image/png 64 48 " +
                       std::to_string(png->size()) + "\n" + *png;
  CHECK_FALSE(reader.add(answer));
  // Refused from the page's line, before its bytes come.
  const auto refused = reader.add("text 1000\n");
  REQUIRE(refused);
  CHECK(refused->code() == fairlane::StatusCode::payload_too_large);
  CHECK(refused->message() ==
        "the PDF's pages come to more than " + std::to_string(1000 + image_bytes + 999) +
            " bytes of text and images by page 3, more than one upload may hold: split the PDF");
}
