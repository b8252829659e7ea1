// A book's PDF with scanned pages: the whole book is written as text first, then poppler
// renders the pages that are to be scans (gray8, antialiased as a scanner's sensor blurs),
// and the book is written again with those pages holding only their images.
#include "book_pdf.hpp"

#include <poppler-document.h>
#include <poppler-image.h>
#include <poppler-page-renderer.h>
#include <poppler-page.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "book.hpp"
#include "splitmix64.hpp"

namespace fairlane::pdfgen {
namespace {

// A rendered page: its pixels, row after row with no padding, and its page's size.
struct Scan {
  std::vector<unsigned char> pixels;
  int width_px = 0;
  int height_px = 0;
  int width_pt = 0;
  int height_pt = 0;
};

// A few specks of dust, each a dot of one to nine pixels in a grey between dark and light,
// darkening what is under it; where they fall comes from the seed and the page alone.
void add_specks(Scan& scan, std::uint64_t seed, int page) {
  SplitMix64 random(seed ^ (0xD1B54A32D192ED03u * static_cast<std::uint64_t>(page + 1)));
  const int specks = random.between(12, 40);
  for (int i = 0; i < specks; ++i) {
    const int x = random.between(0, scan.width_px - 1);
    const int y = random.between(0, scan.height_px - 1);
    const int radius = random.between(0, 1);
    const auto grey = static_cast<unsigned char>(random.between(60, 200));
    for (int dy = -radius; dy <= radius; ++dy) {
      for (int dx = -radius; dx <= radius; ++dx) {
        const int px = x + dx;
        const int py = y + dy;
        if (px < 0 || py < 0 || px >= scan.width_px || py >= scan.height_px) continue;
        unsigned char& pixel =
            scan.pixels[static_cast<std::size_t>(py) * static_cast<std::size_t>(scan.width_px) +
                        static_cast<std::size_t>(px)];
        pixel = std::min(pixel, grey);
      }
    }
  }
}

Scan render(const poppler::page& page, int dpi) {
  const poppler::rectf box = page.page_rect(poppler::media_box);
  Scan scan;
  scan.width_pt = static_cast<int>(std::lround(box.width()));
  scan.height_pt = static_cast<int>(std::lround(box.height()));
  const int longest_pt = std::max(scan.width_pt, scan.height_pt);
  const double resolution = std::min<double>(dpi, kMaxScanSide_px * 72.0 / longest_pt);

  poppler::page_renderer renderer;
  renderer.set_image_format(poppler::image::format_gray8);
  renderer.set_render_hint(poppler::page_renderer::antialiasing);
  renderer.set_render_hint(poppler::page_renderer::text_antialiasing);
  const poppler::image image = renderer.render_page(&page, resolution, resolution);
  if (!image.is_valid() || image.width() <= 0 || image.height() <= 0) {
    throw std::runtime_error("poppler could not render a page of the book");
  }
  scan.width_px = image.width();
  scan.height_px = image.height();
  const auto width = static_cast<std::size_t>(scan.width_px);
  scan.pixels.resize(width * static_cast<std::size_t>(scan.height_px));
  const char* data = image.const_data();
  for (std::size_t row = 0; row < static_cast<std::size_t>(scan.height_px); ++row) {
    const char* from = data + row * static_cast<std::size_t>(image.bytes_per_row());
    std::copy_n(reinterpret_cast<const unsigned char*>(from), width,
                scan.pixels.begin() + static_cast<std::ptrdiff_t>(row * width));
  }
  return scan;
}

}  // namespace

std::optional<std::vector<PageKind>> parse_page_kinds(std::string_view letters) {
  std::vector<PageKind> kinds;
  for (const char letter : letters) {
    switch (letter) {
      case 't':
        kinds.push_back(PageKind::text);
        break;
      case 's':
        kinds.push_back(PageKind::scanned);
        break;
      case 'b':
        kinds.push_back(PageKind::blank);
        break;
      default:
        return std::nullopt;
    }
  }
  return kinds;
}

std::string write_book_pdf(const std::vector<PageKind>& kinds, const BookPdfOptions& options) {
  const int count = static_cast<int>(kinds.size());
  const std::vector<std::string> book = generate_book(count, options.seed);
  std::vector<PdfPage> pages(kinds.size());
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    if (kinds[i] != PageKind::blank) pages[i].text = book[i];
    pages[i].width_pt = options.width_pt;
    pages[i].height_pt = options.height_pt;
  }
  if (std::find(kinds.begin(), kinds.end(), PageKind::scanned) == kinds.end()) {
    return write_pages_pdf(pages, options.pdf);
  }

  // The text pages, unlocked whatever the book will be, so poppler can open them.
  const std::string text_pdf = write_pages_pdf(pages, {});
  const std::unique_ptr<poppler::document> document(
      poppler::document::load_from_raw_data(text_pdf.data(), static_cast<int>(text_pdf.size())));
  if (!document || document->pages() != count) {
    throw std::runtime_error("poppler could not open the book's text pages");
  }
  std::vector<Scan> scans(kinds.size());
  for (int i = 0; i < count; ++i) {
    const auto at = static_cast<std::size_t>(i);
    if (kinds[at] != PageKind::scanned) continue;
    const std::unique_ptr<poppler::page> page(document->create_page(i));
    if (!page) throw std::runtime_error(fmt::format("poppler could not read page {}", i + 1));
    scans[at] = render(*page, options.scan_dpi);
    if (options.specks) add_specks(scans[at], options.seed, i);
    pages[at] = PdfPage{.text = {},
                        .image = GrayPixels{.data = scans[at].pixels.data(),
                                            .width = scans[at].width_px,
                                            .height = scans[at].height_px,
                                            .stride = static_cast<std::size_t>(scans[at].width_px)},
                        .width_pt = scans[at].width_pt,
                        .height_pt = scans[at].height_pt};
  }
  return write_pages_pdf(pages, options.pdf);
}

}  // namespace fairlane::pdfgen
