// Helpers for the PostgreSQL tests: the tests' server (tools/pg/server, which CTest starts for
// the test cases named "PostgreSQL: ...", fixture `postgres` in tests/CMakeLists.txt) and a
// database of its own for each test, so that tests never see each other's tables.
#pragma once

#include <optional>
#include <string>

namespace fairlane::testing {

// The URI of the tests' server, read from the file FAIRLANE_TEST_PG_URI_FILE names; nullopt
// when that variable is unset (fairlane_tests run by hand, outside CTest). Set but unreadable
// fails the test: the fixture was meant to start the server.
std::optional<std::string> pg_server_uri();

// What a PostgreSQL test says when run outside CTest; CTest would take it as skipped.
constexpr const char* kNoPgServer =
    "SKIPPED: no PostgreSQL test server (FAIRLANE_TEST_PG_URI_FILE is unset): run it through "
    "ctest, which starts one (tools/pg/server)";

// A fresh database on the tests' server, dropped (with any connection left to it) when the
// object goes. Fails the test if it cannot be made.
class PgTestDatabase {
 public:
  explicit PgTestDatabase(const std::string& server_uri);
  PgTestDatabase(const PgTestDatabase&) = delete;
  PgTestDatabase& operator=(const PgTestDatabase&) = delete;
  ~PgTestDatabase();

  [[nodiscard]] const std::string& uri() const { return uri_; }
  [[nodiscard]] const std::string& name() const { return name_; }

 private:
  std::string server_uri_;
  std::string name_;
  std::string uri_;
};

}  // namespace fairlane::testing
