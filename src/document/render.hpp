// Rendering a page for the provider: poppler's Splash renderer in grayscale, at the
// resolution RenderOptions allow, and the test for a page with no ink at all.
//
// Thread safety: call with the process's poppler lock held (pdf.cpp), as for any poppler
// call; ink_share and is_blank are pure.
#pragma once

#include <cstdint>
#include <optional>

#include "fairlane/core/result.hpp"
#include "fairlane/document/document.hpp"
#include "fairlane/document/image.hpp"

namespace poppler {
class page;
}  // namespace poppler

namespace fairlane::render {

// The resolution a page of `width_pt` x `height_pt` points is rendered at: options.dpi, or
// less, so that its long edge stays within options.max_long_edge pixels.
[[nodiscard]] double resolution(double width_pt, double height_pt, const RenderOptions& options);

// The share of pixels that are marks: more than 64 grey levels from the page's paper, its
// median tone, or darker than mid-grey and more than 32 from it. Measured against the paper, not an
// absolute grey, so that pencil or a faded copy (grey 150 on 250) is ink and white writing on a
// black page too; until 2026-12-07 only pixels darker than mid-grey counted, and such a page was
// dropped as blank.
[[nodiscard]] double ink_share(const GrayPixels& pixels);

// Whether a rendered page has no ink worth a call: fewer than 1 pixel in 50,000 of ink
// (at 150 DPI, about 40 pixels of a letter-size page: less than one printed digit).
// A page is called blank only when nobody could read anything on it: a false "blank" loses
// what the page said, a false "ink" costs one call; so the line is drawn low.
[[nodiscard]] bool is_blank(const GrayPixels& pixels);

// A rendered page: its image, or nullopt when it is blank and `keep_blank` is false (it is
// not encoded then). `number` counts from 1, for the error of a page that cannot be rendered.
[[nodiscard]] Result<std::optional<PageImage>> render_page(const poppler::page& page, int number,
                                                           const RenderOptions& options,
                                                           bool keep_blank);

}  // namespace fairlane::render
