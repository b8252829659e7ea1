// Every input that once made a fuzz target fail (tests/data/fuzz/NAME/) and every seed of
// its corpus (tools/fuzz/corpus/NAME/), replayed through the target's own entry function
// (tools/fuzz/targets.hpp) on every build: a broken promise aborts, a sanitizer report
// fails the run. Inputs that crash poppler itself are not replayed here but through the
// reader's child process (tests/document/pdf_reader_test.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "targets.hpp"

namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The files of `dir`, sorted (none when it does not exist).
std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Feeds every seed and every regression input of target `name` to `entry`; returns how
// many seeds there were, so that a test notices a corpus it could not find.
std::size_t replay(std::string_view name, void (*entry)(std::string_view)) {
  const fs::path root(FAIRLANE_SOURCE_DIR);
  const auto seeds = files_in(root / "tools/fuzz/corpus" / name);
  for (const auto& file : seeds) {
    INFO("seed ", file.string());
    entry(read_file(file));
  }
  for (const auto& file : files_in(root / "tests/data/fuzz" / name)) {
    INFO("regression input ", file.string());
    entry(read_file(file));
  }
  return seeds.size();
}

}  // namespace

TEST_CASE("the upload_json fuzz target passes its seeds and the inputs that once failed it") {
  CHECK(replay("upload_json", fairlane::fuzz::upload_json) >= 3);
}

TEST_CASE("the multipart fuzz target passes its seeds and the inputs that once failed it") {
  CHECK(replay("multipart", fairlane::fuzz::multipart) >= 3);
}

TEST_CASE("the pdf fuzz target passes its seeds and the inputs that once failed it") {
  CHECK(replay("pdf", fairlane::fuzz::pdf) >= 3);
}

TEST_CASE("the provider_response fuzz target passes its seeds and the inputs that once failed it") {
  CHECK(replay("provider_response", fairlane::fuzz::provider_response) >= 3);
}

TEST_CASE(
    "the rate_limit_headers fuzz target passes its seeds and the inputs that once failed it") {
  CHECK(replay("rate_limit_headers", fairlane::fuzz::rate_limit_headers) >= 3);
}

TEST_CASE("the config_file fuzz target passes its seeds and the inputs that once failed it") {
  CHECK(replay("config_file", fairlane::fuzz::config_file) >= 3);
}
