// DispatchLock: one process dispatches from a SQLite file; a second is refused, saying who
// holds it, until the first lets go. A PostgreSQL database (the lease decides) and an
// in-memory one need none.
#include "fairlane/store/dispatch_lock.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/store.hpp"

using fairlane::DispatchLock;
using fairlane::StatusCode;

TEST_CASE("A SQLite file is dispatched from by one process: a second lock is refused, naming it") {
  const fairlane::testing::TempDir dir;
  const std::string db = dir.file("fairlane.db");
  {
    auto first = DispatchLock::take(db);
    REQUIRE(first.ok());
    CHECK(first->held());
    // The holder's process id is in the file, for whoever finds it.
    std::ifstream file(db + ".lock");
    std::string pid;
    file >> pid;
    CHECK(pid == std::to_string(getpid()));

    const auto second = DispatchLock::take(db);
    REQUIRE_FALSE(second.ok());
    CHECK(second.status().code() == StatusCode::busy);
    const std::string& message = second.status().message();
    CHECK(message.find("process " + std::to_string(getpid())) != std::string::npos);
    CHECK(message.find(db + ".lock") != std::string::npos);
    CHECK(message.find("PostgreSQL") != std::string::npos);  // the remedy for several
  }
  // Let go (as when the process ends, however it ends): the next one takes it.
  const auto again = DispatchLock::take(db);
  REQUIRE(again.ok());
  CHECK(again->held());
}

TEST_CASE("A lock moved keeps the file locked, and only its last owner lets go") {
  const fairlane::testing::TempDir dir;
  const std::string db = dir.file("fairlane.db");
  auto taken = DispatchLock::take(db);
  REQUIRE(taken.ok());
  DispatchLock moved = std::move(taken).value();
  CHECK_FALSE(DispatchLock::take(db).ok());
  DispatchLock assigned;
  assigned = std::move(moved);
  CHECK(assigned.held());
  CHECK_FALSE(DispatchLock::take(db).ok());
}

TEST_CASE("PostgreSQL and in-memory databases take no lock file") {
  for (const char* db : {"postgresql://fairlane@127.0.0.1:1/x",
                         ":memory:", "file::memory:", "file:shared?mode=memory&cache=shared"}) {
    CAPTURE(db);
    const auto lock = DispatchLock::take(db);
    REQUIRE(lock.ok());
    CHECK_FALSE(lock->held());
  }
  CHECK_FALSE(std::filesystem::exists(":memory:.lock"));
  CHECK_FALSE(std::filesystem::exists("file::memory:.lock"));
}

TEST_CASE("A SQLite URI's file and a symbolic link to it share the file's lock") {
  const fairlane::testing::TempDir dir;
  const std::string db = dir.file("fairlane.db");
  { std::ofstream touch(db); }
  std::filesystem::create_symlink(db, dir.file("link.db"));
  const auto held = DispatchLock::take("file:" + db + "?cache=private");
  REQUIRE(held.ok());
  CHECK(held->held());
  CHECK(std::filesystem::exists(db + ".lock"));
  CHECK_FALSE(DispatchLock::take(db).ok());
  CHECK_FALSE(DispatchLock::take(dir.file("link.db")).ok());
  CHECK_FALSE(DispatchLock::take("file://" + db).ok());
}

TEST_CASE("A lock file that cannot be made is an error naming it and the remedy") {
  const fairlane::testing::TempDir dir;
  const auto none = DispatchLock::take(dir.file("no/such/dir/fairlane.db"));
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("no/such/dir/fairlane.db.lock") != std::string::npos);
}
