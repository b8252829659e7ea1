// The crash test's run: the stand-in on its own io_context thread, `fairlane serve` as a
// child process started again after every SIGKILL, one thread per user uploading books, and
// this thread aiming the kills, checking the database while the service is down, and
// collecting what the service and the stand-in hold at the end.
#include "crashtest.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/json.hpp>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "book.hpp"
#include "cli/http_client.hpp"
#include "document/pdf_writer.hpp"
#include "provider_sim.hpp"
#include "reader.hpp"
#include "serve_process.hpp"

namespace fairlane::crashtest {
namespace {

namespace json = boost::json;
using SteadyClock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* kAdminKey = "crashtest-admin-key";

// The stand-in on its own io_context thread; what it holds is read on that thread.
class StandIn {
 public:
  explicit StandIn(provider_sim::Config config) : server_(io_, std::move(config)) {}
  StandIn(const StandIn&) = delete;
  StandIn& operator=(const StandIn&) = delete;
  ~StandIn() {
    work_.reset();
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  Result<std::uint16_t> start() {
    auto port = server_.listen("127.0.0.1", 0);
    if (port.ok()) thread_ = std::thread([this] { io_.run(); });
    return port;
  }

  template <typename F>
  auto read(F f) {
    std::promise<decltype(f(server_))> value;
    boost::asio::post(io_, [&] { value.set_value(f(server_)); });
    return value.get_future().get();
  }
  std::unordered_map<std::string, provider_sim::TextCalls> calls() {
    return read([](provider_sim::Server& s) { return s.calls_by_text(); });
  }
  provider_sim::TextCalls totals() {
    return read([](provider_sim::Server& s) { return s.call_totals(); });
  }

 private:
  boost::asio::io_context io_;
  provider_sim::Server server_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ =
      boost::asio::make_work_guard(io_);
  std::thread thread_;
};

using Calls = std::unordered_map<std::string, provider_sim::TextCalls>;

// What the uploaders share with the killer.
struct Shared {
  std::mutex mutex;
  std::condition_variable changed;
  bool up = false;    // serve is running and may be sent uploads
  bool over = false;  // the run is ending: uploaders stop
  int life = 0;       // runs of serve so far
  std::string url;
  int open_uploads = 0;
};

struct Book {
  std::string content_type;
  std::string path;
  std::string body;
};

double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// One user's books, one after another, each sent until it gets a 202 (or is abandoned).
void upload_books(const Config& config, int user, const std::string& key,
                  std::vector<UploadRecord*> records, const std::vector<Book*>& books,
                  Shared& shared) {
  std::mt19937_64 rng(config.seed * 7919 + static_cast<std::uint64_t>(user) + 1);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (std::size_t b = 0; b < records.size(); ++b) {
    UploadRecord& record = *records[b];
    const Book& book = *books[b];
    std::this_thread::sleep_for(
        std::chrono::duration<double>(unit(rng) * 2.0 * config.upload_gap_s));
    while (true) {
      int life = 0;
      std::string url;
      {
        std::unique_lock lock(shared.mutex);
        shared.changed.wait(lock, [&] { return shared.up || shared.over; });
        if (shared.over) {
          record.refused = "the run ended first";
          return;
        }
        life = shared.life;
        url = shared.url;
        ++shared.open_uploads;
      }
      cli::HttpClient client(url, key, 30s, 60s);
      auto reply =
          client.post(book.path, book.content_type, book.body, {"Idempotency-Key: " + record.key});
      ++record.attempts;
      bool cut = false;
      {
        std::lock_guard lock(shared.mutex);
        --shared.open_uploads;
        cut = !shared.up || shared.life != life;
      }
      if (reply.ok() && reply->status == 202) {
        boost::system::error_code error;
        const json::value job = json::parse(reply->body, error);
        const json::value* id =
            !error && job.is_object() ? job.as_object().if_contains("id") : nullptr;
        if (id == nullptr || !id->is_string()) {
          record.refused = "a 202 without a job id: " + reply->body;
          break;
        }
        record.job_id = std::string(id->as_string());
        break;
      }
      if (reply.ok() && (reply->status == 503 || reply->status == 429)) {
        std::this_thread::sleep_for(std::chrono::seconds(reply->retry_after_s.value_or(1)));
        continue;
      }
      if (reply.ok()) {
        record.refused = fmt::format("{} {}", reply->status, reply->body.substr(0, 300));
        break;
      }
      if (cut) {
        ++record.cut;
        if (unit(rng) < config.abandon) {
          record.abandoned = true;
          break;
        }
      } else {
        // Refused or reset with the service up: a finding, then sent again.
        ++record.failed_without_kill;
        record.last_error = reply.status().message();
        std::this_thread::sleep_for(50ms);
      }
    }
  }
}

std::vector<std::string> serve_args(const Config& config, const std::string& db,
                                    std::uint16_t stand_in_port) {
  std::vector<std::string> args{config.fairlane,
                                "serve",
                                "--listen",
                                "127.0.0.1:0",
                                "--db",
                                db,
                                "--provider-url",
                                fmt::format("http://127.0.0.1:{}", stand_in_port),
                                "--rpm",
                                "60000",
                                "--tpm",
                                "100000000",
                                "--max-in-flight",
                                std::to_string(config.max_in_flight),
                                "--max-tokens",
                                "64",
                                "--max-wait",
                                "86400",
                                "--max-queued-pages-per-user",
                                "1000000",
                                "--stop-deadline",
                                "10"};
  // A restarted serve is a new instance: it leads once the killed one's lease has run out.
  if (is_postgresql(db)) {
    args.emplace_back("--lease-s");
    args.emplace_back(fmt::format("{}", config.lease_s));
  }
  if (config.call_timeout_s > 0.0) {
    args.emplace_back("--call-timeout");
    args.emplace_back(fmt::format("{}", config.call_timeout_s));
  }
  return args;
}

// Every job of a user: (id, state), following the pages of the list.
Result<std::vector<std::pair<std::string, std::string>>> list_jobs(cli::HttpClient& client) {
  std::vector<std::pair<std::string, std::string>> jobs;
  std::string path = "/v1/jobs?limit=1000";
  while (true) {
    auto reply = client.get(path);
    if (!reply.ok()) return reply.status();
    if (reply->status != 200) {
      return Status(StatusCode::internal,
                    fmt::format("GET {} answered {}: {}", path, reply->status, reply->body));
    }
    try {  // Boost.JSON's accessors throw on a missing or mistyped field
      const json::object answer = json::parse(reply->body).as_object();
      for (const json::value& job : answer.at("jobs").as_array()) {
        jobs.emplace_back(std::string(job.at("id").as_string()),
                          std::string(job.at("state").as_string()));
      }
      const json::value* next = answer.if_contains("next_cursor");
      if (next == nullptr || !next->is_string()) return jobs;
      path = "/v1/jobs?limit=1000&cursor=" + std::string(next->as_string());
    } catch (const std::exception& e) {
      return Status(StatusCode::internal,
                    fmt::format("GET {} answered what is not a job list ({}): {}", path, e.what(),
                                reply->body.substr(0, 300)));
    }
  }
}

bool terminal(const std::string& state) {
  return state == "done" || state == "failed" || state == "cancelled";
}

std::int64_t get_or_zero(const Calls& calls, const std::string& text,
                         std::int64_t provider_sim::TextCalls::*field) {
  const auto found = calls.find(text);
  return found == calls.end() ? 0 : found->second.*field;
}

}  // namespace

Summary run(const Config& config) {
  Summary summary;
  const auto start = SteadyClock::now();
  namespace fs = std::filesystem;
  std::error_code fs_error;
  fs::path dir = config.work_dir;
  if (dir.empty()) {
    // A folder of its own, made afresh (mkdtemp): a name known in advance under /tmp could
    // be made first, or be a symlink, by another user of the machine.
    std::string pattern = (fs::temp_directory_path() / "fairlane-crashtest-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error(fmt::format("could not make a folder for the run under {}: {}",
                                           fs::temp_directory_path().string(),
                                           std::generic_category().message(errno)));
    }
    dir = pattern;
  }
  fs::create_directories(dir, fs_error);
  for (const char* name : {"crash.db", "crash.db-wal", "crash.db-shm", "serve.log"}) {
    fs::remove(dir / name, fs_error);
  }
  summary.work_dir = dir.string();
  const std::string db_path = config.db.empty() ? (dir / "crash.db").string() : config.db;
  const std::string log = (dir / "serve.log").string();

  // The stand-in, without faults or limits: every call past a page's first is a kill's.
  provider_sim::Config stand_in_config;
  stand_in_config.requests_per_minute = 0;
  stand_in_config.tokens_per_minute = 0;
  stand_in_config.max_in_flight = 0;
  stand_in_config.latency_ms = config.latency_ms;
  stand_in_config.output_tokens = 16;
  stand_in_config.seed = config.seed;
  StandIn stand_in(stand_in_config);
  const auto port = stand_in.start();
  if (!port.ok()) {
    summary.error = "the stand-in could not listen: " + port.status().message();
    return summary;
  }
  // Its stderr appended across restarts, the admin key in its environment.
  const tools::ServeProcessOptions serve_options{serve_args(config, db_path, port.value()),
                                                 log,
                                                 true,
                                                 {fmt::format("FAIRLANE_ADMIN_KEY={}", kAdminKey)},
                                                 std::chrono::seconds(60)};
  tools::ServeProcess serve;
  auto url = serve.start(serve_options);
  ++summary.starts;
  if (!url) {
    summary.error = fmt::format("fairlane serve did not start (its log: {})", log);
    return summary;
  }

  // The users and their books, made before anything is sent.
  std::vector<std::string> names;
  std::vector<std::string> keys;
  {
    cli::HttpClient admin(*url, kAdminKey);
    for (int u = 1; u <= config.users; ++u) {
      names.push_back(fmt::format("user-{}", u));
      auto reply = admin.post("/v1/users", "application/json",
                              fmt::format(R"({{"name":"{}"}})", names.back()));
      if (!reply.ok() || reply->status != 201) {
        summary.error = fmt::format("could not add {}: {}", names.back(),
                                    reply.ok() ? reply->body : reply.status().message());
        return summary;
      }
      keys.emplace_back(json::parse(reply->body).at("key").as_string());
    }
  }
  std::vector<UploadRecord> uploads;
  std::vector<Book> books;
  for (int u = 1; u <= config.users; ++u) {
    for (int b = 1; b <= config.books; ++b) {
      UploadRecord record;
      record.user = names[static_cast<std::size_t>(u - 1)];
      record.book = b;
      record.pages = config.pages;
      record.pdf = config.pdf_every > 0 && b % config.pdf_every == 0;
      record.key = fmt::format("crashtest-{}-{}-{}", config.seed, u, b);
      Book book;
      const std::string name = fmt::format("user-{}-book-{}", u, b);
      if (record.pdf) {
        // Each book its own seed: no two pages anywhere share a text.
        const auto pages = pdfgen::generate_book(
            config.pages, config.seed * 1'000'003 + static_cast<std::uint64_t>(u * 1000 + b));
        book = Book{"application/pdf", "/v1/jobs?name=" + name + ".pdf", write_pdf(pages, {})};
        record.texts = pages;
      } else {
        json::array pages;
        for (int p = 1; p <= config.pages; ++p) {
          record.texts.push_back(fmt::format(
              "Crash test, seed {}: user {}, book {}, page {} of {}. The page's text is its "
              "name, so that its result shows whose page it is.",
              config.seed, u, b, p, config.pages));
          pages.emplace_back(record.texts.back());
        }
        book = Book{"application/json", "/v1/jobs",
                    json::serialize(json::object{{"name", name}, {"pages", std::move(pages)}})};
      }
      uploads.push_back(std::move(record));
      books.push_back(std::move(book));
    }
  }

  Shared shared;
  {
    std::lock_guard lock(shared.mutex);
    shared.up = true;
    shared.life = 1;
    shared.url = *url;
  }
  std::atomic<int> uploaders_done{0};
  std::vector<std::thread> uploaders;
  for (int u = 0; u < config.users; ++u) {
    std::vector<UploadRecord*> records;
    std::vector<Book*> theirs;
    for (int b = 0; b < config.books; ++b) {
      const auto index = static_cast<std::size_t>(u) * static_cast<std::size_t>(config.books) +
                         static_cast<std::size_t>(b);
      records.push_back(&uploads[index]);
      theirs.push_back(&books[index]);
    }
    uploaders.emplace_back([&, u, records, theirs] {
      upload_books(config, u + 1, keys[static_cast<std::size_t>(u)], records, theirs, shared);
      ++uploaders_done;
    });
  }
  const auto join_uploaders = [&] {
    {
      std::lock_guard lock(shared.mutex);
      shared.over = true;
    }
    shared.changed.notify_all();
    for (std::thread& t : uploaders) t.join();
    uploaders.clear();
  };

  const auto past_deadline = [&] { return seconds_since(start) > config.deadline_s; };
  // Everything sent and every job ended (asked of the service).
  const auto all_ended = [&] {
    if (uploaders_done.load() < config.users) return false;
    for (const std::string& key : keys) {
      cli::HttpClient client(*url, key, 10s);
      auto jobs = list_jobs(client);
      if (!jobs.ok()) return false;
      for (const auto& [id, state] : *jobs) {
        if (!terminal(state)) return false;
      }
    }
    return true;
  };

  // The kills.
  std::mt19937_64 rng(config.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const std::vector<std::string> kinds = {"upload", "dispatch", "completion"};
  std::vector<std::string> aims;
  while (static_cast<int>(aims.size()) < config.kills) {
    std::vector<std::string> round = kinds;
    std::shuffle(round.begin(), round.end(), rng);
    aims.insert(aims.end(), round.begin(), round.end());
  }
  Calls life_start;  // the stand-in when this run of serve started
  bool ended = false;
  for (int k = 0; k < config.kills && !past_deadline(); ++k) {
    const auto gap = std::chrono::duration<double>((0.5 + unit(rng)) * config.kill_gap_s);
    std::this_thread::sleep_for(gap);
    if (all_ended()) {
      ended = true;
      break;
    }
    KillRecord kill;
    kill.aimed_at = aims[static_cast<std::size_t>(k)];
    if (kill.aimed_at == "upload" && uploaders_done.load() == config.users) {
      kill.aimed_at = "dispatch";  // nothing left to upload
    }
    const auto aim_deadline = SteadyClock::now() + 3s;
    if (kill.aimed_at == "upload") {
      while (SteadyClock::now() < aim_deadline) {
        {
          std::lock_guard lock(shared.mutex);
          if (shared.open_uploads > 0) break;
        }
        std::this_thread::sleep_for(1ms);
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(unit(rng) * 0.02));
    } else if (kill.aimed_at == "dispatch") {
      while (SteadyClock::now() < aim_deadline && stand_in.totals().in_flight == 0) {
        std::this_thread::sleep_for(1ms);
      }
      std::this_thread::sleep_for(
          std::chrono::duration<double>(unit(rng) * config.latency_ms / 1000.0));
    } else {
      const std::int64_t answered = stand_in.totals().answered;
      while (SteadyClock::now() < aim_deadline && stand_in.totals().answered == answered) {
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(unit(rng) * 0.004));
    }
    {
      std::lock_guard lock(shared.mutex);
      shared.up = false;
      kill.upload = shared.open_uploads > 0;
      serve.kill_now();
    }
    kill.at_s = seconds_since(start);
    // The stand-in at the kill (its calls keep running to their end after it), and again
    // once calls that were in transit have reached it; then the database.
    const Calls at_kill = stand_in.calls();
    serve.reap();
    std::this_thread::sleep_for(50ms);
    const Calls settled = stand_in.calls();
    {
      const auto db = open_reader(db_path);
      kill.integrity = db->integrity();
      db->query(
          "SELECT t.text FROM pages p JOIN page_texts t ON t.page_id = p.id "
          "WHERE p.state = 'in_flight'",
          [&](const Row& row) { kill.in_flight.insert(row.text(0)); });
      db->query(
          "SELECT count(*) FROM jobs j WHERE j.page_count != "
          "(SELECT count(*) FROM pages p WHERE p.job_id = j.id)",
          [&](const Row& row) { kill.partial_jobs = row.int64(0); });
      if (!db->error().empty()) kill.integrity += " (reading it: " + db->error() + ")";
    }
    // Per text, the calls of this run of serve: answered by the kill, and open at it (sent
    // and not answered, counting those still in transit). The stand-in's latency is fixed,
    // so calls are answered in the order they came: calls left open by the run before are
    // answered first.
    using TC = provider_sim::TextCalls;
    const auto fresh = [&](const std::string& text) {
      const std::int64_t stale = get_or_zero(life_start, text, &TC::in_flight);
      const std::int64_t answered =
          get_or_zero(at_kill, text, &TC::answered) - get_or_zero(life_start, text, &TC::answered);
      const std::int64_t fresh_answered = answered - std::min(stale, answered);
      const std::int64_t arrived =
          get_or_zero(settled, text, &TC::calls) - get_or_zero(life_start, text, &TC::calls);
      return std::pair{arrived - fresh_answered, fresh_answered};
    };
    for (const auto& [text, calls] : settled) {
      const std::int64_t open = fresh(text).first;
      if (open <= 0) continue;
      kill.calls_open += open;
      if (!kill.in_flight.contains(text)) kill.open_not_in_flight += open;
    }
    for (const std::string& text : kill.in_flight) {
      const auto [open, answered] = fresh(text);
      if (open <= 0 && answered > 0) {
        kill.completion = true;  // answered, and the result not committed
      } else {
        kill.dispatch = true;  // its call open, or not arrived yet
      }
    }
    summary.kills.push_back(std::move(kill));
    life_start = settled;

    url = serve.start(serve_options);
    ++summary.starts;
    if (!url) {
      summary.error =
          fmt::format("fairlane serve did not start again after kill {} (its log: {})", k + 1, log);
      join_uploaders();
      return summary;
    }
    {
      std::lock_guard lock(shared.mutex);
      shared.up = true;
      ++shared.life;
      shared.url = *url;
    }
    shared.changed.notify_all();
  }
  while (!ended && !past_deadline()) {
    ended = all_ended();
    if (!ended) std::this_thread::sleep_for(200ms);
  }
  join_uploaders();
  if (!ended) {
    summary.error =
        fmt::format("the work had not ended after {} s (--deadline)", config.deadline_s);
  } else if (static_cast<int>(summary.kills.size()) < config.kills) {
    summary.error = fmt::format(
        "the work ended after {} kills of the {} asked for: give it more to do (--books, "
        "--pages) or kill sooner (--kill-gap)",
        summary.kills.size(), config.kills);
  }

  if (summary.error.empty() && config.require_landings) {
    const auto landed = [&](bool KillRecord::*where) {
      return std::any_of(summary.kills.begin(), summary.kills.end(),
                         [&](const KillRecord& kill) { return kill.*where; });
    };
    if (!landed(&KillRecord::upload) || !landed(&KillRecord::dispatch) ||
        !landed(&KillRecord::completion)) {
      summary.error =
          "no kill landed during one of upload, dispatch and completion (--require-landings): "
          "give it more kills or books";
    }
  }

  // What the service says: every job's result.
  Observed observed;
  for (const std::string& key : keys) {
    cli::HttpClient client(*url, key, 30s);
    auto jobs = list_jobs(client);
    if (!jobs.ok()) {
      summary.error = "could not list the jobs at the end: " + jobs.status().message();
      break;
    }
    for (const auto& [id, state] : *jobs) {
      auto reply = client.get("/v1/jobs/" + id + "/result");
      if (!reply.ok() || reply->status != 200) {
        summary.error = fmt::format("could not read the result of {}", id);
        break;
      }
      const json::object result = json::parse(reply->body).as_object();
      for (const json::value& page : result.at("pages").as_array()) {
        const json::object& p = page.as_object();
        const json::value* output = p.if_contains("output");
        observed.results.push_back(ResultPage{
            id, p.at("page").to_number<std::int64_t>(), std::string(p.at("state").as_string()),
            output != nullptr && output->is_string() ? std::string(output->as_string())
                                                     : std::string()});
      }
    }
  }
  summary.last_exit = serve.stop();

  // What the database says, with serve stopped.
  {
    const auto db = open_reader(db_path);
    observed.final_integrity = db->integrity();
    db->query(
        "SELECT j.public_id, u.name, coalesce(j.idempotency_key, ''), j.page_count, "
        "(SELECT count(*) FROM pages p WHERE p.job_id = j.id) "
        "FROM jobs j JOIN users u ON u.id = j.user_id",
        [&](const Row& row) {
          observed.jobs.push_back(
              JobRow{row.text(0), row.text(1), row.text(2), row.int64(3), row.int64(4)});
        });
    db->query(
        "SELECT j.public_id, p.seq, p.state, t.text, p.output FROM pages p "
        "JOIN jobs j ON j.id = p.job_id JOIN page_texts t ON t.page_id = p.id",
        [&](const Row& row) {
          std::optional<std::string> output;
          if (!row.is_null(4)) output = row.text(4);
          observed.pages.push_back(
              PageRow{row.text(0), row.int64(1), row.text(2), row.text(3), std::move(output)});
        });
    if (!db->error().empty() && summary.error.empty()) {
      summary.error = "could not read the database at the end: " + db->error();
    }
  }

  // What the stand-in saw.
  for (const auto& [text, calls] : stand_in.calls()) observed.calls_by_text[text] = calls.calls;
  const json::object stats = json::parse(stand_in.read([](provider_sim::Server& s) {
                               return s.stats_json();
                             })).as_object();
  summary.rejected = stats.at("rejected_429").to_number<std::int64_t>() +
                     stats.at("rejected_503").to_number<std::int64_t>();

  summary.findings = check(uploads, summary.kills, observed);
  summary.uploads = std::move(uploads);
  summary.duration_s = seconds_since(start);
  if (summary.ok() && !config.keep && config.work_dir.empty()) {
    fs::remove_all(dir, fs_error);
    summary.work_dir.clear();
  }
  return summary;
}

}  // namespace fairlane::crashtest
