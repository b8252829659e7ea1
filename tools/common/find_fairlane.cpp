#include "find_fairlane.hpp"

#include <unistd.h>

#include <system_error>

namespace fairlane::tools {
namespace {

bool executable_file(const std::filesystem::path& file) {
  std::error_code error;
  return std::filesystem::is_regular_file(file, error) && access(file.c_str(), X_OK) == 0;
}

// PATH's directories in order; an empty entry (a leading, doubled or trailing ':') is the
// current directory, as for execvp.
std::vector<std::filesystem::path> path_dirs(std::string_view path_env) {
  std::vector<std::filesystem::path> dirs;
  if (path_env.empty()) return dirs;
  std::size_t start = 0;
  while (true) {
    const auto colon = path_env.find(':', start);
    const std::string_view entry =
        path_env.substr(start, colon == std::string_view::npos ? colon : colon - start);
    dirs.emplace_back(entry.empty() ? std::string_view(".") : entry);
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  return dirs;
}

}  // namespace

std::filesystem::path own_directory() {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return {};
  return self.parent_path();
}

FairlaneLookup find_fairlane(const std::filesystem::path& tool_dir, std::string_view path_env) {
  FairlaneLookup lookup;
  if (!tool_dir.empty()) {
    lookup.beside.push_back(tool_dir);
    // BUILD/tools/NAME/ -> BUILD/src/cli/
    lookup.beside.push_back((tool_dir / ".." / ".." / "src" / "cli").lexically_normal());
  }
  std::vector<std::filesystem::path> dirs = lookup.beside;
  for (auto& dir : path_dirs(path_env)) dirs.push_back(std::move(dir));
  for (const auto& dir : dirs) {
    if (executable_file(dir / "fairlane")) {
      lookup.found = dir / "fairlane";
      break;
    }
  }
  return lookup;
}

}  // namespace fairlane::tools
