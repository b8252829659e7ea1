// One test body, run against each store: StoreHome is where a test's stores live (an SQLite
// database in memory or in a file of its own, or a PostgreSQL database of its own on the
// tests' server), and FAIRLANE_STORE_TEST_CASE defines a test case for each.
#pragma once

#include <doctest/doctest.h>

#include <memory>

#include "fairlane/store/store.hpp"
#include "support/pg.hpp"

namespace fairlane::testing {

class StoreHome {
 public:
  // SQLite, in memory: each open is a new, empty database.
  static std::unique_ptr<StoreHome> sqlite_memory();
  // SQLite, a file in a directory of its own: a second open sees what the first wrote.
  static std::unique_ptr<StoreHome> sqlite_file();
  // PostgreSQL, a database of its own on the tests' server (dropped with the home); null when
  // there is no server (fairlane_tests run outside CTest).
  static std::unique_ptr<StoreHome> postgresql();

  StoreHome() = default;
  StoreHome(const StoreHome&) = delete;
  StoreHome& operator=(const StoreHome&) = delete;
  virtual ~StoreHome() = default;

  // Opens a store there, or fails the test.
  virtual std::unique_ptr<Store> open(StoreOptions options = {}) = 0;
};

}  // namespace fairlane::testing

// Defines two test cases with one body, which sees `home` (a StoreHome&): `name` on SQLite
// (`sqlite`: sqlite_memory or sqlite_file) and "PostgreSQL: name" on PostgreSQL, which CTest
// runs with its server (fixture `postgres`) and which says SKIPPED when run outside CTest.
#define FAIRLANE_STORE_TEST_CASE(name, sqlite) \
  FAIRLANE_STORE_TEST_CASE_BODY(name, sqlite, DOCTEST_ANONYMOUS(fairlane_store_test_))
#define FAIRLANE_STORE_TEST_CASE_BODY(name, sqlite, body)        \
  static void body(::fairlane::testing::StoreHome& home);        \
  TEST_CASE(name) {                                              \
    auto sqlite_home = ::fairlane::testing::StoreHome::sqlite(); \
    body(*sqlite_home);                                          \
  }                                                              \
  TEST_CASE("PostgreSQL: " name) {                               \
    auto pg_home = ::fairlane::testing::StoreHome::postgresql(); \
    if (!pg_home) {                                              \
      MESSAGE(::fairlane::testing::kNoPgServer);                 \
      return;                                                    \
    }                                                            \
    body(*pg_home);                                              \
  }                                                              \
  static void body(::fairlane::testing::StoreHome& home)
