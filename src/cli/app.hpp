// The `fairlane` command line: every subcommand and option (CLI11), with its default, its
// check and the variable it lands in. Every flag can also come from a TOML file given with
// --config. main() parses with it and then runs what was asked; the config loader's fuzz
// target (tools/fuzz) parses with it and runs nothing.
//
// Thread safety: none; one thread builds, parses and reads a CommandLine.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.hpp"
#include "cli/prune.hpp"
#include "cli/serve.hpp"

namespace fairlane::cli {

class CommandLine {
 public:
  CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // Parses the arguments (argv[0] first), with "--config FILE" moved before the
  // subcommand wherever it was given: CLI11 applies the file's [serve] and [user.add]
  // sections only then. Throws CLI::ParseError (help, version and mistakes alike); app.exit
  // prints it.
  void parse(int argc, char** argv);

  CLI::App app;

  // Constant after construction: the subcommands, to ask which was parsed.
  CLI::App* serve_command = nullptr;
  CLI::App* read_pdf_command = nullptr;
  CLI::App* user_add_command = nullptr;
  CLI::App* prune_command = nullptr;
  CLI::App* enqueue_command = nullptr;
  CLI::App* watch_command = nullptr;
  CLI::App* status_command = nullptr;
  CLI::App* result_command = nullptr;
  CLI::App* cancel_command = nullptr;
  CLI::App* estimate_command = nullptr;

  // What parse() fills in, each starting at its default.
  ServeOptions serve;
  // `fairlane read-pdf`, the child serve reads an uploaded PDF in.
  std::int64_t reader_cpu_seconds = 60;
  std::int64_t reader_memory_mb = 2048;
  std::int64_t reader_max_pages = 10'000;
  std::int64_t reader_max_page_bytes = 0;   // 0: any
  std::int64_t reader_max_image_bytes = 0;  // 0: any
  std::string reader_page_input = "auto";
  double reader_dpi = 150.0;
  // `fairlane user add`.
  std::string user_name;
  std::int64_t weight = 1;
  std::string user_db = "fairlane.db";
  // `fairlane prune`.
  PruneOptions prune;
  // The client commands.
  std::string server = "http://127.0.0.1:8080";
  std::string key;
  EnqueueOptions enqueue;
  bool watch_after = false;
  std::vector<std::string> watch_jobs;
  std::string result_job;
  std::optional<std::string> result_file;
  bool result_json = false;
  std::string cancel_job;
  std::int64_t estimate_pages = 0;
  std::optional<std::int64_t> tokens_per_page;
};

// Whether `flag` ("--server") is on the command line itself, as "--server X" or
// "--server=X": then it wins over the environment, which wins over the config file.
[[nodiscard]] bool on_command_line(int argc, char** argv, std::string_view flag);

}  // namespace fairlane::cli
