#include "document/render.hpp"

#include <poppler-image.h>
#include <poppler-page-renderer.h>
#include <poppler-page.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace fairlane::render {

double resolution(double width_pt, double height_pt, const RenderOptions& options) {
  constexpr double kPointsPerInch = 72.0;
  const double long_edge_pt = std::max({width_pt, height_pt, 1.0});
  const double longest_dpi =
      static_cast<double>(options.max_long_edge) * kPointsPerInch / long_edge_pt;
  // Floored a little, so that poppler's rounding up of the pixel size stays within the edge.
  return std::min(options.dpi, std::floor(longest_dpi * 1000.0) / 1000.0);
}

double ink_share(const GrayPixels& pixels) {
  // How far from its paper a pixel must be to be a mark: more than a scan's noise or a
  // JPEG's ringing (a few to twenty levels), less than a pencil stroke or a faded copy (a
  // hundred levels below its paper).
  constexpr int kContrast = 64;
  if (pixels.width <= 0 || pixels.height <= 0) return 0.0;
  std::array<std::int64_t, 256> tones{};
  for (std::int64_t y = 0; y < pixels.height; ++y) {
    const unsigned char* row = pixels.data + static_cast<std::size_t>(y) * pixels.stride;
    for (std::int64_t x = 0; x < pixels.width; ++x) ++tones[row[x]];
  }
  // The paper is the median tone: most of a page is paper, whether white, grey or black.
  const std::int64_t total = pixels.width * pixels.height;
  std::size_t paper = 0;
  for (std::int64_t seen = tones[0]; seen * 2 < total;) seen += tones[++paper];
  // On paper darker than light grey (yellowed, recycled, a grey photocopy) faint marks may
  // be closer to it than that: there a dark mark (below mid-grey) half as far from the
  // paper counts too, as everything below mid-grey once did.
  constexpr int kDark = 128;
  std::int64_t ink = 0;
  for (std::size_t tone = 0; tone < tones.size(); ++tone) {
    const auto distance = std::abs(static_cast<int>(tone) - static_cast<int>(paper));
    if (distance > kContrast || (static_cast<int>(tone) < kDark && distance > kContrast / 2)) {
      ink += tones[tone];
    }
  }
  return static_cast<double>(ink) / static_cast<double>(total);
}

bool is_blank(const GrayPixels& pixels) {
  constexpr double kBlankShare = 1.0 / 50'000.0;
  return ink_share(pixels) < kBlankShare;
}

Result<std::optional<PageImage>> render_page(const poppler::page& page, int number,
                                             const RenderOptions& options, bool keep_blank) {
  const auto cannot = [number] {
    return Status(StatusCode::invalid_argument,
                  fmt::format("page {} of the PDF could not be rendered: it is damaged; export "
                              "the PDF again (print to PDF) and upload that",
                              number));
  };
  // The page as it is shown: its crop box, turned by its /Rotate.
  poppler::rectf box = page.page_rect(poppler::crop_box);
  double width = box.width();
  double height = box.height();
  if (page.orientation() == poppler::page::landscape ||
      page.orientation() == poppler::page::seascape) {
    std::swap(width, height);
  }
  const double dpi = resolution(width, height, options);
  poppler::page_renderer renderer;
  renderer.set_image_format(poppler::image::format_gray8);
  // Smooth edges read better, for a model as for a person.
  renderer.set_render_hint(poppler::page_renderer::antialiasing, true);
  renderer.set_render_hint(poppler::page_renderer::text_antialiasing, true);
  const poppler::image rendered = renderer.render_page(&page, dpi, dpi);
  if (!rendered.is_valid() || rendered.width() <= 0 || rendered.height() <= 0) return cannot();
  const GrayPixels pixels{reinterpret_cast<const unsigned char*>(rendered.const_data()),
                          rendered.width(), rendered.height(),
                          static_cast<std::size_t>(rendered.bytes_per_row())};
  if (!keep_blank && is_blank(pixels)) return std::optional<PageImage>();
  auto image = encode_page_image(pixels);
  if (!image.ok()) return image.status();
  return std::optional<PageImage>(std::move(image).value());
}

}  // namespace fairlane::render
