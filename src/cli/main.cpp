// The `fairlane` command. Its subcommands (serve, enqueue, watch, ...) arrive with the
// service; for now it answers --help and --version.
#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>
#include <string>

#include "fairlane/version.hpp"

namespace {

// Exit statuses, documented in README.md.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;  // the command could not do its job
constexpr int kExitUsage = 2;    // the command line itself is wrong

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "fairlane: a fair work-queue dispatcher for batch document jobs.\n"
      "Pages wait in per-user lanes and are sent to a rate-limited AI provider in fair order,\n"
      "never beyond its requests per minute, tokens per minute or calls in flight.",
      "fairlane"};
  app.set_version_flag("--version", std::string("fairlane ") + fairlane::kVersion,
                       "Print the version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints help, the version, or what was wrong with the command line.
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "fairlane: " << e.what() << '\n';
    return kExitFailure;
  }
  return kExitOk;
}
