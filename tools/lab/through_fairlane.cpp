// Case 4: the real `fairlane serve` in front of the stand-in. The stand-in runs on its own
// io_context thread; the service is a child process; the users are this thread, uploading
// books as JSON pages on the ramp's schedule and reading their jobs until every accepted one
// has ended.
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli/http_client.hpp"
#include "find_fairlane.hpp"
#include "lab_internal.hpp"
#include "serve_process.hpp"

namespace fairlane::lab {
namespace {

namespace json = boost::json;
using SteadyClock = std::chrono::steady_clock;

// An upload's answer, and when it was sent and answered (seconds since the case started).
struct Sent {
  Result<cli::HttpReply> reply = Status(StatusCode::internal, "not sent");
  double uploaded_s = 0;
  double answered_s = 0;
};

struct Job {
  std::size_t book = 0;
  std::string id;
  int user = 0;
  std::int64_t done = 0;
  std::int64_t failed = 0;
  bool ended = false;
};

// Seconds since the epoch of a time as the API writes it ("2026-12-03T19:04:05.123Z").
std::optional<double> epoch_s(const json::object& job, std::string_view field) {
  const auto* value = job.if_contains(field);
  if (value == nullptr || !value->is_string()) return std::nullopt;
  const std::string text(value->as_string());
  int year = 0;
  unsigned month = 0, day = 0;
  int hour = 0, minute = 0, second = 0, ms = 0;
  // NOLINTNEXTLINE(cert-err34-c): every field is checked by the count of those read
  if (std::sscanf(text.c_str(), "%d-%u-%uT%d:%d:%d.%dZ", &year, &month, &day, &hour, &minute,
                  &second, &ms) != 7) {
    return std::nullopt;
  }
  const std::chrono::sys_days date{std::chrono::year{year} / std::chrono::month{month} /
                                   std::chrono::day{day}};
  const auto t = date + std::chrono::hours{hour} + std::chrono::minutes{minute} +
                 std::chrono::seconds{second} + std::chrono::milliseconds{ms};
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// The last `count` lines of a file, on one line (" / " between them, at most 600 bytes), for
// an error in the report's table; "" when it cannot be read.
std::string last_lines(const std::filesystem::path& file, std::size_t count) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    lines.push_back(std::move(line));
    if (lines.size() > count) lines.erase(lines.begin());
  }
  std::string joined;
  for (const std::string& line : lines) joined += (joined.empty() ? "" : " / ") + line;
  std::replace(joined.begin(), joined.end(), '|', '/');  // a Markdown table's cell
  if (joined.size() > 600) joined = "..." + joined.substr(joined.size() - 600);
  return joined;
}

// The text at {"error":{<field>}} of an error answer, or std::nullopt.
std::optional<std::string> error_field(std::string_view body, std::string_view field) {
  boost::system::error_code error;
  const json::value value = json::parse(body, error);
  const json::value* e =
      !error && value.is_object() ? value.as_object().if_contains("error") : nullptr;
  const json::value* v =
      e != nullptr && e->is_object() ? e->as_object().if_contains(field) : nullptr;
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return std::string(v->as_string());
}

// An error answer's message, or the body's start.
std::string answer_message(std::string_view body) {
  return error_field(body, "message").value_or(std::string(body.substr(0, 200)));
}

// `to` - `from` of a job object's two times, when it has both.
std::optional<double> between(const json::object& job, std::string_view from, std::string_view to) {
  const auto a = epoch_s(job, from);
  const auto b = epoch_s(job, to);
  if (!a || !b) return std::nullopt;
  return *b - *a;
}

// An error answer's type, or "".
std::string answer_type(std::string_view body) {
  return error_field(body, "type").value_or("");
}

}  // namespace

Fate upload_fate(long status, std::string_view body) {
  if (status == 202) return Fate::pending;
  if (status == 503 && answer_type(body) == "busy") return Fate::door_busy;
  if (status >= 400 && status < 500) return Fate::upload_refused;
  return Fate::upload_error;
}

std::string upload_answer(long status, std::string_view body) {
  const std::string type = answer_type(body);
  std::string answer =
      fmt::format("{}{}: {}", status, type.empty() ? "" : " " + type, answer_message(body));
  // One line of the report.
  std::replace_if(
      answer.begin(), answer.end(),
      [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }, ' ');
  return answer;
}

CaseResult run_fairlane(const LabConfig& config) {
  CaseResult result;
  result.which = Case::fairlane;
  std::string fairlane = config.fairlane_binary;
  if (fairlane.empty()) {
    // Nothing in the lab sets its environment, so reading it races with nothing.
    // NOLINTNEXTLINE(concurrency-mt-unsafe)
    const char* path = std::getenv("PATH");
    const tools::FairlaneLookup lookup =
        tools::find_fairlane(tools::own_directory(), path == nullptr ? "" : path);
    if (!lookup.found) {
      const std::string beside =
          lookup.beside.size() == 2
              ? fmt::format("beside fairlane-lab ({}), in its build tree ({})",
                            lookup.beside[0].string(), lookup.beside[1].string())
              : std::string("beside fairlane-lab (/proc/self/exe gave no directory)");
      result.error = fmt::format(
          "case 4 needs the fairlane binary, and there is none {} or on PATH: pass --fairlane "
          "PATH",
          beside);
      return result;
    }
    fairlane = lookup.found->string();
  }
  boost::asio::io_context io;
  provider_sim::Server stand_in(io, stand_in_config(config));
  const auto port = stand_in.listen("127.0.0.1", 0);
  if (!port.ok()) {
    result.error = port.status().message();
    return result;
  }
  auto work = boost::asio::make_work_guard(io);
  std::thread io_thread([&io] { io.run(); });
  // Stats are read on the stand-in's thread.
  const auto stats = [&] {
    std::promise<std::string> json;
    boost::asio::post(io, [&] { json.set_value(stand_in.stats_json()); });
    return json.get_future().get();
  };

  const auto dir = std::filesystem::temp_directory_path() /
                   fmt::format("fairlane-lab-{}", static_cast<long>(getpid()));
  std::filesystem::create_directories(dir);
  const auto fmt_double = [](double x) { return fmt::format("{:.6f}", x); };
  tools::ServeProcess service;
  const auto base = service.start({{fairlane,
                                    "serve",
                                    "--listen",
                                    "127.0.0.1:0",
                                    "--db",
                                    (dir / "lab.db").string(),
                                    "--provider-url",
                                    fmt::format("http://127.0.0.1:{}", port.value()),
                                    "--rpm",
                                    std::to_string(config.per_minute(config.requests_per_minute)),
                                    "--tpm",
                                    std::to_string(config.per_minute(config.tokens_per_minute)),
                                    "--max-in-flight",
                                    std::to_string(config.max_in_flight),
                                    "--max-tokens",
                                    std::to_string(config.max_tokens),
                                    "--max-wait",
                                    fmt_double(config.seconds(config.max_wait_s)),
                                    "--max-queued-pages-per-user",
                                    "100000",
                                    "--price-per-mtok",
                                    fmt_double(config.price_per_mtok),
                                    "--backoff-base",
                                    fmt_double(config.seconds(1.0)),
                                    "--backoff-max",
                                    fmt_double(config.seconds(60.0)),
                                    "--stop-deadline",
                                    "5"},
                                   (dir / "serve.log").string(),
                                   false,
                                   {"FAIRLANE_ADMIN_KEY=lab-admin-key"}});
  // The folder goes at the end, unless the case could not run: then its log is kept, for
  // the error names it.
  const auto finish = [&] {
    service.stop(std::chrono::seconds(5));
    read_stand_in_stats(stats(), config, result);
    work.reset();
    io.stop();
    io_thread.join();
    std::error_code ignored;
    if (result.error.empty()) std::filesystem::remove_all(dir, ignored);
  };
  const std::string log = (dir / "serve.log").string();
  if (!base) {
    const std::string said = last_lines(log, 5);
    result.error = fmt::format("fairlane serve did not start{} (its log, kept: {})",
                               said.empty() ? "" : ": " + said, log);
    finish();
    return result;
  }

  // Every user, made with the admin key before the clock starts.
  cli::HttpClient admin(*base, "lab-admin-key");
  std::vector<std::string> keys;
  std::vector<std::unique_ptr<cli::HttpClient>> users;  // one a user: its connection is kept
  for (int user = 0; user < config.ramp.back(); ++user) {
    auto reply = admin.post("/v1/users", "application/json",
                            fmt::format(R"({{"name":"user-{}"}})", user + 1));
    boost::system::error_code error;
    const json::value answer = reply.ok() ? json::parse(reply->body, error) : json::value();
    const json::value* key =
        !error && answer.is_object() ? answer.as_object().if_contains("key") : nullptr;
    if (!reply.ok() || reply->status != 201 || key == nullptr || !key->is_string()) {
      result.error = fmt::format("could not add the lab's users: {} (the service's log, kept: {})",
                                 !reply.ok() ? reply.status().message()
                                 : reply->status != 201
                                     ? fmt::format("POST /v1/users answered {}: {}", reply->status,
                                                   answer_message(reply->body))
                                     : fmt::format("POST /v1/users answered 201 without a key: {}",
                                                   reply->body.substr(0, 200)),
                                 log);
      std::replace(result.error.begin(), result.error.end(), '|', '/');
      std::replace(result.error.begin(), result.error.end(), '\n', ' ');
      finish();
      return result;
    }
    keys.emplace_back(key->as_string());
    users.push_back(std::make_unique<cli::HttpClient>(*base, keys.back()));
  }
  // The books' bodies, made before the clock starts too.
  const auto body_of = [&](int user) {
    json::array pages;
    for (int page = 0; page < config.pages_per_book; ++page) {
      pages.emplace_back(page_text(user, page, static_cast<std::size_t>(config.page_bytes)));
    }
    return json::serialize(
        json::object{{"name", fmt::format("book-{}", user + 1)}, {"pages", std::move(pages)}});
  };

  std::vector<Job> jobs;
  const auto start = SteadyClock::now();
  const auto now_s = [&] {
    return std::chrono::duration<double>(SteadyClock::now() - start).count();
  };
  const auto fail_first = [&](double at, Fate fate) {
    if (!result.first_failure) result.first_failure = FirstFailure{at, users_at(config, at), fate};
  };
  const double poll_s = std::max(0.02, config.seconds(0.5));
  std::size_t step = 0;
  while (true) {
    const double t = now_s();
    if (t > config.seconds(config.case_deadline_s)) {
      result.cut_short = true;
      break;
    }
    // The ramp: the users of every step that is due upload their book.
    while (step < config.ramp.size() &&
           t >= config.seconds(config.step_s * static_cast<double>(step))) {
      const int before = step == 0 ? 0 : config.ramp[step - 1];
      // A step's users upload at the same moment, each on its own connection, as people do:
      // the service sees their uploads on their way together (its promise window). With
      // --one-by-one, each waits for the previous one's answer.
      std::vector<std::future<Sent>> sent;
      for (int user = before; user < config.ramp[step]; ++user) {
        sent.push_back(std::async(std::launch::async, [&, user, body = body_of(user)]() mutable {
          Sent s;
          s.uploaded_s = now_s();
          s.reply = users[static_cast<std::size_t>(user)]->post("/v1/jobs", "application/json",
                                                                std::move(body));
          s.answered_s = now_s();
          return s;
        }));
        if (!config.uploads_together) sent.back().wait();
      }
      for (int user = before; user < config.ramp[step]; ++user) {
        Sent s = sent[static_cast<std::size_t>(user - before)].get();
        BookRecord book;
        book.user = user;
        book.users_at_upload = config.ramp[step];
        book.uploaded_s = s.uploaded_s;
        book.pages.resize(static_cast<std::size_t>(config.pages_per_book));
        const auto& reply = s.reply;
        const double at = s.answered_s;
        Fate fate = Fate::upload_error;
        if (reply.ok()) {
          fate = upload_fate(reply->status, reply->body);
          if (fate != Fate::pending) book.upload_answer = upload_answer(reply->status, reply->body);
        } else {
          book.upload_answer = "no answer: " + reply.status().message();
        }
        boost::system::error_code error;
        const json::value answer = reply.ok() ? json::parse(reply->body, error) : json::value();
        const json::object* job = !error ? answer.if_object() : nullptr;
        const json::value* id = job != nullptr ? job->if_contains("id") : nullptr;
        if (fate == Fate::pending && (id == nullptr || !id->is_string())) {
          fate = Fate::upload_error;
          book.upload_answer =
              fmt::format("202 without a job's id: {}", reply->body.substr(0, 200));
        }
        if (fate == Fate::pending) {
          // The promise as the service keeps it (promised_eta_at, on its own clock), else
          // the ETA the 202 gave.
          book.eta_s = between(*job, "created_at", "promised_eta_at");
          if (const auto* eta = job->if_contains("eta_seconds");
              !book.eta_s && eta && eta->is_number()) {
            book.eta_s = eta->to_number<double>();
          }
          jobs.push_back(Job{result.books.size(), std::string(id->as_string()), user});
        } else {
          if (fate == Fate::door_busy) {
            const auto* e = job != nullptr ? job->if_contains("error") : nullptr;
            const auto* wait = e && e->is_object()
                                   ? e->as_object().if_contains("estimated_wait_seconds")
                                   : nullptr;
            if (wait && wait->is_number()) book.refused_wait_s = wait->to_number<double>();
          }
          for (PageRecord& page : book.pages) page = PageRecord{fate, at, 0};
          fail_first(at, fate);
        }
        result.books.push_back(std::move(book));
      }
      ++step;
    }
    // Every job not ended: pages newly done or failed end now, in page order.
    bool open = false;
    for (Job& job : jobs) {
      if (job.ended) continue;
      auto reply = users[static_cast<std::size_t>(job.user)]->get("/v1/jobs/" + job.id);
      if (!reply.ok() || reply->status != 200) {
        open = true;
        continue;
      }
      const auto view = json::parse(reply->body).as_object();
      const auto& pages = view.at("pages").as_object();
      const std::int64_t done = pages.at("done").to_number<std::int64_t>();
      const std::int64_t failed = pages.at("failed").to_number<std::int64_t>();
      const double at = now_s();
      BookRecord& book = result.books[job.book];
      const auto& usage = view.at("usage").as_object();
      const std::int64_t tokens = usage.at("input_tokens").to_number<std::int64_t>() +
                                  usage.at("output_tokens").to_number<std::int64_t>();
      for (std::int64_t i = job.done + job.failed; i < done + failed; ++i) {
        const bool ok = i - (job.done + job.failed) < done - job.done;
        book.pages[static_cast<std::size_t>(i)] =
            PageRecord{ok ? Fate::done : Fate::failed, at, done > 0 ? tokens / done : 0};
        if (!ok) fail_first(at, Fate::failed);
      }
      job.done = done;
      job.failed = failed;
      const std::string state(view.at("state").as_string());
      job.ended = state == "done" || state == "failed" || state == "cancelled";
      if (job.ended) book.served_s = between(view, "created_at", "finished_at");
      open = open || !job.ended;
    }
    if (step >= config.ramp.size() && !open) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_s));
  }
  result.duration_s = now_s();
  finish();
  return result;
}

}  // namespace fairlane::lab
