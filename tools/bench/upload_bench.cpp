// A JSON upload's body read (parse_json_upload, as a stream of parse events): a book of
// 300 pages of 3 KB, which is taken, and a body of a million empty pages, which is refused
// over --max-pages (10,000) once counted. The second is what an attacker sends: three bytes
// a page, none of it kept (docs/performance.md, "JSON uploads").
//
//   tools/bench/run --benchmark_filter=ParseJsonUpload
#include <benchmark/benchmark.h>

#include <string>
#include <variant>

#include "service/api_json.hpp"

namespace {

std::string book(int pages, std::size_t bytes) {
  std::string body = R"({"name": "book", "pages": [)";
  for (int i = 0; i < pages; ++i) {
    if (i > 0) body += ',';
    body += '"' + std::string(bytes, static_cast<char>('a' + i % 26)) + '"';
  }
  return body + "]}";
}

void parse(benchmark::State& state, const std::string& body, bool taken) {
  for (auto _ : state) {
    auto parsed = fairlane::service::parse_json_upload(body, 1'000, 10'000);
    if (std::holds_alternative<fairlane::service::JsonUpload>(parsed) != taken) {
      state.SkipWithError("unexpected answer");
    }
    benchmark::DoNotOptimize(parsed);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(body.size()));
}

void BM_ParseJsonUpload_Book300x3KB(benchmark::State& state) {
  static const std::string body = book(300, 3'000);
  parse(state, body, true);
}
BENCHMARK(BM_ParseJsonUpload_Book300x3KB)->Unit(benchmark::kMillisecond);

void BM_ParseJsonUpload_MillionEmptyPagesRefused(benchmark::State& state) {
  static const std::string body = book(1'000'000, 0);
  parse(state, body, false);
}
BENCHMARK(BM_ParseJsonUpload_MillionEmptyPagesRefused)->Unit(benchmark::kMillisecond);

}  // namespace
