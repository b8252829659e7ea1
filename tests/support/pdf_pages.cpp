#include "support/pdf_pages.hpp"

#include <doctest/doctest.h>
#include <poppler-document.h>
#include <poppler-image.h>
#include <poppler-page-renderer.h>
#include <poppler-page.h>

#include <algorithm>
#include <memory>
#include <sstream>

namespace fairlane::testing {

double PdfPageSeen::ink() const {
  if (gray.empty()) return 0;
  const auto dark =
      std::count_if(gray.begin(), gray.end(), [](unsigned char v) { return v < 128; });
  return static_cast<double>(dark) / static_cast<double>(gray.size());
}

std::vector<PdfPageSeen> see_pdf(const std::string& pdf, double dpi) {
  const std::unique_ptr<poppler::document> document(
      poppler::document::load_from_raw_data(pdf.data(), static_cast<int>(pdf.size())));
  REQUIRE(document != nullptr);
  REQUIRE_FALSE(document->is_locked());
  poppler::page_renderer renderer;
  renderer.set_image_format(poppler::image::format_gray8);
  renderer.set_render_hint(poppler::page_renderer::antialiasing);
  renderer.set_render_hint(poppler::page_renderer::text_antialiasing);
  std::vector<PdfPageSeen> pages;
  for (int i = 0; i < document->pages(); ++i) {
    const std::unique_ptr<poppler::page> page(document->create_page(i));
    REQUIRE(page != nullptr);
    PdfPageSeen seen;
    const auto text = page->text().to_utf8();
    seen.text.assign(text.begin(), text.end());
    // poppler ends each page's text with a form feed, even a page without any.
    while (!seen.text.empty() && seen.text.back() == '\f') seen.text.pop_back();
    const poppler::rectf box = page->page_rect(poppler::media_box);
    seen.width_pt = box.width();
    seen.height_pt = box.height();
    const poppler::image image = renderer.render_page(page.get(), dpi, dpi);
    REQUIRE(image.is_valid());
    seen.width_px = image.width();
    seen.height_px = image.height();
    const auto width = static_cast<std::size_t>(image.width());
    for (int row = 0; row < image.height(); ++row) {
      const auto* from =
          reinterpret_cast<const unsigned char*>(image.const_data()) +
          static_cast<std::size_t>(row) * static_cast<std::size_t>(image.bytes_per_row());
      seen.gray.insert(seen.gray.end(), from, from + width);
    }
    pages.push_back(std::move(seen));
  }
  return pages;
}

void check_xref(const std::string& pdf, int objects) {
  const std::size_t startxref = pdf.rfind("startxref\n");
  REQUIRE(startxref != std::string::npos);
  const std::size_t xref = std::stoul(pdf.substr(startxref + 10));
  REQUIRE(pdf.compare(xref, 5, "xref\n") == 0);
  std::istringstream table(pdf.substr(xref + 5));
  int first = -1;
  int count = 0;
  table >> first >> count;
  CHECK(first == 0);
  CHECK(count == objects + 1);
  std::string offset;
  std::string generation;
  std::string kind;
  table >> offset >> generation >> kind;
  CHECK(kind == "f");
  for (int number = 1; number < count; ++number) {
    table >> offset >> generation >> kind;
    CAPTURE(number);
    CHECK(kind == "n");
    const std::string header = std::to_string(number) + " 0 obj\n";
    CHECK(pdf.compare(std::stoul(offset), header.size(), header) == 0);
  }
}

}  // namespace fairlane::testing
