// The `fairlane` command: `fairlane serve` runs the service; `fairlane user add` adds a user
// to a database and prints their key; `fairlane prune` deletes old finished jobs; enqueue, watch,
// status, result, cancel and estimate talk to a running service over HTTP (src/cli/commands). The
// command line itself, with every option and --config's TOML file, is cli::CommandLine
// (src/cli/app); for --server and --key the order is flags, then the environment (FAIRLANE_URL,
// FAIRLANE_KEY), then the file.
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli/app.hpp"
#include "cli/commands.hpp"
#include "cli/prune.hpp"
#include "cli/serve.hpp"
#include "fairlane/document/pdf_reader.hpp"
#include "fairlane/store/store.hpp"

namespace {

using fairlane::cli::kExitFailure;
using fairlane::cli::kExitOk;
using fairlane::cli::kExitUsage;

int fail(const std::string& message) {
  std::cerr << "fairlane: " << message << '\n';
  return kExitFailure;
}

// The width of the terminal stdout is, in cells (0 when it is not one, or does not say).
std::size_t terminal_columns() {
  winsize size{};
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): ioctl is the only way to ask
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col;
}

}  // namespace

int main(int argc, char** argv) {
  fairlane::cli::CommandLine line;
  try {
    line.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints help, the version, or what was wrong with the command line.
    return line.app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  try {
    if (line.serve_command->parsed()) return fairlane::cli::serve(line.serve);
    if (line.read_pdf_command->parsed()) {
      const fairlane::PdfReading reading{
          .input = fairlane::page_input_from(line.reader_page_input).value(),
          .render = {.dpi = line.reader_dpi},
          .max_pages = line.reader_max_pages,
          .max_page_bytes = line.reader_max_page_bytes,
          .max_image_bytes = line.reader_max_image_bytes};
      return fairlane::read_pdf_child(std::cin, std::cout, line.reader_cpu_seconds,
                                      line.reader_memory_mb, reading);
    }
    if (line.user_add_command->parsed()) {
      auto store = fairlane::Store::open(line.user_db);
      if (!store.ok()) return fail(store.status().message());
      auto added = store.value()->add_user(line.user_name, line.weight);
      if (!added.ok()) return fail(added.status().message());
      std::cout << added->key << '\n';
      return kExitOk;
    }
    if (line.prune_command->parsed()) {
      auto store = fairlane::Store::open(line.prune.db);
      if (!store.ok()) return fail(store.status().message());
      return fairlane::cli::prune(*store.value(), line.prune, std::cout, std::cerr);
    }
    // The environment is read before any thread starts (concurrency-mt-unsafe: getenv).
    if (!fairlane::cli::on_command_line(argc, argv, "--server")) {
      // NOLINTNEXTLINE(concurrency-mt-unsafe)
      if (const char* env = std::getenv("FAIRLANE_URL"); env != nullptr && *env != '\0')
        line.server = env;
    }
    if (!fairlane::cli::on_command_line(argc, argv, "--key")) {
      // NOLINTNEXTLINE(concurrency-mt-unsafe)
      if (const char* env = std::getenv("FAIRLANE_KEY"); env != nullptr && *env != '\0')
        line.key = env;
    }
    const fairlane::cli::Output output{std::cout, std::cerr, isatty(STDOUT_FILENO) == 1,
                                       &terminal_columns};
    const bool client = line.enqueue_command->parsed() || line.watch_command->parsed() ||
                        line.status_command->parsed() || line.result_command->parsed() ||
                        line.cancel_command->parsed() || line.estimate_command->parsed();
    if (client && line.key.empty()) {
      std::cerr << "fairlane: this needs your API key: pass --key KEY or set FAIRLANE_KEY "
                   "(`fairlane user add NAME` makes one)\n";
      return fairlane::cli::kExitUnauthorized;
    }
    fairlane::cli::HttpClient http(line.server, line.key);
    if (line.enqueue_command->parsed()) {
      std::vector<std::string> accepted;
      const int code = fairlane::cli::enqueue(http, line.enqueue, output, accepted);
      if (!line.watch_after || accepted.empty()) return code;
      const int watched = fairlane::cli::watch(http, accepted, output);
      return code != kExitOk ? code : watched;
    }
    if (line.watch_command->parsed()) return fairlane::cli::watch(http, line.watch_jobs, output);
    if (line.status_command->parsed()) return fairlane::cli::status(http, output);
    if (line.result_command->parsed()) {
      return fairlane::cli::result(http, line.result_job, line.result_file, line.result_json,
                                   output);
    }
    if (line.cancel_command->parsed()) return fairlane::cli::cancel(http, line.cancel_job, output);
    if (line.estimate_command->parsed()) {
      return fairlane::cli::estimate(http, line.estimate_pages, line.tokens_per_page, output);
    }
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  std::cout << line.app.help();
  return kExitOk;
}
