#include "targets.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <variant>
#include <vector>

#include "cli/app.hpp"
#include "fairlane/core/text.hpp"
#include "fairlane/document/document.hpp"
#include "fairlane/document/image.hpp"
#include "fairlane/provider/rate_limit_headers.hpp"
#include "provider/dialect.hpp"
#include "provider/rate_limit_format.hpp"
#include "service/api_json.hpp"

namespace fairlane::fuzz {
namespace {

// A broken promise: says which and aborts, which libFuzzer and doctest both report.
void check(bool holds, const char* promise) {
  if (holds) return;
  (void)std::fprintf(stderr, "fuzz: broken promise: %s\n", promise);
  std::abort();
}

// A fixed "now" (2026-11-29T12:00:00Z), so that a replayed input behaves as it did.
WallTime fixed_now() {
  return WallTime(std::chrono::seconds(1'795'953'600));
}

}  // namespace

void upload_json(std::string_view input) {
  constexpr std::int64_t kDefaultMaxTokens = 1'000;
  auto parsed = service::parse_json_upload(input, kDefaultMaxTokens);
  if (const auto* refusal = std::get_if<service::ApiAnswer>(&parsed)) {
    check(refusal->status == 400, "upload json: refusals are 400s");
    const auto* error = refusal->body.if_contains("error");
    check(error != nullptr && error->is_object(), "upload json: a refusal is an error object");
    const auto* message = error->as_object().if_contains("message");
    check(message != nullptr && message->is_string() && !message->as_string().empty(),
          "upload json: a refusal names the problem");
    return;
  }
  const auto& upload = std::get<service::JsonUpload>(parsed);
  check(!upload.max_tokens ||
            (*upload.max_tokens >= 1 && *upload.max_tokens <= service::kMaxTokensCeiling),
        "upload json: max_tokens is 1 to the ceiling");
  // What was read, written as JSON again, reads the same.
  boost::json::object again;
  if (upload.name) again["name"] = *upload.name;
  if (upload.max_tokens) again["max_tokens"] = *upload.max_tokens;
  boost::json::array pages;
  for (const std::string& page : upload.pages) pages.emplace_back(page);
  again["pages"] = std::move(pages);
  auto reparsed = service::parse_json_upload(boost::json::serialize(again), kDefaultMaxTokens);
  const auto* same = std::get_if<service::JsonUpload>(&reparsed);
  check(same != nullptr, "upload json: an accepted upload, written again, is accepted");
  check(same->name == upload.name && same->max_tokens == upload.max_tokens &&
            same->pages == upload.pages,
        "upload json: and reads the same");
}

void multipart(std::string_view input) {
  const std::size_t newline = input.find('\n');
  const std::string_view content_type =
      newline == std::string_view::npos ? input : input.substr(0, newline);
  const std::string_view body =
      newline == std::string_view::npos ? std::string_view() : input.substr(newline + 1);
  auto file = multipart_file(content_type, std::string(body));
  if (!file.ok()) {
    check(file.status().code() == StatusCode::invalid_argument, "multipart: refusals are 400s");
    check(!file.status().message().empty(), "multipart: a refusal names the problem");
    return;
  }
  // The part's bytes are cut out of the body as they were sent.
  check(body.find(file->data) != std::string_view::npos, "multipart: data is the body's bytes");
  check(file->filename.find_first_of("/\\") == std::string::npos,
        "multipart: the filename has no directories");
}

void pdf(std::string_view input) {
  // Every page not read as text is rendered, small (a fuzzer wants many runs a second, and the
  // rendering path is the same at any size).
  constexpr PdfReading kReading{.input = PageInputMode::automatic,
                                .render = {.dpi = 36.0, .max_long_edge = 256},
                                .max_pages = 50,
                                .max_page_bytes = std::int64_t{64} * 1024,
                                .max_image_bytes = std::int64_t{1} * 1024 * 1024,
                                .max_total_bytes = std::int64_t{8} * 1024 * 1024};
  auto pages = read_pdf(input, kReading);
  if (!pages.ok()) {
    const std::string& message = pages.status().message();
    check(pages.status().code() == StatusCode::invalid_argument ||
              pages.status().code() == StatusCode::payload_too_large,
          "pdf: refusals are 400s or 413s");
    check(!message.empty(), "pdf: a refusal names the problem");
    // Whatever bytes the input starts with (a refusal may quote them).
    check(std::all_of(message.begin(), message.end(), [](char c) { return c >= ' ' && c <= '~'; }),
          "pdf: a refusal is printable ASCII");
    return;
  }
  check(!pages->empty(), "pdf: an accepted PDF has pages");
  check(static_cast<std::int64_t>(pages->size()) <= kReading.max_pages,
        "pdf: at most max_pages pages");
  bool any_sent = false;
  for (const DocumentPage& page : pages.value()) {
    switch (page.kind) {
      case PageKind::text:
        check(static_cast<std::int64_t>(page.text.size()) <= kReading.max_page_bytes,
              "pdf: at most max_page_bytes bytes of text a page");
        check(!page.text.empty() && page.text.back() == '\n',
              "pdf: a text page's text ends with a newline");
        check(page.text.size() == 1 || page.text[page.text.size() - 2] != '\n',
              "pdf: with exactly one newline");
        check(!page.image, "pdf: a text page has no image");
        break;
      case PageKind::image: {
        check(page.image.has_value() && page.text.empty(), "pdf: an image page is its image");
        const auto header = read_image_header(page.image->bytes);
        check(header && header->media_type == page.image->media_type &&
                  header->width == page.image->width && header->height == page.image->height,
              "pdf: an image is what its header says");
        check(std::max(page.image->width, page.image->height) <= kReading.render.max_long_edge,
              "pdf: an image's long edge is within bounds");
        break;
      }
      case PageKind::blank:
        check(page.text.empty() && !page.image, "pdf: a blank page has nothing");
        break;
    }
    any_sent = any_sent || page.kind != PageKind::blank;
  }
  check(any_sent, "pdf: an accepted PDF has a page to send");
}

void provider_response(std::string_view input) {
  static constexpr int kStatuses[] = {200, 201, 400, 401, 404, 408, 413, 429, 500, 502, 503, 529};
  const int status =
      input.empty() ? 200
                    : kStatuses[static_cast<unsigned char>(input.front()) % std::size(kStatuses)];
  const std::string_view body = input.empty() ? input : input.substr(1);
  for (const Dialect dialect : {Dialect::openai, Dialect::anthropic}) {
    auto answer = provider::parse_answer(dialect, body);
    if (answer.ok()) {
      check(answer->input_tokens >= 0 && answer->output_tokens >= 0,
            "provider: token counts are not negative");
      check(storable_text(answer->output) == answer->output, "provider: the output is storable");
    } else {
      check(answer.status().code() == StatusCode::invalid_argument,
            "provider: a bad answer is invalid_argument");
      check(!answer.status().message().empty(), "provider: a bad answer names the problem");
    }
    const OutcomeKind kind = provider::classify(dialect, status, body, RateLimitHeaders{});
    check(!outcome_name(kind).empty(), "provider: every outcome has a name");
  }
  const std::string detail = provider::error_detail(body);
  check(detail.size() <= 300, "provider: error_detail is at most 300 bytes");
  check(storable_text(detail) == detail, "provider: error_detail is storable text");
}

void rate_limit_headers(std::string_view input) {
  const WallTime now = fixed_now();
  constexpr auto kDay = std::chrono::hours(24);
  HeaderList headers;
  for (std::string_view rest = input; !rest.empty();) {
    const std::size_t newline = rest.find('\n');
    const std::string_view line = rest.substr(0, newline);
    rest = newline == std::string_view::npos ? std::string_view() : rest.substr(newline + 1);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    headers.emplace_back(line.substr(0, colon), line.substr(colon + 1));
  }
  const RateLimitHeaders limits = parse_rate_limit_headers(headers, now);
  for (const RateLimitBucket* bucket :
       {&limits.requests, &limits.tokens, &limits.input_tokens, &limits.output_tokens}) {
    check(!bucket->limit || *bucket->limit >= 0, "headers: a limit is not negative");
    check(!bucket->remaining || *bucket->remaining >= 0, "headers: remaining is not negative");
    check(!bucket->reset || (*bucket->reset >= Clock::duration::zero() && *bucket->reset <= kDay),
          "headers: a reset is 0 to a day away");
  }
  check(!limits.retry_after ||
            (*limits.retry_after >= Clock::duration::zero() && *limits.retry_after <= kDay),
        "headers: Retry-After is 0 to a day");
  (void)limits.tokens_remaining();

  if (const auto wait = parse_retry_after(input, now)) {
    check(*wait >= Clock::duration::zero() && *wait <= kDay, "retry-after: 0 to a day");
  }
  if (const auto duration = parse_go_duration(input)) {
    check(*duration >= Clock::duration::zero() && *duration <= kDay, "go duration: 0 to a day");
    // Written back, it reads as the same duration rounded up to the millisecond.
    const auto again = parse_go_duration(format_go_duration(*duration));
    check(again.has_value(), "go duration: its formatting parses");
    check(*again == std::chrono::ceil<std::chrono::milliseconds>(*duration),
          "go duration: formatting keeps it, rounded up to the millisecond");
  }
  if (const auto when = parse_rfc3339(input)) {
    // Written back (whole seconds, rounded up), it reads as that second.
    const auto again = parse_rfc3339(format_rfc3339(*when));
    check(again.has_value(), "rfc3339: its formatting parses");
    check(*again == std::chrono::ceil<std::chrono::seconds>(*when),
          "rfc3339: formatting keeps it, rounded up to the second");
  }
}

void config_file(std::string_view input) {
  // The file lives in memory (memfd), written again for each input; CLI11 opens it by name.
  static const int fd = memfd_create("fairlane-fuzz.toml", 0);
  check(fd >= 0, "config: memfd_create works");
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const std::string_view toml = input.empty() ? input : input.substr(1);
  check(ftruncate(fd, 0) == 0, "config: the scratch file truncates");
  check(pwrite(fd, toml.data(), toml.size(), 0) == static_cast<ssize_t>(toml.size()),
        "config: the scratch file takes the input");

  // After the file, the subcommand whose section it may fill (serve needs --provider-url).
  static const std::vector<std::vector<std::string>> kCommands = {
      {"serve"},
      {"serve", "--provider-url", "http://127.0.0.1:9"},
      {"user", "add", "ann"},
      {"status"},
      {"enqueue"},
      {"estimate", "--pages", "3"},
      {"read-pdf"},
      {}};
  const auto& command =
      kCommands[input.empty() ? 0 : static_cast<unsigned char>(input.front()) % kCommands.size()];
  std::vector<std::string> args{"fairlane", "--config", path};
  args.insert(args.end(), command.begin(), command.end());
  std::vector<char*> argv;
  argv.reserve(args.size());
  for (std::string& arg : args) argv.push_back(arg.data());

  cli::CommandLine line;
  try {
    line.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
    return;  // main() prints it and exits 2 (or 0 for help and version)
  }
  // What the checks promise holds for values from the file too.
  if (line.serve_command->parsed()) {
    const cli::ServeOptions& o = line.serve;
    check(!o.provider_url.empty(), "config: serve has a provider");
    check(!o.db.empty() && !o.listen.empty() && !o.model.empty(),
          "config: serve has a database, an address and a model");
    check(o.max_header_kb >= 1 && o.max_header_kb <= 1024 && o.max_pages >= 1 &&
              o.max_page_kb >= 1 && o.max_connections >= 1,
          "config: the HTTP limits are in range");
    check(o.read_timeout >= 1.0 && o.call_timeout >= 0.01, "config: the timeouts are in range");
    check(o.rpm >= 0 && o.tpm >= 0 && o.max_in_flight >= 0, "config: limits are not negative");
    check(o.max_tokens > 0 && o.max_attempts > 0 && o.max_queued_pages_per_user > 0 &&
              o.max_body_mb > 0,
          "config: counts are positive");
    check(o.max_wait > 0 && o.backoff_base > 0 && o.backoff_max > 0, "config: times are positive");
    check(o.price_per_mtok >= 0, "config: a price is not negative");
    check(o.pdf_timeout >= 1.0 && o.pdf_timeout <= 3600.0, "config: pdf-timeout is 1 to 3600");
    check(o.pdf_memory_mb >= 64 && o.pdf_memory_mb <= 1'000'000, "config: pdf-memory-mb range");
    check(o.heartbeat >= 0.1 && o.heartbeat <= 3600.0, "config: heartbeat is 0.1 to 3600");
  }
  if (line.estimate_command->parsed()) {
    check(line.estimate_pages > 0, "config: estimate's pages are positive");
  }
  if (line.enqueue_command->parsed() && line.enqueue.max_tokens) {
    check(*line.enqueue.max_tokens >= 1 && *line.enqueue.max_tokens <= 1'000'000,
          "config: enqueue's max-tokens is 1 to 1,000,000");
  }
}

}  // namespace fairlane::fuzz
