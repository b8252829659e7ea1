// Helpers for tests of written PDFs: what poppler sees on each page (its text layer, its
// size, its pixels rendered gray), read independently of fairlane's own reader, and the
// cross-reference check every writer's PDF must pass.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace fairlane::testing {

// One page as poppler sees it.
struct PdfPageSeen {
  // page::text() in UTF-8 without the form feed poppler ends it with; empty when the page
  // has no text layer.
  std::string text;
  double width_pt = 0;
  double height_pt = 0;
  int width_px = 0;  // the rendering's size
  int height_px = 0;
  std::vector<unsigned char> gray;  // rendered at the dpi asked for, gray8, no padding
  // The fraction of pixels darker than mid-grey: ink.
  [[nodiscard]] double ink() const;
};

// Every page of the PDF, rendered at `dpi` (antialiased). Fails the test when poppler
// cannot open it.
std::vector<PdfPageSeen> see_pdf(const std::string& pdf, double dpi = 36);

// Checks that the PDF's last cross-reference table has `objects` entries after the free
// one, each pointing at the start of its object ("N 0 obj").
void check_xref(const std::string& pdf, int objects);

}  // namespace fairlane::testing
