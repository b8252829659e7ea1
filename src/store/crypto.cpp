#include "store/crypto.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <span>
#include <vector>

namespace fairlane::store {
namespace {

// Bytes as lower-case hex.
std::string hex(std::span<const unsigned char> bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (const unsigned char byte : bytes) {
    out.push_back(kHex[byte >> 4]);
    out.push_back(kHex[byte & 0x0f]);
  }
  return out;
}

}  // namespace

std::optional<Sha256> sha256(std::string_view data) {
  Sha256 digest{};
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1 ||
      size != digest.size()) {
    return std::nullopt;
  }
  return digest;
}

std::optional<std::string> sha256_hex(std::string_view data) {
  const auto digest = sha256(data);
  if (!digest) return std::nullopt;
  return hex(*digest);
}

std::optional<std::string> random_hex(std::size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) return std::nullopt;
  return hex(raw);
}

}  // namespace fairlane::store
