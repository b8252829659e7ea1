// SplitMix64, the generator behind everything random in a sample book (its words, a scan's
// specks): small, fast, and defined to the bit, so a seed gives the same book anywhere
// (<random>'s distributions differ between standard libraries).
//
// Thread safety: one generator per thread; it is a plain value.
#pragma once

#include <cstdint>

namespace fairlane::pdfgen {

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
  }

  // A whole number in [low, high]; the modulo bias is far too small to matter here.
  int between(int low, int high) {
    const auto span = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low) + 1;
    return low + static_cast<int>(next() % span);
  }

 private:
  std::uint64_t state_;
};

}  // namespace fairlane::pdfgen
