#include "cli/display.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>
#include <charconv>
#include <cmath>
#include <ctime>

namespace fairlane::cli {
namespace {

namespace json = boost::json;

std::int64_t int_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_int64() ? v->as_int64() : 0;
}

std::optional<double> number_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->to_number<double>();
}

std::string string_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

// Cuts a name to `width` display cells (bytes; names are mostly ASCII), with "…" at the end.
std::string fit(std::string_view text, std::size_t width) {
  std::string fitted(text.substr(0, std::min(text.size(), width - 1)));
  if (text.size() > width)
    fitted += '~';
  else
    fitted = std::string(text);
  return fitted;
}

}  // namespace

std::string one_line(std::string_view text) {
  std::string line = for_terminal(text);
  std::replace_if(
      line.begin(), line.end(), [](char c) { return c == '\n' || c == '\t'; }, ' ');
  return line;
}

std::vector<std::string> failed_pages(const json::value& result) {
  std::vector<std::string> failures;
  const json::object* o = result.if_object();
  const json::value* pages = o != nullptr ? o->if_contains("pages") : nullptr;
  if (pages == nullptr || !pages->is_array()) return failures;
  for (const json::value& page : pages->as_array()) {
    const json::object* p = page.if_object();
    if (p == nullptr) continue;
    const json::value* state = p->if_contains("state");
    if (state == nullptr || !state->is_string() || state->as_string() != "failed") continue;
    const json::value* number = p->if_contains("page");
    const json::value* error = p->if_contains("error");
    failures.push_back(fmt::format(
        "page {}: {}",
        number != nullptr && number->is_int64() ? std::to_string(number->as_int64()) : "?",
        error != nullptr && error->is_string() ? std::string(error->as_string())
                                               : std::string("(no reason given)")));
  }
  return failures;
}

Result<JobStatus> job_from(const json::value& value) {
  const json::object* o = value.if_object();
  if (o == nullptr || !o->contains("id") || !o->contains("pages") || !o->at("pages").is_object()) {
    return Status(StatusCode::invalid_argument, "the service's answer is not a job object");
  }
  JobStatus job;
  job.id = string_at(*o, "id");
  job.name = string_at(*o, "name");
  job.state = string_at(*o, "state");
  const json::object& pages = o->at("pages").as_object();
  job.total = int_at(pages, "total");
  job.queued = int_at(pages, "queued");
  job.in_flight = int_at(pages, "in_flight");
  job.done = int_at(pages, "done");
  job.failed = int_at(pages, "failed");
  job.cancelled = int_at(pages, "cancelled");
  job.images = int_at(pages, "images");
  job.blank = int_at(pages, "blank");
  if (const json::value* p = o->if_contains("position"); p != nullptr && p->is_int64()) {
    job.position = p->as_int64();
  }
  job.eta_s = number_at(*o, "eta_seconds");
  job.promised_eta_at = string_at(*o, "promised_eta_at");
  job.eta_revised_at = string_at(*o, "eta_revised_at");
  job.eta_revised_reason = string_at(*o, "eta_revised_reason");
  if (const json::value* u = o->if_contains("usage"); u != nullptr && u->is_object()) {
    job.input_tokens = int_at(u->as_object(), "input_tokens");
    job.output_tokens = int_at(u->as_object(), "output_tokens");
    job.cost_usd = number_at(u->as_object(), "cost_usd").value_or(0.0);
  }
  job.created_at = string_at(*o, "created_at");
  if (const json::value* f = o->if_contains("finished_at"); f != nullptr && f->is_string()) {
    job.finished_at = std::string(f->as_string());
  }
  return job;
}

Result<JobStatus> parse_job(std::string_view text) {
  boost::system::error_code error;
  const json::value value = json::parse(text, error);
  if (error) {
    return Status(StatusCode::invalid_argument,
                  fmt::format("the service's answer is not JSON ({})", error.message()));
  }
  return job_from(value);
}

std::string format_duration(double seconds) {
  seconds = std::max(seconds, 0.0);
  if (seconds < 10) return fmt::format("{:.1f} s", seconds);
  const auto whole = static_cast<std::int64_t>(std::llround(seconds));
  if (whole < 60) return fmt::format("{} s", whole);
  if (whole < 3'600) return fmt::format("{}m {:02}s", whole / 60, whole % 60);
  return fmt::format("{}h {:02}m", whole / 3'600, (whole % 3'600) / 60);
}

std::string progress_bar(std::int64_t ended, std::int64_t total, int width) {
  const auto cells = static_cast<std::int64_t>(std::max(width, 1));
  const std::int64_t filled =
      total <= 0 ? 0 : std::clamp<std::int64_t>(ended * cells / total, 0, cells);
  std::string bar = "[";
  bar.append(static_cast<std::size_t>(filled), '#');
  bar.append(static_cast<std::size_t>(cells - filled), '.');
  bar += ']';
  return bar;
}

std::string progress_line(const JobStatus& job, std::optional<double> eta_s,
                          std::optional<double> pages_per_min, bool terminal) {
  std::string where;
  if (job.ended()) {
    where = job.state;
  } else {
    where = fmt::format("position {}", job.position ? std::to_string(*job.position) : "-");
    if (eta_s) where += fmt::format(", eta {}", format_duration(*eta_s));
    // An RFC 3339 time (the service's, UTC) on the reader's clock, with its zone:
    // "2026-12-01T12:03:04Z" -> "14:03:04 EET" two hours east; a time that does not read
    // as one as it came.
    const auto clock_time = [](const std::string& t) -> std::string {
      const auto seconds = epoch_seconds(t);
      if (!seconds) return t;
      const auto when = static_cast<std::time_t>(std::floor(*seconds));
      std::tm local{};
      if (localtime_r(&when, &local) == nullptr) return t;
      char text[64];
      const std::size_t n = std::strftime(text, sizeof text, "%H:%M:%S %Z", &local);
      return n > 0 ? std::string(text, n) : t;
    };
    if (!job.promised_eta_at.empty()) {
      where += fmt::format(", promised by {}", clock_time(job.promised_eta_at));
    }
    if (!job.eta_revised_at.empty()) {
      where += fmt::format(" (revised to {}: {})", clock_time(job.eta_revised_at),
                           one_line(job.eta_revised_reason));
    }
  }
  const std::string rate =
      pages_per_min ? fmt::format("{:.1f} pages/min", *pages_per_min) : std::string("- pages/min");
  if (terminal) {
    return fmt::format("{:<24} {} {:>5}/{:<5} {:>3} failed  {:<28} {}", fit(one_line(job.name), 24),
                       progress_bar(job.done + job.failed, job.total, 24), job.done, job.total,
                       job.failed, where, rate);
  }
  return fmt::format("{} {}: {}/{} done, {} failed, {}, {}", job.id, one_line(job.name), job.done,
                     job.total, job.failed, where, rate);
}

std::string cut_to_columns(std::string_view line, std::size_t columns) {
  if (columns == 0 || line.size() < columns) return std::string(line);
  std::size_t end = columns - 1;
  while (end > 0 && (static_cast<unsigned char>(line[end]) & 0xC0U) == 0x80U) --end;
  return std::string(line.substr(0, end));
}

std::string jobs_table(const std::vector<JobStatus>& jobs) {
  if (jobs.empty()) return "no jobs\n";
  std::string out = fmt::format("{:<28}  {:<24}  {:<9}  {:>11}  {:>6}  {:>8}  {:>8}\n", "ID",
                                "NAME", "STATE", "DONE/TOTAL", "FAILED", "POSITION", "ETA");
  for (const JobStatus& job : jobs) {
    out += fmt::format("{:<28}  {:<24}  {:<9}  {:>11}  {:>6}  {:>8}  {:>8}\n", job.id,
                       fit(one_line(job.name), 24), job.state,
                       fmt::format("{}/{}", job.done, job.total), job.failed,
                       job.position ? std::to_string(*job.position) : "-",
                       job.eta_s ? format_duration(*job.eta_s) : "-");
  }
  return out;
}

std::string summary(const std::vector<JobSummary>& jobs) {
  std::string out = fmt::format("{:<24}  {:<9}  {:>11}  {:>13}  {:>9}  {:>12}  {:>10}\n", "JOB",
                                "STATE", "DONE/TOTAL", "IMAGES/BLANK", "TIME", "TOKENS", "COST");
  std::int64_t tokens = 0;
  double cost = 0.0;
  for (const JobSummary& s : jobs) {
    const JobStatus& job = s.job;
    tokens += job.input_tokens + job.output_tokens;
    cost += job.cost_usd;
    out += fmt::format("{:<24}  {:<9}  {:>11}  {:>13}  {:>9}  {:>12}  {:>10}\n",
                       fit(one_line(job.name), 24), job.state,
                       fmt::format("{}/{}", job.done, job.total),
                       fmt::format("{}/{}", job.images, job.blank), format_duration(s.seconds),
                       job.input_tokens + job.output_tokens, fmt::format("${:.4f}", job.cost_usd));
  }
  if (jobs.size() > 1) {
    out += fmt::format("{:<24}  {:<9}  {:>11}  {:>13}  {:>9}  {:>12}  {:>10}\n", "total", "", "",
                       "", "", tokens, fmt::format("${:.4f}", cost));
  }
  for (const JobSummary& s : jobs) {
    if (s.failures.empty()) continue;
    out += fmt::format("\n{} ({}): {} failed\n", one_line(s.job.name), s.job.id, s.failures.size());
    for (const std::string& failure : s.failures) out += "  " + one_line(failure) + "\n";
  }
  return out;
}

std::string result_markdown(const json::value& result, std::string_view name) {
  std::string out = fmt::format("# {}\n", name);
  const json::object* o = result.if_object();
  const json::value* pages = o ? o->if_contains("pages") : nullptr;
  if (pages == nullptr || !pages->is_array()) return out;
  for (const json::value& page : pages->as_array()) {
    const json::object* p = page.if_object();
    if (p == nullptr) continue;
    out += fmt::format("\n## Page {}\n\n", int_at(*p, "page"));
    if (string_at(*p, "kind") == "blank") {
      out += "_blank page: no text and no ink, nothing was sent_\n";
    } else if (const json::value* output = p->if_contains("output");
               output && output->is_string()) {
      std::string text(output->as_string());
      while (!text.empty() && text.back() == '\n') text.pop_back();
      out += text + "\n";
    } else {
      const std::string error = string_at(*p, "error");
      out += fmt::format("_{}{}_\n", string_at(*p, "state"), error.empty() ? "" : ": " + error);
    }
  }
  return out;
}

std::optional<double> epoch_seconds(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS, then .mmm or not, as the service writes its times.
  const auto number = [text](std::size_t at, std::size_t digits, int& out) {
    if (text.size() < at + digits) return false;
    const char* first = text.data() + at;
    const auto [end, error] = std::from_chars(first, first + digits, out);
    return error == std::errc{} && end == first + digits;
  };
  const auto is = [text](std::size_t at, char c) { return at < text.size() && text[at] == c; };
  std::tm tm{};
  int millis = 0;
  if (!number(0, 4, tm.tm_year) || !is(4, '-') || !number(5, 2, tm.tm_mon) || !is(7, '-') ||
      !number(8, 2, tm.tm_mday) || !is(10, 'T') || !number(11, 2, tm.tm_hour) || !is(13, ':') ||
      !number(14, 2, tm.tm_min) || !is(16, ':') || !number(17, 2, tm.tm_sec)) {
    return std::nullopt;
  }
  if (is(19, '.') && !number(20, 3, millis)) return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<double>(timegm(&tm)) + millis / 1000.0;
}

std::optional<double> seconds_between(std::string_view from, std::string_view to) {
  const auto a = epoch_seconds(from);
  const auto b = epoch_seconds(to);
  if (!a || !b) return std::nullopt;
  return *b - *a;
}

std::optional<double> pages_per_minute(const JobStatus& job, double now_epoch_s) {
  const auto start = epoch_seconds(job.created_at);
  if (!start) return std::nullopt;
  double end = now_epoch_s;
  if (job.finished_at) {
    const auto finished = epoch_seconds(*job.finished_at);
    if (!finished) return std::nullopt;
    end = *finished;
  }
  const double elapsed_s = end - *start;
  if (elapsed_s < 0.001) return std::nullopt;
  return static_cast<double>(job.done) * 60.0 / elapsed_s;
}

std::string for_terminal(std::string_view text) {
  constexpr char kEsc = '\x1b';
  constexpr char kBel = '\x07';
  // A C1 control as UTF-8 (U+0080 to U+009F: 0xC2 then 0x80 to 0x9F); its code, or 0.
  const auto c1_at = [&text](std::size_t i) -> unsigned {
    if (i + 1 >= text.size() || static_cast<unsigned char>(text[i]) != 0xC2) return 0;
    const auto next = static_cast<unsigned char>(text[i + 1]);
    return next >= 0x80 && next <= 0x9F ? next : 0;
  };
  // From `i`, past the parameters, intermediates and final byte of a control sequence.
  const auto skip_csi = [&text](std::size_t i) {
    while (i < text.size() && static_cast<unsigned char>(text[i]) >= 0x20 &&
           static_cast<unsigned char>(text[i]) <= 0x3F) {
      ++i;
    }
    if (i < text.size() && static_cast<unsigned char>(text[i]) >= 0x40 &&
        static_cast<unsigned char>(text[i]) <= 0x7E) {
      ++i;
    }
    return i;
  };
  // From `i`, past a control string (OSC, DCS, SOS, PM, APC) and its terminator: BEL, ESC
  // and a backslash (ST), or ST as U+009C. An unterminated one runs to the end.
  const auto skip_string = [&](std::size_t i) {
    while (i < text.size()) {
      if (text[i] == kBel) return i + 1;
      if (text[i] == kEsc && i + 1 < text.size() && text[i + 1] == '\\') return i + 2;
      if (c1_at(i) == 0x9C) return i + 2;
      ++i;
    }
    return i;
  };
  const auto is_string_introducer = [](unsigned code) {
    // DCS, SOS, OSC, PM, APC (as the byte after ESC, minus 0x40, plus 0x80)
    return code == 0x90 || code == 0x98 || code == 0x9D || code == 0x9E || code == 0x9F;
  };
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == kEsc) {
      if (i + 1 >= text.size()) break;
      const auto next = static_cast<unsigned char>(text[i + 1]);
      if (next == '[') {
        i = skip_csi(i + 2);
      } else if (next >= 0x40 && next <= 0x5F &&
                 is_string_introducer(static_cast<unsigned>(next) + 0x40U)) {
        i = skip_string(i + 2);
      } else {
        // ESC, any intermediates (0x20 to 0x2F), then its final byte (0x30 to 0x7E); a
        // control after it is left to the rules below (a newline stays).
        i += 1;
        while (i < text.size() && static_cast<unsigned char>(text[i]) >= 0x20 &&
               static_cast<unsigned char>(text[i]) <= 0x2F) {
          ++i;
        }
        if (i < text.size() && static_cast<unsigned char>(text[i]) >= 0x30 &&
            static_cast<unsigned char>(text[i]) <= 0x7E) {
          ++i;
        }
      }
      continue;
    }
    if (const unsigned code = c1_at(i); code != 0) {
      if (code == 0x9B) {
        i = skip_csi(i + 2);
      } else if (is_string_introducer(code)) {
        i = skip_string(i + 2);
      } else {
        i += 2;
      }
      continue;
    }
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) {
      ++i;
      continue;
    }
    out.push_back(text[i]);
    ++i;
  }
  return out;
}

}  // namespace fairlane::cli
