// How the lab finds `fairlane` without --fairlane: beside itself, in its build tree, on PATH.
#include "find_fairlane.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "support/store.hpp"

using fairlane::tools::find_fairlane;
using fairlane::tools::own_directory;
namespace fs = std::filesystem;

namespace {

// An executable (or, with `mode` 0644, a plain) file named `fairlane` in `dir`.
fs::path put_fairlane(const fs::path& dir, fs::perms mode = fs::perms::owner_all) {
  fs::create_directories(dir);
  const fs::path file = dir / "fairlane";
  std::ofstream(file) << "#!/bin/sh\n";
  fs::permissions(file, mode);
  return file;
}

}  // namespace

TEST_CASE("find_fairlane: the build tree's src/cli/fairlane for a tool in tools/lab") {
  const fairlane::testing::TempDir build;
  const fs::path lab = build.path() / "tools" / "lab";
  fs::create_directories(lab);
  const fs::path fairlane = put_fairlane(build.path() / "src" / "cli");
  const auto lookup = find_fairlane(lab, "");
  REQUIRE(lookup.found);
  CHECK(fs::equivalent(*lookup.found, fairlane));
  REQUIRE(lookup.beside.size() == 2);
  CHECK(lookup.beside[0] == lab);
  CHECK(lookup.beside[1] == (build.path() / "src" / "cli").lexically_normal());
}

TEST_CASE("find_fairlane: one beside the tool comes first, then the build tree, then PATH") {
  const fairlane::testing::TempDir root;
  const fs::path lab = root.path() / "tools" / "lab";
  const fs::path on_path = root.path() / "bin";
  put_fairlane(on_path);
  put_fairlane(root.path() / "src" / "cli");
  const fs::path beside = put_fairlane(lab);
  const std::string path_env = "/nonexistent:" + on_path.string();
  REQUIRE(find_fairlane(lab, path_env).found);
  CHECK(fs::equivalent(*find_fairlane(lab, path_env).found, beside));
  fs::remove(beside);
  CHECK(fs::equivalent(*find_fairlane(lab, path_env).found, root.path() / "src/cli/fairlane"));
  fs::remove(root.path() / "src/cli/fairlane");
  CHECK(fs::equivalent(*find_fairlane(lab, path_env).found, on_path / "fairlane"));
}

TEST_CASE("find_fairlane: on PATH, the first directory of PATH that has it") {
  const fairlane::testing::TempDir root;
  const fs::path first = root.path() / "first";
  const fs::path second = root.path() / "second";
  fs::create_directories(first);
  put_fairlane(second);
  const auto lookup =
      find_fairlane(root.path() / "elsewhere", first.string() + ":" + second.string());
  REQUIRE(lookup.found);
  CHECK(fs::equivalent(*lookup.found, second / "fairlane"));
  put_fairlane(first);
  CHECK(fs::equivalent(
      *find_fairlane(root.path() / "elsewhere", first.string() + ":" + second.string()).found,
      first / "fairlane"));
}

TEST_CASE("find_fairlane: a file that may not be executed, or a directory, is not fairlane") {
  const fairlane::testing::TempDir root;
  const fs::path lab = root.path() / "tools" / "lab";
  put_fairlane(lab, fs::perms::owner_read | fs::perms::owner_write);
  fs::create_directories(root.path() / "src" / "cli" / "fairlane");
  const auto lookup = find_fairlane(lab, (root.path() / "nothing").string());
  CHECK_FALSE(lookup.found);
  CHECK(lookup.beside.size() == 2);
  CHECK_FALSE(find_fairlane(lab, "").found);
}

TEST_CASE("find_fairlane: the tests' own directory is where /proc/self/exe is") {
  const fs::path dir = own_directory();
  REQUIRE_FALSE(dir.empty());
  CHECK(fs::exists(dir / "fairlane_tests"));
}
