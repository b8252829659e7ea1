// Benchmarks of scanned pages at upload and what the alternative would cost at dispatch:
// read_pdf drawing a book's pages as images (render + encode, at the default RenderOptions),
// and opening a stored PDF to render the one page a dispatch needs (docs/performance.md,
// "Scanned pages").
//
// The books are samples/books' (the path is compiled in). All time wall-clock
// (UseRealTime): an upload waits for the reader child's wall time, and dispatch for the
// io thread's. The reader is single-threaded and one process an upload, so these run on
// one thread.
//
//   tools/bench/run --benchmark_filter='ReadPdf|RenderOnePage'
#include <benchmark/benchmark.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include <poppler-document.h>
#include <poppler-page.h>

#include "document/render.hpp"
#include "fairlane/core/status.hpp"
#include "fairlane/document/document.hpp"

#ifndef FAIRLANE_SAMPLES_DIR
#error "FAIRLANE_SAMPLES_DIR must name the samples directory"
#endif

namespace {

using fairlane::DocumentPage;
using fairlane::PageInputMode;
using fairlane::PageKind;
using fairlane::PdfReading;
using fairlane::Status;

// A sample book's bytes; empty when it cannot be read.
std::string read_book(std::string_view name) {
  std::ifstream file(std::string(FAIRLANE_SAMPLES_DIR) + "/books/" + std::string(name),
                     std::ios::binary);
  std::ostringstream bytes;
  bytes << file.rdbuf();
  return std::move(bytes).str();
}

bool ok_or_skip(benchmark::State& state, const Status& status) {
  if (status.ok()) return true;
  state.SkipWithError(status.message().c_str());
  return false;
}

// What the upload's reader does with a book: read_pdf of every page, those without a text
// layer (or all of them, under PageInputMode::image) rendered and encoded. Counters: pages a
// second, the mean encoded image of an image page, and the PDF's own bytes a page.
void read_pdf_images(benchmark::State& state, std::string_view book, PageInputMode input) {
  const std::string bytes = read_book(book);
  if (bytes.empty()) {
    state.SkipWithError("cannot read the sample book");
    return;
  }
  PdfReading reading;
  reading.input = input;
  std::int64_t pages = 0;
  std::int64_t image_pages = 0;
  std::int64_t image_bytes = 0;
  for (auto _ : state) {
    const Status read = fairlane::read_pdf(
        bytes, reading, [](std::int64_t) { return Status{}; },
        [&](DocumentPage page) {
          ++pages;
          if (page.kind == PageKind::image) {
            ++image_pages;
            image_bytes += static_cast<std::int64_t>(page.image->bytes.size());
          }
          benchmark::DoNotOptimize(page);
          return Status{};
        });
    if (!ok_or_skip(state, read)) return;
  }
  if (image_pages == 0) {
    state.SkipWithError("no page was drawn as an image");
    return;
  }
  const auto per_book = pages / static_cast<std::int64_t>(state.iterations());
  state.SetItemsProcessed(pages);
  state.counters["pages_per_s"] =
      benchmark::Counter(static_cast<double>(pages), benchmark::Counter::kIsRate);
  state.counters["image_bytes_per_page"] =
      static_cast<double>(image_bytes) / static_cast<double>(image_pages);
  state.counters["pdf_bytes_per_page"] =
      static_cast<double>(bytes.size()) / static_cast<double>(per_book);
}

// samples/books/scanned-notes.pdf: 8 scanned pages, no text layer, as `serve` reads it by
// default (auto: each page drawn).
void BM_ReadPdf_Images_ScannedNotesAuto(benchmark::State& state) {
  read_pdf_images(state, "scanned-notes.pdf", PageInputMode::automatic);
}
BENCHMARK(BM_ReadPdf_Images_ScannedNotesAuto)->UseRealTime()->Unit(benchmark::kMillisecond);

// samples/books/letters-home.pdf, a text book, every page drawn (--page-input image).
void BM_ReadPdf_Images_LettersHomeImage(benchmark::State& state) {
  read_pdf_images(state, "letters-home.pdf", PageInputMode::image);
}
BENCHMARK(BM_ReadPdf_Images_LettersHomeImage)->UseRealTime()->Unit(benchmark::kMillisecond);

// What a dispatch would pay if the store kept the PDF and rendered at dispatch: open the
// whole book from its bytes (as a stored BLOB would be read), make its middle page and
// render + encode it. poppler is called directly, as read_pdf does (render::render_page is
// read_pdf's own step), because read_pdf has no way to ask for one page: reading the book
// and dividing by its pages would leave out the open, which dispatch pays every time.
// Single-threaded, so the process's poppler lock (pdf.cpp) has nobody to guard against.
void render_one_page(benchmark::State& state, std::string_view book) {
  const std::string bytes = read_book(book);
  if (bytes.empty()) {
    state.SkipWithError("cannot read the sample book");
    return;
  }
  const fairlane::RenderOptions options;
  std::int64_t image_bytes = 0;
  for (auto _ : state) {
    const std::unique_ptr<poppler::document> document(
        poppler::document::load_from_raw_data(bytes.data(), static_cast<int>(bytes.size())));
    if (!document || document->pages() <= 0) {
      state.SkipWithError("poppler cannot open the sample book");
      return;
    }
    const int index = document->pages() / 2;
    const std::unique_ptr<poppler::page> page(document->create_page(index));
    if (!page) {
      state.SkipWithError("poppler cannot make the page");
      return;
    }
    auto image = fairlane::render::render_page(*page, index + 1, options, /*keep_blank=*/true);
    if (!ok_or_skip(state, image.status())) return;
    image_bytes += static_cast<std::int64_t>((*image)->bytes.size());
    benchmark::DoNotOptimize(image);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["image_bytes"] =
      static_cast<double>(image_bytes) / static_cast<double>(state.iterations());
}

void BM_RenderOnePage_ScannedNotes(benchmark::State& state) {
  render_one_page(state, "scanned-notes.pdf");
}
BENCHMARK(BM_RenderOnePage_ScannedNotes)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_RenderOnePage_LettersHome(benchmark::State& state) {
  render_one_page(state, "letters-home.pdf");
}
BENCHMARK(BM_RenderOnePage_LettersHome)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
