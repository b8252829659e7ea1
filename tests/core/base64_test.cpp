#include "fairlane/core/base64.hpp"

#include <doctest/doctest.h>

#include <string>

TEST_CASE("base64: RFC 4648's test vectors, both ways") {
  const std::pair<std::string, std::string> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [bytes, text] : vectors) {
    CAPTURE(bytes);
    CHECK(fairlane::base64_encode(bytes) == text);
    CHECK(fairlane::base64_decode(text) == bytes);
  }
}

TEST_CASE("base64: every byte value survives the round trip") {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes += static_cast<char>(i);
  for (std::size_t cut = 0; cut < 4; ++cut) {
    const std::string part = bytes.substr(cut);
    CHECK(fairlane::base64_decode(fairlane::base64_encode(part)) == part);
  }
}

TEST_CASE("base64: what is not canonical base64 is refused") {
  for (const std::string text :
       {"Zg", "Zg=", "Z===", "Zm9v!A==", "Zh==", "Zm9=", "=Zm9", "Zg==Zg==", "Zm 9v"}) {
    CAPTURE(text);
    CHECK_FALSE(fairlane::base64_decode(text).has_value());
  }
}
