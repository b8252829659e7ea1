// Where a tool that drives `fairlane serve` (the lab) finds the `fairlane` binary when it is
// not told: beside its own executable, in the build tree it was built in, or on PATH.
//
// Thread safety: free functions; own_directory() reads /proc/self/exe, find_fairlane() only
// its arguments and the file system.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

namespace fairlane::tools {

// The directory of the running executable (/proc/self/exe's), or empty if it cannot be read.
[[nodiscard]] std::filesystem::path own_directory();

struct FairlaneLookup {
  std::optional<std::filesystem::path> found;  // the first executable `fairlane` met
  std::vector<std::filesystem::path> beside;   // the places near the tool that were tried
};

// Looks, in order, in `tool_dir` (installed side by side), then in the build tree's src/cli
// for a tool at BUILD/tools/NAME/ (whose fairlane is at BUILD/src/cli/fairlane), then in each
// directory of `path_env` (a PATH value: ':'-separated, an empty entry is the current
// directory). Only a regular file that may be executed counts.
[[nodiscard]] FairlaneLookup find_fairlane(const std::filesystem::path& tool_dir,
                                           std::string_view path_env);

}  // namespace fairlane::tools
