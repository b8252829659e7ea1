#include "support/pg.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>

#include "store/pg.hpp"

namespace fairlane::testing {

std::optional<std::string> pg_server_uri() {
  // Read on the test's own thread; nothing in the tests sets the environment.
  // NOLINTNEXTLINE(concurrency-mt-unsafe)
  const char* file = std::getenv("FAIRLANE_TEST_PG_URI_FILE");
  if (file == nullptr) return std::nullopt;
  std::ifstream in(file);
  std::string uri;
  std::getline(in, uri);
  REQUIRE_MESSAGE(!uri.empty(), "no URI in " << file << ": did the fixture pg.server_start fail?");
  return uri;
}

PgTestDatabase::PgTestDatabase(const std::string& server_uri) : server_uri_(server_uri) {
  static std::atomic<int> count{0};
  name_ = "fairlane_t" + std::to_string(getpid()) + "_" + std::to_string(count++);
  const auto slash = server_uri.rfind('/');
  REQUIRE(slash != std::string::npos);
  uri_ = server_uri.substr(0, slash + 1) + name_;
  auto admin = store::pg::Connection::open(server_uri_);
  REQUIRE_MESSAGE(admin.ok(), admin.status().message());
  // One statement each: neither may run inside a transaction block.
  const auto dropped =
      admin->exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)", "dropping a test database");
  REQUIRE_MESSAGE(dropped.ok(), dropped.message());
  const auto made = admin->exec("CREATE DATABASE " + name_, "creating a test database");
  REQUIRE_MESSAGE(made.ok(), made.message());
}

PgTestDatabase::~PgTestDatabase() {
  auto admin = store::pg::Connection::open(server_uri_);
  if (!admin.ok()) return;
  (void)admin->exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)",
                    "dropping a test database");
}

}  // namespace fairlane::testing
