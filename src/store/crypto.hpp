// The store's two needs from cryptography, from OpenSSL's libcrypto: SHA-256 (API keys are
// stored hashed) and unpredictable random ids and keys.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace fairlane::store {

using Sha256 = std::array<unsigned char, 32>;

// std::nullopt only if OpenSSL itself fails.
std::optional<Sha256> sha256(std::string_view data);
// The same, as lower-case hex.
std::optional<std::string> sha256_hex(std::string_view data);

// `bytes` random bytes from a cryptographically secure generator, as lower-case hex;
// std::nullopt if the generator fails.
std::optional<std::string> random_hex(std::size_t bytes);

}  // namespace fairlane::store
