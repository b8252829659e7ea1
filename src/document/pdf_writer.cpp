// The minimal PDF writer: every object is written in order, its byte offset noted for the
// cross-reference table. Objects: 1 the catalog, 2 the page tree, 3 the font, then per page
// the page, its content stream and (when it has one) its image, then the document
// information and (locked) the encryption dictionary.
#include "document/pdf_writer.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

namespace fairlane {
namespace {

// US Letter, one-inch margins, 11 pt text on 14 pt lines.
constexpr int kPageWidth_pt = 612;
constexpr int kMinPageHeight_pt = 792;
constexpr int kMargin_pt = 72;
constexpr int kFontSize_pt = 11;
constexpr int kLeading_pt = 14;
// The width a line may take, in the font's units (1000 per em).
constexpr double kLineWidth_units = (kPageWidth_pt - 2.0 * kMargin_pt) * 1000.0 / kFontSize_pt;

// Helvetica's advance widths for the ASCII characters 32 to 126 (Adobe's AFM), in units
// of 1/1000 em. Anything above is counted as a full em, the widest a WinAnsi glyph gets,
// so a line can only come out shorter than the page, never wider.
constexpr std::array<std::uint16_t, 95> kHelveticaWidths = {
    278,  278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278,  // ' '-'/'
    556,  556, 556, 556, 556, 556, 556, 556, 556, 556, 278, 278, 584, 584, 584, 556,  // '0'-'?'
    1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778,  // '@'-'O'
    667,  778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556,  // 'P'-'_'
    333,  556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556,  // '`'-'o'
    556,  556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584};      // 'p'-'~'

double width_units(std::string_view winansi) {
  double width = 0;
  for (const char c : winansi) {
    const auto byte = static_cast<unsigned char>(c);
    width += byte >= 32 && byte <= 126 ? kHelveticaWidths[byte - 32u] : 1000.0;
  }
  return width;
}

// The next code point of UTF-8 text, advancing `pos`; U+FFFD for a malformed sequence.
char32_t next_code_point(std::string_view text, std::size_t& pos) {
  const auto lead = static_cast<unsigned char>(text[pos++]);
  if (lead < 0x80) return lead;
  int extra = 0;
  char32_t cp = 0;
  if ((lead & 0xE0u) == 0xC0u) {
    extra = 1;
    cp = lead & 0x1Fu;
  } else if ((lead & 0xF0u) == 0xE0u) {
    extra = 2;
    cp = lead & 0x0Fu;
  } else if ((lead & 0xF8u) == 0xF0u) {
    extra = 3;
    cp = lead & 0x07u;
  } else {
    return U'\uFFFD';
  }
  for (int i = 0; i < extra; ++i) {
    if (pos >= text.size() || (static_cast<unsigned char>(text[pos]) & 0xC0u) != 0x80u) {
      return U'\uFFFD';
    }
    cp = (cp << 6) | (static_cast<unsigned char>(text[pos++]) & 0x3Fu);
  }
  return cp > 0x10FFFF ? U'\uFFFD' : cp;
}

// A code point in WinAnsiEncoding (Windows-1252), or '?' when it has none.
char to_winansi(char32_t cp) {
  if (cp == U'\t') return ' ';
  if (cp < 0x20 || cp == 0x7F) return '?';
  if (cp < 0x7F || (cp >= 0xA0 && cp <= 0xFF)) return static_cast<char>(cp);
  // The code points Windows-1252 puts at 0x80 to 0x9F.
  static constexpr std::array<std::pair<char32_t, unsigned char>, 27> kHigh = {{
      {0x20AC, 0x80}, {0x201A, 0x82}, {0x0192, 0x83}, {0x201E, 0x84}, {0x2026, 0x85},
      {0x2020, 0x86}, {0x2021, 0x87}, {0x02C6, 0x88}, {0x2030, 0x89}, {0x0160, 0x8A},
      {0x2039, 0x8B}, {0x0152, 0x8C}, {0x017D, 0x8E}, {0x2018, 0x91}, {0x2019, 0x92},
      {0x201C, 0x93}, {0x201D, 0x94}, {0x2022, 0x95}, {0x2013, 0x96}, {0x2014, 0x97},
      {0x02DC, 0x98}, {0x2122, 0x99}, {0x0161, 0x9A}, {0x203A, 0x9B}, {0x0153, 0x9C},
      {0x017E, 0x9E}, {0x0178, 0x9F},
  }};
  for (const auto& [code_point, byte] : kHigh) {
    if (code_point == cp) return static_cast<char>(byte);
  }
  return '?';
}

// One line of UTF-8 (no '\n') in WinAnsi; carriage returns are dropped.
std::string winansi_line(std::string_view utf8) {
  std::string out;
  out.reserve(utf8.size());
  for (std::size_t pos = 0; pos < utf8.size();) {
    const char32_t cp = next_code_point(utf8, pos);
    if (cp != U'\r') out += to_winansi(cp);
  }
  return out;
}

// The line broken at spaces into lines no wider than the page's text width; runs of spaces
// become one. A word wider than a line on its own is cut where it reaches the margin.
void wrap(std::string_view line, std::vector<std::string>& out) {
  const double space = kHelveticaWidths[0];
  std::string current;
  double current_width = 0;
  auto flush = [&] {
    out.push_back(std::move(current));
    current.clear();
    current_width = 0;
  };
  bool wrote = false;
  for (std::size_t pos = 0; pos <= line.size();) {
    const std::size_t end = std::min(line.find(' ', pos), line.size());
    std::string_view word = line.substr(pos, end - pos);
    pos = end + 1;
    if (word.empty()) continue;
    double word_width = width_units(word);
    while (word_width > kLineWidth_units) {
      std::size_t fits = 1;
      while (fits < word.size() && width_units(word.substr(0, fits + 1)) <= kLineWidth_units) {
        ++fits;
      }
      if (!current.empty()) flush();
      current.assign(word.substr(0, fits));
      flush();
      wrote = true;
      word.remove_prefix(fits);
      word_width = width_units(word);
    }
    if (word.empty()) continue;
    if (current.empty()) {
      current.assign(word);
      current_width = word_width;
    } else if (current_width + space + word_width <= kLineWidth_units) {
      current += ' ';
      current += word;
      current_width += space + word_width;
    } else {
      flush();
      current.assign(word);
      current_width = word_width;
    }
  }
  if (!current.empty() || !wrote) out.push_back(std::move(current));
}

// A PDF literal string: the bytes between parentheses, with \, ( and ) escaped.
std::string literal(std::string_view bytes) {
  std::string out = "(";
  for (const char c : bytes) {
    if (c == '\\' || c == '(' || c == ')') out += '\\';
    out += c;
  }
  out += ')';
  return out;
}

// A PDF text string for UTF-8 text: UTF-16BE with a byte order mark, in hex.
std::string utf16_hex(std::string_view utf8) {
  std::string out = "<FEFF";
  for (std::size_t pos = 0; pos < utf8.size();) {
    char32_t cp = next_code_point(utf8, pos);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      out += fmt::format("{:04X}{:04X}", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FFu));
    } else {
      out += fmt::format("{:04X}", static_cast<std::uint32_t>(cp));
    }
  }
  out += '>';
  return out;
}

// The content stream and size of one page.
struct PageContent {
  std::string stream;
  int width_pt = kPageWidth_pt;
  int height_pt = kMinPageHeight_pt;
};

// The text's content stream on a page of at least `width_pt` x `height_pt` (0: Letter's),
// and at least Letter when there is text.
PageContent page_content(std::string_view text, int width_pt, int height_pt) {
  std::vector<std::string> lines;
  for (std::size_t pos = 0; pos <= text.size();) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    wrap(winansi_line(text.substr(pos, end - pos)), lines);
    pos = end + 1;
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();

  PageContent page;
  page.width_pt = width_pt > 0 ? width_pt : kPageWidth_pt;
  page.height_pt = height_pt > 0 ? height_pt : kMinPageHeight_pt;
  if (lines.empty()) return page;
  const auto needed_pt = 2 * kMargin_pt + static_cast<int>(lines.size()) * kLeading_pt;
  page.width_pt = std::max(kPageWidth_pt, page.width_pt);
  page.height_pt = std::max({kMinPageHeight_pt, page.height_pt, needed_pt});
  page.stream = fmt::format("BT\n/F1 {} Tf\n{} TL\n{} {} Td\n", kFontSize_pt, kLeading_pt,
                            kMargin_pt, page.height_pt - kMargin_pt - kFontSize_pt);
  for (const auto& line : lines) {
    if (!line.empty()) {
      page.stream += literal(line);
      page.stream += " Tj\n";
    }
    page.stream += "T*\n";
  }
  page.stream += "ET\n";
  return page;
}

// zlib's deflate at its best compression (level 9), fed by `next`, which fills the buffer
// it is given with the next input and returns how many bytes it put there (0 at the end).
// One zlib gives the same bytes for the same input every time, which the sample books'
// byte-for-byte check relies on (tools/samples); another zlib may compress differently.
template <typename Next>
std::string deflate_from(Next next) {
  z_stream z{};
  if (deflateInit(&z, Z_BEST_COMPRESSION) != Z_OK) throw std::runtime_error("deflateInit failed");
  std::string out;
  std::string input(std::size_t{1} << 20, '\0');
  std::array<char, 1 << 16> buffer{};
  int flush = Z_NO_FLUSH;
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    if (z.avail_in == 0 && flush == Z_NO_FLUSH) {
      const std::size_t got = next(input);
      if (got == 0) flush = Z_FINISH;
      z.next_in = reinterpret_cast<Bytef*>(input.data());
      z.avail_in = static_cast<uInt>(got);
    }
    z.next_out = reinterpret_cast<Bytef*>(buffer.data());
    z.avail_out = static_cast<uInt>(buffer.size());
    status = deflate(&z, flush);
    if (status == Z_STREAM_ERROR) {
      deflateEnd(&z);
      throw std::runtime_error("deflate failed");
    }
    out.append(buffer.data(), buffer.size() - z.avail_out);
  }
  deflateEnd(&z);
  return out;
}

std::string deflated(std::string_view data) {
  std::size_t pos = 0;
  return deflate_from([&](std::string& input) {
    const std::size_t n = std::min(input.size(), data.size() - pos);
    data.copy(input.data(), n, pos);
    pos += n;
    return n;
  });
}

// An image XObject as it is written: its size in pixels, its /Filter and its stream.
struct EncodedImage {
  std::int64_t width_px = 0;
  std::int64_t height_px = 0;
  std::string filter;
  std::string data;
};

// One page as written: its text, its image (or none) and the size asked for, in points (0:
// Letter's), which page_content makes at least what the text needs.
struct PagePlan {
  std::string_view text;
  const EncodedImage* image = nullptr;
  int width_pt = 0;
  int height_pt = 0;
};

// Writes objects one after the other and remembers where each starts.
class Writer {
 public:
  Writer() { out_ = "%PDF-1.4\n%\xE2\xE3\xCF\xD3\n"; }

  // Object `number` must be the next one: numbers start at 1 and have no gaps.
  void object(int number, std::string_view body) {
    offsets_.push_back(out_.size());
    out_ += fmt::format("{} 0 obj\n", number);
    out_ += body;
    out_ += "\nendobj\n";
  }

  // A stream object; `entries` are its dictionary's other entries, each followed by a space.
  void stream(int number, std::string_view data, std::string_view entries = {}) {
    object(number,
           fmt::format("<< {}/Length {} >>\nstream\n{}\nendstream", entries, data.size(), data));
  }

  std::string finish(std::string_view trailer_entries) {
    const std::size_t xref = out_.size();
    out_ += fmt::format("xref\n0 {}\n0000000000 65535 f \n", offsets_.size() + 1);
    for (const std::size_t offset : offsets_) out_ += fmt::format("{:010} 00000 n \n", offset);
    out_ += fmt::format("trailer\n<< /Size {} {} >>\nstartxref\n{}\n%%EOF\n", offsets_.size() + 1,
                        trailer_entries, xref);
    return std::move(out_);
  }

 private:
  std::string out_;
  std::vector<std::size_t> offsets_;
};

// Every writer's PDF: the pages in order, each its page object, content stream and, when it
// has one, its image right after.
std::string write_document(const std::vector<PagePlan>& pages, const PdfWriterOptions& options) {
  const int count = static_cast<int>(pages.size());
  const int first_page = 4;
  std::vector<int> numbers;
  int next = first_page;
  for (const PagePlan& page : pages) {
    numbers.push_back(next);
    next += page.image != nullptr ? 3 : 2;
  }
  const int info = next;
  const int encrypt = info + 1;

  std::string kids;
  for (int i = 0; i < count; ++i) {
    if (i > 0) kids += ' ';
    kids += fmt::format("{} 0 R", numbers[static_cast<std::size_t>(i)]);
  }

  Writer writer;
  writer.object(1, "<< /Type /Catalog /Pages 2 0 R >>");
  writer.object(2, fmt::format("<< /Type /Pages /Kids [{}] /Count {} >>", kids, count));
  writer.object(
      3, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>");
  for (int i = 0; i < count; ++i) {
    const PagePlan& plan = pages[static_cast<std::size_t>(i)];
    PageContent content = page_content(plan.text, plan.width_pt, plan.height_pt);
    const int page = numbers[static_cast<std::size_t>(i)];
    std::string resources;
    if (!content.stream.empty()) resources += "/Font << /F1 3 0 R >>";
    if (plan.image != nullptr) {
      if (!resources.empty()) resources += ' ';
      resources += fmt::format("/XObject << /Im1 {} 0 R >>", page + 2);
      content.stream =
          fmt::format("q {} 0 0 {} 0 0 cm /Im1 Do Q\n", content.width_pt, content.height_pt) +
          content.stream;
    }
    // A page without text keeps write_pdf's font resource, so blank pages are written as
    // they always were.
    if (resources.empty()) resources = "/Font << /F1 3 0 R >>";
    writer.object(page, fmt::format("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {} {}] "
                                    "/Resources << {} >> /Contents {} 0 R >>",
                                    content.width_pt, content.height_pt, resources, page + 1));
    writer.stream(page + 1, content.stream);
    if (plan.image != nullptr) {
      writer.stream(page + 2, plan.image->data,
                    fmt::format("/Type /XObject /Subtype /Image /Width {} /Height {} "
                                "/ColorSpace /DeviceGray /BitsPerComponent 8 /Filter {} ",
                                plan.image->width_px, plan.image->height_px, plan.image->filter));
    }
  }
  std::string info_entries = "/Producer (fairlane pdf_writer)";
  if (!options.title.empty()) info_entries += " /Title " + utf16_hex(options.title);
  writer.object(info, "<< " + info_entries + " >>");

  std::string trailer = fmt::format("/Root 1 0 R /Info {} 0 R", info);
  if (options.locked) {
    // The Standard security handler, RC4 with 40-bit keys (V 1, R 2). /O and /U are 32
    // bytes that no password, the empty one included, hashes to; so the file cannot be
    // opened, and readers say it is encrypted rather than damaged.
    writer.object(encrypt, fmt::format("<< /Filter /Standard /V 1 /R 2 /O <{}> /U <{}> /P -4 >>",
                                       std::string(64, 'A'), std::string(64, '5')));
    trailer += fmt::format(" /Encrypt {} 0 R /ID [<{}> <{}>]", encrypt, std::string(32, '0'),
                           std::string(32, '0'));
  }
  return writer.finish(trailer);
}

bool drawable(const GrayPixels& image) {
  return image.data != nullptr && image.width > 0 && image.height > 0 &&
         image.stride >= static_cast<std::size_t>(image.width);
}

// The image's rows, one after the other without padding, Flate-compressed.
EncodedImage encode(const GrayPixels& image) {
  const auto width = static_cast<std::size_t>(image.width);
  const auto height = static_cast<std::size_t>(image.height);
  std::size_t row = 0;
  std::size_t column = 0;  // a row wider than deflate_from's buffer is taken in pieces
  std::string data = deflate_from([&](std::string& input) {
    std::size_t n = 0;
    while (row < height && n < input.size()) {
      const std::size_t take = std::min(width - column, input.size() - n);
      std::copy_n(image.data + row * image.stride + column, take,
                  input.begin() + static_cast<std::ptrdiff_t>(n));
      n += take;
      column += take;
      if (column == width) {
        column = 0;
        ++row;
      }
    }
    return n;
  });
  return {.width_px = image.width,
          .height_px = image.height,
          .filter = "/FlateDecode",
          .data = std::move(data)};
}

}  // namespace

std::string write_pdf(const std::vector<std::string>& pages, const PdfWriterOptions& options) {
  std::vector<PagePlan> plans;
  plans.reserve(pages.size());
  for (const std::string& text : pages) plans.push_back({.text = text});
  return write_document(plans, options);
}

std::string write_pages_pdf(const std::vector<PdfPage>& pages, const PdfWriterOptions& options) {
  std::vector<EncodedImage> images;
  images.reserve(pages.size());
  std::vector<PagePlan> plans;
  plans.reserve(pages.size());
  for (const PdfPage& page : pages) {
    PagePlan plan{.text = page.text, .width_pt = page.width_pt, .height_pt = page.height_pt};
    if (drawable(page.image)) plan.image = &images.emplace_back(encode(page.image));
    plans.push_back(plan);
  }
  return write_document(plans, options);
}

std::string write_flate_bomb_pdf(const FlateBomb& bomb, const PdfWriterOptions& options) {
  // side_px squared zero bytes deflate about 1,000 to 1 into a stream that repeats itself,
  // which deflates about as well again.
  const std::int64_t side_px = std::max<std::int64_t>(bomb.side_px, 1);
  std::uint64_t left = static_cast<std::uint64_t>(side_px) * static_cast<std::uint64_t>(side_px);
  const std::string once = deflate_from([&](std::string& input) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, input.size()));
    std::fill_n(input.begin(), n, '\0');
    left -= n;
    return n;
  });
  const EncodedImage image{.width_px = side_px,
                           .height_px = side_px,
                           .filter = "[/FlateDecode /FlateDecode]",
                           .data = deflated(once)};
  return write_document(
      {PagePlan{
          .text = {}, .image = &image, .width_pt = bomb.width_pt, .height_pt = bomb.height_pt}},
      options);
}

}  // namespace fairlane
