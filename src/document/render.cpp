#include "document/render.hpp"

#include <poppler-image.h>
#include <poppler-page-renderer.h>
#include <poppler-page.h>

#include <algorithm>
#include <cmath>

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
  constexpr unsigned char kMidGrey = 128;
  if (pixels.width <= 0 || pixels.height <= 0) return 0.0;
  std::int64_t ink = 0;
  for (std::int64_t y = 0; y < pixels.height; ++y) {
    const unsigned char* row = pixels.data + static_cast<std::size_t>(y) * pixels.stride;
    ink += std::count_if(row, row + pixels.width, [](unsigned char v) { return v < kMidGrey; });
  }
  return static_cast<double>(ink) / static_cast<double>(pixels.width * pixels.height);
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
