// The fuzz targets' entry functions: each feeds one input to one parser of untrusted bytes
// and checks what the parser promises about its answer. A broken promise aborts with a
// message (a crash libFuzzer reports); so does a sanitizer finding or an escaped exception.
// The libFuzzer binaries (tools/fuzz/fuzzer.cpp) and the replay of every input that once
// failed (tests/fuzz/replay_test.cpp) call the same functions.
//
// Thread safety: each call is independent, but config_file uses one scratch file per
// process, so call that one from one thread at a time.
#pragma once

#include <string_view>

namespace fairlane::fuzz {

// The body of a JSON upload (POST /v1/jobs, application/json) through
// service::parse_json_upload.
void upload_json(std::string_view input);

// A multipart/form-data body through multipart_file. The input's first line is the
// request's Content-Type, the rest the body.
void multipart(std::string_view input);

// A PDF through read_pdf under --page-input auto, pages without text rendered (small), in
// this process (the service reads PDFs in a child).
void pdf(std::string_view input);

// A provider's response body through both dialects' parse_answer, error_detail and
// classify. The first byte picks the HTTP status.
void provider_response(std::string_view input);

// Response headers ("name: value" lines) through parse_rate_limit_headers, and the whole
// input through each value parser.
void rate_limit_headers(std::string_view input);

// A TOML file given to `fairlane --config`, parsed by the command's own definition
// (cli::CommandLine) after the subcommand the first byte picks; nothing is run.
void config_file(std::string_view input);

}  // namespace fairlane::fuzz
