#include "cli/commands.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <system_error>
#include <thread>

#include "cli/display.hpp"
#include "fairlane/core/text.hpp"
#include "fairlane/store/store.hpp"

namespace fairlane::cli {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

std::string encode(std::string_view text) {
  return boost::urls::encode(text, boost::urls::unreserved_chars);
}

json::value parse_or_null(std::string_view body) {
  boost::system::error_code error;
  json::value value = json::parse(body, error);
  return error ? json::value(nullptr) : value;
}

// The error object of an answer, or an empty one.
json::object error_of(const HttpReply& reply) {
  const json::value value = parse_or_null(reply.body);
  if (const auto* o = value.if_object()) {
    if (const auto* e = o->if_contains("error"); e && e->is_object()) return e->as_object();
  }
  return {};
}

std::string string_of(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

double number_of(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_number() ? v->to_number<double>() : 0.0;
}

// Prints what the service refused and why; returns the exit status for it.
int refused(const HttpReply& reply, std::string_view what, const Output& output) {
  const json::object e = error_of(reply);
  const std::string type = string_of(e, "type");
  std::string message = string_of(e, "message");
  if (message.empty()) {
    message = fmt::format("the service answered {}: {}", reply.status, reply.body.substr(0, 200));
  }
  if (type == "busy" && e.contains("position")) {
    output.err << fmt::format(
        "{}: busy: {}\n  position {}, estimated wait {}, most accepted {}; try again in {}\n", what,
        message, static_cast<std::int64_t>(number_of(e, "position")),
        format_duration(number_of(e, "estimated_wait_seconds")),
        format_duration(number_of(e, "max_wait_seconds")),
        format_duration(reply.retry_after_s ? static_cast<double>(*reply.retry_after_s)
                                            : number_of(e, "retry_after_seconds")));
  } else {
    output.err << fmt::format("{}: {}\n", what, message);
  }
  return exit_code_for(reply.status);
}

int failed(const Status& status, const Output& output) {
  output.err << "fairlane: " << status.message() << '\n';
  return kExitFailure;
}

// A job's whole result: the service answers a range of pages at a time, with the page to go
// on from (next_from); the ranges asked in turn, their pages joined into one answer, as the
// service would give it whole. The first answer that is not 200 is returned as it came.
Result<HttpReply> whole_result(HttpClient& client, const std::string& job) {
  json::object whole;
  json::array pages;
  std::int64_t from = 1;
  while (true) {
    auto reply = client.get(fmt::format("/v1/jobs/{}/result?from={}", encode(job), from));
    if (!reply.ok() || reply->status != 200) return reply;
    json::value body = parse_or_null(reply->body);
    json::object* o = body.if_object();
    json::value* some = o != nullptr ? o->if_contains("pages") : nullptr;
    if (some == nullptr || !some->is_array()) return reply;  // not a result: shown as it is
    for (json::value& page : some->as_array()) pages.push_back(std::move(page));
    whole = std::move(*o);
    const json::value* next = whole.if_contains("next_from");
    if (next == nullptr || next->is_null()) break;
    // Only forward: an answer that pointed back would be asked for ever, and one cut short
    // would pass for the whole result.
    if (!next->is_int64() || next->as_int64() <= from) {
      return Status{StatusCode::internal,
                    fmt::format("the service's result of {} answered from page {} goes on at {}, "
                                "not at a later page: is --server a fairlane service?",
                                job, from, json::serialize(*next))};
    }
    from = next->as_int64();
  }
  whole["pages"] = std::move(pages);
  whole["next_from"] = nullptr;
  return HttpReply{200, json::serialize(whole), std::nullopt};
}

// An upload's Idempotency-Key when none was given: 128 random bits, as hex. Sent again with
// the same key, an upload the service had accepted gets that job, not a second one.
std::string new_idempotency_key() {
  std::random_device random;
  std::string key;
  for (int i = 0; i < 4; ++i) key += fmt::format("{:08x}", random());
  return key;
}

// POST /v1/jobs with the upload's name (a PDF's, after its file unless --name says; a pages
// file names itself unless --name says) and --max-tokens.
std::string upload_target(const std::string& path, std::string_view content_type,
                          const EnqueueOptions& options) {
  std::vector<std::string> query;
  if (content_type == "application/pdf") {
    query.push_back("name=" +
                    encode(options.name.value_or(std::filesystem::path(path).filename().string())));
  } else if (options.name) {
    query.push_back("name=" + encode(*options.name));
  }
  if (options.max_tokens) query.push_back("max_tokens=" + std::to_string(*options.max_tokens));
  std::string target = "/v1/jobs";
  for (std::size_t i = 0; i < query.size(); ++i) target += (i == 0 ? "?" : "&") + query[i];
  return target;
}

// Writes all of `text` to `fd`: 0, or the errno of the write that failed.
int write_all(int fd, std::string_view text) {
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    written += static_cast<std::size_t>(n);
  }
  return 0;
}

// The mode a file written in place of `path` gets: the one it had, or a new file's.
mode_t mode_for(const std::string& path) {
  struct stat had {};
  if (::stat(path.c_str(), &had) == 0) return had.st_mode & 07777;
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

// Writes `text` to `path`. A regular file (or none yet) is replaced whole or not at all: the
// text goes to a file of its own beside it (mkstemp), synced, which then takes its name, so a
// full disk leaves an older result there as it was. Anything else is written through as it
// is: a symlink (/dev/stdout redirected to a file is one), a device, a pipe; and a file in a
// folder that may not have files made in it. The error names the cause.
Status write_whole(const std::string& path, std::string_view text) {
  std::error_code ignored;
  const auto type = std::filesystem::symlink_status(path, ignored).type();
  bool replace =
      type == std::filesystem::file_type::regular || type == std::filesystem::file_type::not_found;
  std::string temporary = path + ".XXXXXX";
  int fd = replace ? ::mkstemp(temporary.data()) : -1;
  if (replace && fd < 0) {
    const bool folder_closed = errno == EACCES || errno == EROFS || errno == EPERM;
    if (type != std::filesystem::file_type::regular || !folder_closed) {
      return Status(StatusCode::io_error, std::generic_category().message(errno));
    }
    replace = false;
  }
  if (replace) {
    (void)::fchmod(fd, mode_for(path));  // mkstemp's file is the owner's alone
  } else {
    fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return Status(StatusCode::io_error, std::generic_category().message(errno));
  }
  int error = write_all(fd, text);
  if (error == 0 && replace && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error == 0 && replace && ::rename(temporary.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0 && replace) (void)::unlink(temporary.c_str());
  if (error != 0) return Status(StatusCode::io_error, std::generic_category().message(error));
  return {};
}

// Whether an upload answered `reply` (not 202) may have been accepted all the same: the
// service says so (outcome_unknown), or something between it and the client answered 408
// or 5xx in its place (a proxy's 502 or 504: an answer that is not the service's own JSON
// error), which says nothing of whether the service took it.
bool may_have_been_accepted(const HttpReply& reply) {
  const std::string type = string_of(error_of(reply), "type");
  if (!type.empty()) return type == "outcome_unknown";
  return reply.status == 408 || reply.status >= 500;
}

void print_accepted(const JobStatus& job, std::string_view file, const Output& output) {
  output.out << fmt::format("accepted {} as {}: {} pages, position {}, eta {}\n", file, job.id,
                            job.total, job.position ? std::to_string(*job.position) : "-",
                            job.eta_s ? format_duration(*job.eta_s) : "-");
}

}  // namespace

int exit_code_for(long http_status) {
  switch (http_status) {
    case 400:
    case 413:
    case 415:
    case 422:
      return kExitRejected;
    case 401:
    case 403:
      return kExitUnauthorized;
    case 404:
      return kExitNotFound;
    case 429:
    case 503:
      return kExitBusy;
    default:
      return http_status >= 200 && http_status < 300 ? kExitOk : kExitFailure;
  }
}

std::optional<std::string> idempotency_key_problem(std::string_view key) {
  std::string why;
  if (key.empty()) {
    why = "it is empty";
  } else if (key.size() > kMaxIdempotencyKeyBytes) {
    why = fmt::format("it has {} bytes", key.size());
  } else if (std::any_of(key.begin(), key.end(), [](char c) {
               return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
             })) {
    why = "it holds a control character";
  } else if (!is_storable_text(key)) {
    why = "it is not UTF-8";
  } else if (key.find_first_not_of(' ') == std::string_view::npos) {
    why = "it is only spaces";
  } else {
    return std::nullopt;
  }
  return fmt::format(
      "--idempotency-key is 1 to {} bytes of UTF-8 text without control characters, not only "
      "spaces, and {}: pass another, such as the output of uuidgen, or leave the flag out to "
      "have one made up",
      kMaxIdempotencyKeyBytes, why);
}

int enqueue(HttpClient& client, const EnqueueOptions& options, const Output& output,
            std::vector<std::string>& accepted) {
  struct Upload {
    std::string path;
    std::string content_type;
  };
  std::vector<Upload> uploads;
  if (options.pages_json) uploads.push_back({*options.pages_json, "application/json"});
  for (const std::string& file : options.files) uploads.push_back({file, "application/pdf"});
  if (uploads.empty()) {
    output.err << "fairlane: name the PDFs to upload (or --pages-json FILE)\n";
    return kExitUsage;
  }
  if (options.name && uploads.size() > 1) {
    output.err << "fairlane: --name names one upload; leave it out to name each after its file\n";
    return kExitUsage;
  }
  if (options.idempotency_key && uploads.size() > 1) {
    output.err << "fairlane: --idempotency-key names one upload (the same key would give every "
                  "file the first one's job): upload the files one by one\n";
    return kExitUsage;
  }
  if (options.idempotency_key) {
    if (const auto problem = idempotency_key_problem(*options.idempotency_key)) {
      output.err << "fairlane: " << *problem << '\n';
      return kExitUsage;
    }
  }
  int exit_status = kExitOk;
  // The uploads not tried, once one fails in a way that ends the command.
  const auto not_sent = [&](std::size_t failed_at) {
    std::string rest;
    for (std::size_t i = failed_at + 1; i < uploads.size(); ++i) {
      rest += (rest.empty() ? "" : ", ") + uploads[i].path;
    }
    if (!rest.empty()) output.err << fmt::format("  not sent: {}\n", rest);
  };
  for (std::size_t i = 0; i < uploads.size(); ++i) {
    const Upload& upload = uploads[i];
    const std::string target = upload_target(upload.path, upload.content_type, options);
    const std::string key = options.idempotency_key.value_or(new_idempotency_key());
    auto reply =
        client.post_file(target, upload.content_type, upload.path, {"Idempotency-Key: " + key});
    if (!reply.ok() && reply.status().code() == StatusCode::invalid_argument) {
      output.err << "fairlane: " << reply.status().message() << '\n';  // the file, unread
      exit_status = exit_status == kExitOk ? kExitUsage : exit_status;
      continue;
    }
    // It may have been accepted: sent again with its key, it cannot be taken twice.
    const auto resend_hint = [&] {
      output.err << fmt::format(
          "  send it again with --idempotency-key {}: if it was accepted, that gives its job, "
          "not a second one\n",
          key);
    };
    if (!reply.ok()) {
      output.err << fmt::format("fairlane: {}: {}\n", upload.path, reply.status().message());
      if (reply.status().code() == StatusCode::outcome_unknown) resend_hint();
      not_sent(i);
      return kExitFailure;
    }
    if (reply->status != 202) {
      const int code = refused(reply.value(), upload.path, output);
      if (may_have_been_accepted(reply.value())) resend_hint();
      if (exit_status == kExitOk) exit_status = code;
      continue;
    }
    auto job = parse_job(reply->body);
    if (!job.ok()) return failed(job.status(), output);
    print_accepted(job.value(), upload.path, output);
    accepted.push_back(job->id);
  }
  return exit_status;
}

int watch(HttpClient& client, const std::vector<std::string>& jobs, const Output& output) {
  struct Watched {
    std::optional<JobStatus> job;
    Clock::time_point event_at;                    // when its last event came
    std::optional<EventStreams::Refusal> refused;  // its stream was refused: not watched
  };
  std::map<std::string, Watched> watched;
  std::map<std::string, std::string> last_event;
  std::vector<std::string> order;
  EventStreams streams(client.server(), client.key());
  for (const std::string& id : jobs) {
    if (watched.contains(id)) continue;
    watched[id] = {};
    order.push_back(id);
    streams.watch(id);
  }
  const auto line = [&](const std::string& id, Clock::time_point now) {
    const Watched& w = watched.at(id);
    if (w.refused) {
      return fmt::format("{}: the service answered {}: {}", one_line(id), w.refused->status,
                         one_line(w.refused->message));
    }
    if (!w.job) return fmt::format("{}: waiting for its first event", one_line(id));
    std::optional<double> eta = w.job->eta_s;
    if (eta) eta = std::max(*eta - std::chrono::duration<double>(now - w.event_at).count(), 0.0);
    // Pages done since the upload, over the time until now or, once ended, until its end.
    const double wall_now_s =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    return progress_line(*w.job, eta, pages_per_minute(*w.job, wall_now_s), output.terminal);
  };
  const Clock::time_point start = Clock::now();
  bool drawn = false;
  while (streams.open() > 0) {
    auto polled = streams.poll(std::chrono::milliseconds(output.terminal ? 250 : 1'000));
    if (!polled.ok()) {
      output.err << "fairlane: " << polled.status().message() << '\n';
      return streams.failed_status() != 0 ? exit_code_for(streams.failed_status()) : kExitFailure;
    }
    const Clock::time_point now = Clock::now();
    // A job the service refused (a typo, another user's): only its own watch ends.
    for (EventStreams::Refusal& refusal : polled->refused) {
      const std::string id = refusal.job;
      watched[id].refused = std::move(refusal);
      if (!output.terminal) output.out << line(id, now) << '\n';
    }
    for (auto& [id, event] : polled->events) {
      if (event.type != "job") continue;
      // A stream opened again starts with the job as it is: not news if nothing changed.
      if (last_event[id] == event.data) continue;
      last_event[id] = event.data;
      auto job = parse_job(event.data);
      if (!job.ok()) continue;
      Watched& w = watched[id];
      w.job = std::move(job).value();
      w.event_at = now;
      if (w.job->ended()) streams.close(id);
      if (!output.terminal) output.out << line(id, now) << '\n';
    }
    if (output.terminal) {
      // Redraws the block of lines in place: up to its first line, then each line cleared.
      if (drawn) output.out << fmt::format("\x1b[{}A", order.size());
      const std::size_t columns = output.columns != nullptr ? output.columns() : 0;
      for (const std::string& id : order) {
        output.out << "\r\x1b[2K" << cut_to_columns(line(id, now), columns) << '\n';
      }
      drawn = true;
    }
    output.out.flush();
  }

  std::vector<JobSummary> summaries;
  bool all_done = true;
  long refused_status = 0;  // the first refusal's, by the jobs' order
  for (const std::string& id : order) {
    const Watched& w = watched.at(id);
    JobSummary s;
    if (w.refused || !w.job) {
      // Never watched: a row of its own, the reason among the failures.
      s.job.id = id;
      s.job.name = id;
      s.job.state = w.refused && w.refused->status == 404 ? "not found" : "refused";
      s.failures.push_back(w.refused ? fmt::format("the service answered {}: {}", w.refused->status,
                                                   w.refused->message)
                                     : std::string("no event came"));
      if (refused_status == 0) refused_status = w.refused ? w.refused->status : 0;
      all_done = false;
      summaries.push_back(std::move(s));
      continue;
    }
    s.job = *w.job;
    all_done = all_done && s.job.state == "done";
    s.seconds = s.job.finished_at
                    ? seconds_between(s.job.created_at, *s.job.finished_at)
                          .value_or(std::chrono::duration<double>(Clock::now() - start).count())
                    : 0.0;
    if (s.job.failed > 0) {
      auto reply = whole_result(client, id);
      if (reply.ok() && reply->status == 200) s.failures = failed_pages(parse_or_null(reply->body));
    }
    summaries.push_back(std::move(s));
  }
  output.out << '\n' << summary(summaries);
  if (refused_status != 0) return exit_code_for(refused_status);
  return all_done ? kExitOk : kExitJobFailed;
}

int status(HttpClient& client, const Output& output) {
  auto queue = client.get("/v1/queue");
  if (!queue.ok()) return failed(queue.status(), output);
  if (queue->status != 200) return refused(queue.value(), "status", output);
  const json::value q = parse_or_null(queue->body);
  if (const auto* o = q.if_object()) {
    const auto bucket = [&](std::string_view name) {
      const auto* buckets = o->if_contains("buckets");
      const auto* level =
          buckets && buckets->is_object() ? buckets->as_object().if_contains(name) : nullptr;
      return level && level->is_number() ? fmt::format("{:.0f}", level->to_number<double>())
                                         : std::string("unlimited");
    };
    const auto count = [&](std::string_view key) {
      const auto* v = o->if_contains(key);
      return v && v->is_number() ? v->to_number<std::int64_t>() : 0;
    };
    const auto* paused = o->if_contains("paused");
    const std::string binding = string_of(*o, "binding");  // null: no limit at all
    output.out << fmt::format(
        "service: {} lanes, {} pages queued, {} held, {} in flight; binding limit: {}; buckets: "
        "requests {}, tokens {}; provider pause: {}\n",
        count("lanes"), count("queued"), count("held"), count("in_flight"),
        binding.empty() ? "none" : binding, bucket("requests"), bucket("tokens"),
        paused && paused->is_bool() && paused->as_bool() ? "yes" : "no");
    // The admin's view: every lane with work, by user.
    if (const auto* users = o->if_contains("users"); users && users->is_array()) {
      output.out << fmt::format("\n{:<24} {:>6} {:>10} {:>12} {:>9}\n", "user", "weight", "queued",
                                "tokens", "in flight");
      for (const json::value& lane : users->as_array()) {
        if (!lane.is_object()) continue;
        const json::object& l = lane.as_object();
        output.out << fmt::format("{:<24} {:>6} {:>10} {:>12} {:>9}\n", string_of(l, "user"),
                                  static_cast<std::int64_t>(number_of(l, "weight")),
                                  static_cast<std::int64_t>(number_of(l, "queued")),
                                  static_cast<std::int64_t>(number_of(l, "queued_tokens")),
                                  static_cast<std::int64_t>(number_of(l, "in_flight")));
      }
      if (users->as_array().empty()) output.out << "(no lane has work)\n";
      return kExitOk;  // the admin key has no jobs of its own
    }
  }
  auto jobs = client.get("/v1/jobs?limit=50");
  if (!jobs.ok()) return failed(jobs.status(), output);
  if (jobs->status != 200) return refused(jobs.value(), "status", output);
  std::vector<JobStatus> list;
  const json::value body = parse_or_null(jobs->body);
  if (const auto* o = body.if_object(); o && o->contains("jobs") && o->at("jobs").is_array()) {
    for (const json::value& j : o->at("jobs").as_array()) {
      auto job = job_from(j);
      if (job.ok()) list.push_back(std::move(job).value());
    }
  }
  output.out << '\n' << jobs_table(list);
  if (const auto* o = body.if_object(); o && !string_of(*o, "next_cursor").empty()) {
    output.out << fmt::format("(your newest {} jobs; there are more)\n", list.size());
  }
  return kExitOk;
}

int result(HttpClient& client, const std::string& job, const std::optional<std::string>& file,
           bool as_json, const Output& output) {
  auto view = client.get("/v1/jobs/" + encode(job));
  if (!view.ok()) return failed(view.status(), output);
  if (view->status != 200) return refused(view.value(), job, output);
  auto reply = whole_result(client, job);
  if (!reply.ok()) return failed(reply.status(), output);
  if (reply->status != 200) return refused(reply.value(), job, output);
  auto status = parse_job(view->body);
  const std::string name = status.ok() ? status->name : job;
  const std::string text =
      as_json ? reply->body + "\n" : result_markdown(parse_or_null(reply->body), name);
  if (file) {
    if (Status written = write_whole(*file, text); !written.ok()) {
      output.err << fmt::format("fairlane: cannot write {}: {}\n", *file, written.message());
      return kExitFailure;
    }
    output.out << fmt::format("wrote {} ({} pages, {})\n", *file, status.ok() ? status->total : 0,
                              status.ok() ? status->state : "unknown");
  } else {
    // A terminal would act on escape sequences in the provider's output; a pipe or a file
    // gets the bytes as served.
    output.out << (output.terminal ? for_terminal(text) : text);
  }
  if (status.ok() && !status->ended()) {
    output.err << fmt::format("note: {} has not ended: {} of {} pages are done so far\n", job,
                              status->done, status->total);
  }
  return kExitOk;
}

int cancel(HttpClient& client, const std::string& job, const Output& output) {
  auto reply = client.del("/v1/jobs/" + encode(job));
  if (!reply.ok()) return failed(reply.status(), output);
  if (reply->status != 200 && reply->status != 202) return refused(reply.value(), job, output);
  auto view = parse_job(reply->body);
  if (!view.ok()) return failed(view.status(), output);
  if (reply->status == 200) {  // it had ended: nothing was cancelled
    output.out << fmt::format("{} has already ended ({}): nothing to cancel\n", job,
                              output.terminal ? for_terminal(view->state) : view->state);
    return kExitOk;
  }
  // The job as the cancel left it: its queued pages are counted cancelled now.
  output.out << fmt::format(
      "cancelled {}: its {} queued pages will not be sent; {} in flight finish; {} done stay\n",
      job, view->cancelled, view->in_flight, view->done);
  return kExitOk;
}

int estimate(HttpClient& client, std::int64_t pages, std::optional<std::int64_t> tokens_per_page,
             const Output& output) {
  std::string target = fmt::format("/v1/estimate?pages={}", pages);
  if (tokens_per_page) target += fmt::format("&tokens_per_page={}", *tokens_per_page);
  auto reply = client.get(target);
  if (!reply.ok()) return failed(reply.status(), output);
  if (reply->status != 200) return refused(reply.value(), fmt::format("{} pages", pages), output);
  const json::value body = parse_or_null(reply->body);
  const auto* o = body.if_object();
  if (o == nullptr) return failed(Status(StatusCode::internal, "the estimate is not JSON"), output);
  if (const auto* accepted = o->if_contains("accepted");
      accepted && accepted->is_bool() && !accepted->as_bool()) {
    // The door would refuse: printed and exited on as an upload's refusal would be.
    const std::string reason = string_of(*o, "reason");
    json::object error = *o;
    error.erase("accepted");
    error.erase("reason");
    error["type"] = reason;
    const long status = reason == "busy" ? 503 : reason == "user_queue_full" ? 429 : 422;
    const HttpReply refusal{status, json::serialize(json::object{{"error", std::move(error)}}),
                            std::nullopt};
    return refused(refusal, fmt::format("{} pages", pages), output);
  }
  output.out << fmt::format("{} pages would be accepted now: position {}, eta {}\n", pages,
                            static_cast<std::int64_t>(number_of(*o, "position")),
                            format_duration(number_of(*o, "eta_seconds")));
  return kExitOk;
}

}  // namespace fairlane::cli
