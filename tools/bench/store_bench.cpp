// Benchmarks of the SQLite store on a real database file, against the targets:
// enqueue >= 20,000 pages/s (100-page jobs, 3 KB a page, one fully synced transaction a
// job); dispatched + completed through GroupCommit >= 20,000 pages/s; load_lanes of
// 1,000,000 queued pages of 10,000 users in <= 5 s with the lanes <= 200 MB resident.
//
// Image pages (scanned books): enqueue of a 100-page job whose pages are 200 KB image BLOBs,
// against the text job above, and page_call of one, the BLOB a dispatch reads
// (docs/performance.md, "Scanned pages").
//
// PostgreSQL beside SQLite (issue 17): the text enqueue, page_call of a text page and the
// dispatch + complete through GroupCommit run on both stores, one body over a StoreHome,
// as BM_..._NAME/sqlite and BM_..._NAME/postgresql. The PostgreSQL ones make a database of
// their own on the server FAIRLANE_BENCH_PG_URI names (a libpq URI whose role may CREATE
// DATABASE), drop it at the end, and are skipped when it is unset; tools/bench/pg starts a
// throwaway server and runs them (docs/performance.md, "PostgreSQL beside SQLite"). Targets
// there: enqueue >= 10,000 pages/s, dispatch + complete >= 5,000 a second.
//
// All of them time wall-clock (UseRealTime): the store waits on the disk, so CPU time
// would flatter it. The 1M-page ones build their database once per process, untimed
// (10,000 synced enqueues: seconds on a fast disk, longer where fsync is slow), and pin
// their own repetitions, which Google Benchmark 1.7 puts before the command line's
// --benchmark_repetitions. So tools/bench/run's 10 repetitions leave them at 5 each, and
//
//   tools/bench/run --benchmark_filter=Store       (or =LoadLanes for the 1M-page ones)
//
// takes about a minute on two cores.
#include <benchmark/benchmark.h>
#include <stdlib.h>  // mkdtemp
#include <unistd.h>  // getpid
#if defined(__GLIBC__)
#include <malloc.h>  // malloc_trim
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "fairlane/core/clock.hpp"
#include "fairlane/core/page_image.hpp"
#include "fairlane/core/status.hpp"
#include "fairlane/store/group_commit.hpp"
#include "fairlane/store/lane.hpp"
#include "fairlane/store/page_transition.hpp"
#include "fairlane/store/store.hpp"
#include "store/pg.hpp"

namespace {

using fairlane::GroupCommit;
using fairlane::JobRequest;
using fairlane::Lane;
using fairlane::LanePage;
using fairlane::PageInput;
using fairlane::PageTransition;
using fairlane::Status;
using fairlane::Store;

constexpr std::size_t kPagesPerJob = 100;
constexpr std::size_t kPageTextBytes = 3'072;
constexpr std::size_t kOutputBytes = 1'024;
constexpr std::int64_t kMaxTokens = 1'000;
// A page's TPM reservation: about four bytes a token of input, plus max_tokens.
constexpr std::int64_t kPageTokens = kPageTextBytes / 4 + kMaxTokens;
constexpr fairlane::Usage kPageUsage{800, 200};

// An image page as read_pdf stores it: a PNG of the size BM_ReadPdf_Images measures for
// samples/books/scanned-notes.pdf (document_bench.cpp: 198 KB; a text book drawn is about
// half), a Letter page drawn with its long edge at 1568 px. Its bytes are incompressible,
// as an encoded image's are.
constexpr std::size_t kPageImageBytes = 200'000;
constexpr std::int64_t kImageWidth = 1'212;
constexpr std::int64_t kImageHeight = 1'568;
// Anthropic's rule, w x h / 750 rounded up, plus max_tokens.
constexpr std::int64_t kImagePageTokens = 1'212 * 1'568 / 750 + 1 + kMaxTokens;

constexpr std::int64_t kMillionUsers = 10'000;
constexpr std::size_t kMillionPageTextBytes = 16;

constexpr double kBytesPerMB = 1024.0 * 1024.0;

// A fresh directory under the system's temporary directory, removed with all it holds.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "fairlane-bench-XXXXXX");
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }

  // Empty when the directory could not be made.
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::string file(std::string_view name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Skips the benchmark with `status`'s message when it is an error; true when it is not.
bool ok_or_skip(benchmark::State& state, const Status& status) {
  if (status.ok()) return true;
  state.SkipWithError(status.message().c_str());
  return false;
}

// Text of `bytes` bytes, different for every `seed`: words drawn by a small LCG, so that
// pages look like prose rather than one repeated byte.
std::string prose(std::uint64_t seed, std::size_t bytes) {
  static constexpr std::string_view kWords[] = {
      "the",     "ledger", "of",      "account", "page",   "invoice", "total", "and",
      "chapter", "river",  "north",   "quietly", "report", "figure",  "seven", "were",
      "market",  "under",  "between", "letter",  "stone",  "winter",  "a",     "shipment"};
  std::string text;
  text.reserve(bytes + 16);
  std::uint64_t state = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  while (text.size() < bytes) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    text += kWords[(state >> 33) % std::size(kWords)];
    text += ((state >> 20) % 12 == 0) ? ". " : " ";
  }
  text.resize(bytes);
  return text;
}

// A job of `pages` pages, each `text_bytes` of text of its own.
JobRequest make_job(fairlane::UserId user, std::size_t pages, std::size_t text_bytes,
                    std::int64_t page_tokens) {
  JobRequest request;
  request.user_id = user;
  request.name = "book.pdf";
  request.max_tokens = kMaxTokens;
  request.pages.reserve(pages);
  for (std::size_t i = 0; i < pages; ++i) {
    request.pages.push_back(PageInput{prose(i, text_bytes), page_tokens});
  }
  return request;
}

// `bytes` bytes drawn by a 64-bit LCG (its high bytes), different for every `seed`: what
// zlib or SQLite cannot shrink, like an encoded image.
std::string noise(std::uint64_t seed, std::size_t bytes) {
  std::string data(bytes, '\0');
  std::uint64_t state = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (char& byte : data) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    byte = static_cast<char>(state >> 56);
  }
  return data;
}

// A job of `pages` image pages, each a PNG-sized BLOB of its own.
JobRequest make_image_job(fairlane::UserId user, std::size_t pages) {
  JobRequest request;
  request.user_id = user;
  request.name = "scanned.pdf";
  request.max_tokens = kMaxTokens;
  request.pages.reserve(pages);
  for (std::size_t i = 0; i < pages; ++i) {
    PageInput page;
    page.kind = fairlane::PageKind::image;
    page.estimated_tokens = kImagePageTokens;
    page.image =
        fairlane::PageImage{"image/png", kImageWidth, kImageHeight, noise(i, kPageImageBytes)};
    request.pages.push_back(std::move(page));
  }
  return request;
}

// Which store a benchmark runs on.
enum class Backend { sqlite, postgresql };

// The URI `uri` with its database (the path after the authority) replaced by `database`,
// its query string kept: postgresql://u@h:5432/old?x=y -> postgresql://u@h:5432/NEW?x=y.
std::string with_database(const std::string& uri, const std::string& database) {
  const auto scheme = uri.find("://");
  const std::size_t authority = scheme == std::string::npos ? 0 : scheme + 3;
  const auto query = uri.find('?', authority);
  const std::string head = uri.substr(0, query);
  const std::string tail = query == std::string::npos ? "" : uri.substr(query);
  const auto slash = head.find('/', authority);
  return (slash == std::string::npos ? head : head.substr(0, slash)) + "/" + database + tail;
}

// Where a benchmark's store lives, made fresh for it and removed with it: a file in a new
// temporary directory (SQLite), or a new database on the server FAIRLANE_BENCH_PG_URI names,
// made through that URI's own database and dropped WITH (FORCE) at the end (PostgreSQL).
// When it cannot be made the benchmark is skipped with the reason, and ready() is false.
class StoreHome {
 public:
  StoreHome(benchmark::State& state, Backend backend) {
    if (backend == Backend::sqlite) {
      dir_.emplace();
      if (dir_->path().empty()) {
        state.SkipWithError("cannot make a temporary directory");
        return;
      }
      db_ = dir_->file("store.db");
      return;
    }
    // Read on the benchmark's thread; nothing in the process sets the environment.
    // NOLINTNEXTLINE(concurrency-mt-unsafe)
    const char* server = std::getenv("FAIRLANE_BENCH_PG_URI");
    if (server == nullptr || *server == '\0') {
      state.SkipWithError("no PostgreSQL server: set FAIRLANE_BENCH_PG_URI, or run tools/bench/pg");
      return;
    }
    static std::atomic<int> count{0};
    const std::string name =
        "fairlane_bench_" + std::to_string(getpid()) + "_" + std::to_string(count++);
    auto admin = fairlane::store::pg::Connection::open(server);
    if (!ok_or_skip(state, admin.status())) return;
    // One statement each: neither may run inside a transaction block.
    if (!ok_or_skip(state, admin->exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)",
                                       "dropping a benchmark database")) ||
        !ok_or_skip(state,
                    admin->exec("CREATE DATABASE " + name, "creating a benchmark database"))) {
      return;
    }
    server_ = server;
    database_ = name;
    db_ = with_database(server_, database_);
  }
  StoreHome(const StoreHome&) = delete;
  StoreHome& operator=(const StoreHome&) = delete;
  ~StoreHome() {
    if (database_.empty()) return;
    auto admin = fairlane::store::pg::Connection::open(server_);
    if (!admin.ok()) return;
    (void)admin->exec("DROP DATABASE IF EXISTS " + database_ + " WITH (FORCE)",
                      "dropping a benchmark database");
  }

  [[nodiscard]] bool ready() const { return !db_.empty(); }
  // What Store::open takes: the file's path or the database's URI.
  [[nodiscard]] const std::string& db() const { return db_; }

 private:
  std::optional<TempDir> dir_;  // SQLite's
  std::string server_;
  std::string database_;
  std::string db_;
};

// A store in `home` with one user; nullptr after SkipWithError on failure.
struct OneUserStore {
  std::unique_ptr<Store> store;
  fairlane::UserId user = 0;
};
OneUserStore open_one_user_store(benchmark::State& state, const StoreHome& home) {
  if (!home.ready()) return {};
  auto store = Store::open(home.db());
  if (!ok_or_skip(state, store.status())) return {};
  auto user = store.value()->add_user("bench");
  if (!ok_or_skip(state, user.status())) return {};
  return {std::move(store).value(), user->user.id};
}

// The process's resident set (VmRSS) or its peak (VmHWM) in bytes; -1 when unreadable.
std::int64_t status_bytes(std::string_view field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with(field) && line.size() > field.size() && line[field.size()] == ':') {
      return std::stoll(line.substr(field.size() + 1)) * 1024;  // "VmRSS:   1234 kB"
    }
  }
  return -1;
}

// Resets VmHWM to the current resident set (Linux 4.0+); false when not allowed.
bool reset_peak_rss() {
  std::ofstream clear_refs("/proc/self/clear_refs");
  clear_refs << "5";
  clear_refs.flush();
  return clear_refs.good();
}

// Gives freed heap back to the system, so an RSS delta shows what is held, not what a
// previous repetition left in malloc's free lists.
void trim_heap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

// The exact bytes the lane index holds: the lanes vector and every lane's pages.
std::int64_t lane_bytes(const std::vector<Lane>& lanes) {
  std::size_t bytes = lanes.capacity() * sizeof(Lane);
  for (const Lane& lane : lanes) bytes += lane.pages.capacity() * sizeof(LanePage);
  return static_cast<std::int64_t>(bytes);
}

// Enqueues the job `make` writes for the store's one user, once an iteration, on `backend`;
// each page carries `page_bytes` of text or image.
template <typename MakeJob>
void time_enqueue(benchmark::State& state, Backend backend, const MakeJob& make,
                  std::size_t page_bytes) {
  const StoreHome home(state, backend);
  auto [store, user] = open_one_user_store(state, home);
  if (store == nullptr) return;
  const JobRequest job = make(user);
  for (auto _ : state) {
    auto enqueued = store->enqueue_job(job);
    if (!ok_or_skip(state, enqueued.status())) break;
    benchmark::DoNotOptimize(enqueued);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(job.pages.size()));
  state.SetBytesProcessed(state.iterations() *
                          static_cast<std::int64_t>(job.pages.size() * page_bytes));
}

// enqueue_job of one 100-page job, 3 KB of text a page, into a growing database. Each job
// is one transaction: on SQLite with synchronous=FULL, so each pays for an fsync; on
// PostgreSQL one statement (one round trip) with synchronous_commit=on, so each waits for
// its WAL flush on the server.
void BM_Store_Enqueue100PageJob(benchmark::State& state, Backend backend) {
  time_enqueue(
      state, backend,
      [](fairlane::UserId user) {
        return make_job(user, kPagesPerJob, kPageTextBytes, kPageTokens);
      },
      kPageTextBytes);
}
BENCHMARK_CAPTURE(BM_Store_Enqueue100PageJob, sqlite, Backend::sqlite)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Store_Enqueue100PageJob, postgresql, Backend::postgresql)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The same for a 100-page job of image pages, 200 KB each: 20 MB a transaction where the
// text job writes 300 KB, so this is mostly the disk's write bandwidth.
void BM_Store_Enqueue100PageImageJob(benchmark::State& state) {
  time_enqueue(
      state, Backend::sqlite,
      [](fairlane::UserId user) { return make_image_job(user, kPagesPerJob); }, kPageImageBytes);
}
BENCHMARK(BM_Store_Enqueue100PageImageJob)->UseRealTime()->Unit(benchmark::kMillisecond);

// Enqueues `job` until at least `at_least` pages are queued, then reopens the store so that
// the write-ahead log is checkpointed into the file and the timed loop does not pay for
// copying the pages in (on PostgreSQL, where the server checkpoints, it is only a new
// connection). The pages' ids, in enqueue order; empty when a step failed (the
// benchmark is skipped then).
std::vector<fairlane::PageId> fill_and_reopen(benchmark::State& state, const StoreHome& home,
                                              std::unique_ptr<Store>& store, const JobRequest& job,
                                              std::size_t at_least) {
  std::vector<fairlane::PageId> pages;
  pages.reserve(at_least + job.pages.size());
  while (pages.size() < at_least) {
    auto enqueued = store->enqueue_job(job);
    if (!ok_or_skip(state, enqueued.status())) return {};
    for (const LanePage& page : enqueued->pages) pages.push_back(page.page_id);
  }
  store.reset();
  auto reopened = Store::open(home.db());
  if (!ok_or_skip(state, reopened.status())) return {};
  store = std::move(reopened).value();
  return pages;
}

// What a dispatch reads for a page: Store::page_call, its text and max_tokens and, for an
// image page, its image BLOB. 1,000 pages of one kind are enqueued untimed, the store is
// reopened (so the write-ahead log is checkpointed into the file), and each iteration reads
// the next page, round the 1,000: a page the size of a dispatch's, though the file (200 MB
// for images) stays in the page cache, as it would on a server with the memory for it.
void page_call_of(benchmark::State& state, Backend backend, bool images) {
  const StoreHome home(state, backend);
  auto [store, user] = open_one_user_store(state, home);
  if (store == nullptr) return;
  constexpr std::size_t kPages = 1'000;
  const JobRequest job = images ? make_image_job(user, kPagesPerJob)
                                : make_job(user, kPagesPerJob, kPageTextBytes, kPageTokens);
  const std::vector<fairlane::PageId> pages = fill_and_reopen(state, home, store, job, kPages);
  if (pages.empty()) return;

  std::size_t next = 0;
  std::int64_t bytes = 0;
  for (auto _ : state) {
    auto call = store->page_call(pages[next]);
    if (!ok_or_skip(state, call.status())) break;
    bytes += static_cast<std::int64_t>(call->text.size()) +
             (call->image ? static_cast<std::int64_t>(call->image->bytes.size()) : 0);
    benchmark::DoNotOptimize(call);
    next = (next + 1) % pages.size();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(bytes);
}

// On PostgreSQL a page_call is one query, one round trip.
void BM_Store_PageCall_Text(benchmark::State& state, Backend backend) {
  page_call_of(state, backend, false);
}
BENCHMARK_CAPTURE(BM_Store_PageCall_Text, sqlite, Backend::sqlite)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Store_PageCall_Text, postgresql, Backend::postgresql)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

void BM_Store_PageCall_Image(benchmark::State& state) {
  page_call_of(state, Backend::sqlite, true);
}
BENCHMARK(BM_Store_PageCall_Image)->UseRealTime()->Unit(benchmark::kMicrosecond);

// One page's life at the provider, as the dispatcher records it: dispatched, then
// completed with a 1 KB output, both through GroupCommit (512 a batch, 5 ms at most),
// flushed whenever due. An iteration is a page; it counts once its completion has
// committed (the last batch is flushed inside the last iteration). The pages are
// enqueued before the timing starts, 3 KB of text each as above. On PostgreSQL a batch is
// one call of fairlane_apply: one round trip and one synchronous commit.
void BM_Store_DispatchComplete_GroupCommit(benchmark::State& state, Backend backend) {
  const StoreHome home(state, backend);
  auto [store, user] = open_one_user_store(state, home);
  if (store == nullptr) return;

  constexpr std::size_t kPoolJobPages = 1'000;
  const JobRequest pool_job = make_job(user, kPoolJobPages, kPageTextBytes, kPageTokens);
  const std::vector<fairlane::PageId> pages =
      fill_and_reopen(state, home, store, pool_job, static_cast<std::size_t>(state.max_iterations));
  if (pages.empty()) return;

  const fairlane::SteadyClock clock;
  GroupCommit commits(*store, clock);
  const std::string output = prose(7, kOutputBytes);
  std::int64_t completed = 0;
  const auto count_completed = [&completed](std::int64_t changed) { completed += changed; };
  const auto flush = [&]() { return ok_or_skip(state, commits.flush()); };

  std::size_t next = 0;
  for (auto _ : state) {
    const fairlane::PageId page = pages[next++];
    commits.submit(PageTransition::dispatched(page, kPageTokens));
    if (commits.due() && !flush()) break;
    commits.submit(PageTransition::completed(page, output, kPageUsage), count_completed);
    if ((commits.due() || next == static_cast<std::size_t>(state.max_iterations)) && !flush()) {
      break;
    }
  }
  if (!state.error_occurred() && completed != state.iterations()) {
    state.SkipWithError("not every page was completed exactly once");
  }
  state.SetItemsProcessed(completed);
}
BENCHMARK_CAPTURE(BM_Store_DispatchComplete_GroupCommit, sqlite, Backend::sqlite)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Store_DispatchComplete_GroupCommit, postgresql, Backend::postgresql)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The database of 10,000 users with one 100-page job each, all queued (short texts),
// built by the store itself when first asked for, once per process; removed at exit.
class MillionPageDatabase {
 public:
  MillionPageDatabase() {
    const auto start = std::chrono::steady_clock::now();
    status_ = build();
    build_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  static const MillionPageDatabase& get() {
    static const MillionPageDatabase database;
    return database;
  }

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] const Status& status() const { return status_; }
  [[nodiscard]] double build_s() const { return build_s_; }

 private:
  Status build() {
    if (dir_.path().empty()) {
      return Status{fairlane::StatusCode::internal, "cannot make a temporary directory"};
    }
    path_ = dir_.file("million.db");
    auto store = Store::open(path_);
    if (!store.ok()) return store.status();
    JobRequest job = make_job(0, kPagesPerJob, kMillionPageTextBytes, kMaxTokens + 4);
    for (std::int64_t u = 0; u < kMillionUsers; ++u) {
      auto user = store.value()->add_user("user-" + std::to_string(u));
      if (!user.ok()) return user.status();
      job.user_id = user->user.id;
      if (auto enqueued = store.value()->enqueue_job(job); !enqueued.ok()) {
        return enqueued.status();
      }
    }
    return {};
  }

  TempDir dir_;
  std::string path_;
  Status status_;
  double build_s_ = 0;
};

// What a restart pays: load_lanes of 1,000,000 queued pages in 10,000 lanes, on a store
// already open. Counters: the exact bytes of the vectors (lanes_MB), and the resident set
// the result holds (rss_delta_MB) and needed at its peak while loading (peak_delta_MB).
void BM_Store_LoadLanes_1M(benchmark::State& state) {
  const MillionPageDatabase& db = MillionPageDatabase::get();
  if (!ok_or_skip(state, db.status())) return;
  auto store = Store::open(db.path());
  if (!ok_or_skip(state, store.status())) return;

  for (auto _ : state) {
    state.PauseTiming();
    trim_heap();
    const bool peak_known = reset_peak_rss();
    const std::int64_t rss_before = status_bytes("VmRSS");
    state.ResumeTiming();

    auto lanes = store.value()->load_lanes();

    state.PauseTiming();
    if (!ok_or_skip(state, lanes.status())) break;
    const std::int64_t rss_after = status_bytes("VmRSS");
    std::int64_t pages = 0;
    for (const Lane& lane : lanes.value()) pages += static_cast<std::int64_t>(lane.pages.size());
    if (lanes->size() != static_cast<std::size_t>(kMillionUsers) ||
        pages != kMillionUsers * static_cast<std::int64_t>(kPagesPerJob)) {
      state.SkipWithError("load_lanes did not return 10,000 lanes of 100 pages");
      break;
    }
    state.counters["lanes_MB"] = static_cast<double>(lane_bytes(lanes.value())) / kBytesPerMB;
    state.counters["rss_delta_MB"] = static_cast<double>(rss_after - rss_before) / kBytesPerMB;
    if (peak_known) {
      state.counters["peak_delta_MB"] =
          static_cast<double>(status_bytes("VmHWM") - rss_before) / kBytesPerMB;
    }
    state.counters["db_build_s"] = db.build_s();
    state.SetItemsProcessed(pages);
    lanes.value() = {};  // frees the lanes, untimed
    state.ResumeTiming();
  }
}
BENCHMARK(BM_Store_LoadLanes_1M)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(5);

// The whole restart: Store::open of the 1M-page database, then load_lanes. open_ms says
// how much of it the open (and its schema check) takes.
void BM_Store_OpenLoadLanes_1M(benchmark::State& state) {
  const MillionPageDatabase& db = MillionPageDatabase::get();
  if (!ok_or_skip(state, db.status())) return;

  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    auto store = Store::open(db.path());
    if (!ok_or_skip(state, store.status())) break;
    const auto opened = std::chrono::steady_clock::now();
    auto lanes = store.value()->load_lanes();
    if (!ok_or_skip(state, lanes.status())) break;
    benchmark::DoNotOptimize(lanes);

    state.PauseTiming();
    state.counters["open_ms"] = std::chrono::duration<double, std::milli>(opened - start).count();
    state.SetItemsProcessed(kMillionUsers * static_cast<std::int64_t>(kPagesPerJob));
    lanes.value() = {};  // the lanes and the store are freed and closed untimed
    store.value().reset();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_Store_OpenLoadLanes_1M)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(5);

// What a leader's start pays after load_lanes to find the promises it keeps: the view of each
// job with queued pages (Dispatcher restore_promises, one Store::jobs read), here the 10,000
// jobs of the 1M-page database, on a store already open.
void BM_Store_ReadEveryQueuedJob_10k(benchmark::State& state) {
  const MillionPageDatabase& db = MillionPageDatabase::get();
  if (!ok_or_skip(state, db.status())) return;
  auto store = Store::open(db.path());
  if (!ok_or_skip(state, store.status())) return;
  auto lanes = store.value()->load_lanes();
  if (!ok_or_skip(state, lanes.status())) return;
  std::int64_t jobs = 0;
  for (auto _ : state) {
    std::vector<fairlane::JobId> ids;
    for (const Lane& lane : lanes.value()) {
      for (const LanePage& page : lane.pages) ids.push_back(page.job_id);
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    auto views = store.value()->jobs(ids);
    if (!ok_or_skip(state, views.status())) return;
    jobs = static_cast<std::int64_t>(views->size());
    benchmark::DoNotOptimize(views);
  }
  state.SetItemsProcessed(jobs * static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_Store_ReadEveryQueuedJob_10k)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(5);

// The views of 2,000 one-page jobs, read one at a time (job(), as a start did until
// 2026-12-06) or by the set (jobs()), on either store: on PostgreSQL each read is a round
// trip.
constexpr int kViewedJobs = 2'000;
void BM_Store_ReadJobViews_2k(benchmark::State& state, Backend backend, bool by_set) {
  const StoreHome home(state, backend);
  auto [store, user] = open_one_user_store(state, home);
  if (store == nullptr) return;
  std::vector<fairlane::JobId> ids;
  for (int k = 0; k < kViewedJobs; ++k) {
    auto job = store->enqueue_job(make_job(user, 1, 100, kPageTokens));
    if (!ok_or_skip(state, job.status())) return;
    ids.push_back(job->job.id);
  }
  for (auto _ : state) {
    if (by_set) {
      auto views = store->jobs(ids);
      if (!ok_or_skip(state, views.status())) return;
      benchmark::DoNotOptimize(views);
      continue;
    }
    for (const fairlane::JobId id : ids) {
      auto view = store->job(id);
      if (!ok_or_skip(state, view.status())) return;
      benchmark::DoNotOptimize(view);
    }
  }
  state.SetItemsProcessed(state.iterations() * kViewedJobs);
}
BENCHMARK_CAPTURE(BM_Store_ReadJobViews_2k, sqlite_one_at_a_time, Backend::sqlite, false)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Store_ReadJobViews_2k, sqlite_by_set, Backend::sqlite, true)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Store_ReadJobViews_2k, postgresql_one_at_a_time, Backend::postgresql, false)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Store_ReadJobViews_2k, postgresql_by_set, Backend::postgresql, true)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// One batch of serve --retain's pruning (RetentionConfig::batch_pages, 256): how long the
// store is held by it. Each iteration first finishes, untimed, jobs of 20 text pages of 3 KB
// with 1 KB outputs (12 of them fit the batch), or one-page jobs of a 200 KB image (5 fit:
// an image page counts 50), and a newest job, which is never pruned.
constexpr std::int64_t kPruneBatchPages = 256;
void BM_Store_PruneBatch(benchmark::State& state, Backend backend, bool images) {
  const StoreHome home(state, backend);
  auto [store, user] = open_one_user_store(state, home);
  if (store == nullptr) return;
  const std::string output = prose(7, kOutputBytes);
  const std::size_t jobs = images ? 6 : 13;
  std::int64_t pruned_pages = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<PageTransition> sent;
    std::vector<PageTransition> done;
    for (std::size_t k = 0; k <= jobs; ++k) {
      auto job = store->enqueue_job(images ? make_image_job(user, 1)
                                           : make_job(user, 20, kPageTextBytes, kPageTokens));
      if (!ok_or_skip(state, job.status())) return;
      for (const LanePage& page : job->pages) {
        sent.push_back(PageTransition::dispatched(page.page_id, page.estimated_tokens));
        done.push_back(PageTransition::completed(page.page_id, output, kPageUsage));
      }
    }
    if (!ok_or_skip(state, store->apply(sent).status()) ||
        !ok_or_skip(state, store->apply(done).status())) {
      return;
    }
    const auto later = std::chrono::system_clock::now() + std::chrono::hours(1);
    state.ResumeTiming();
    auto pruned = store->prune(later, kPruneBatchPages);
    if (!ok_or_skip(state, pruned.status())) return;
    pruned_pages += pruned->pages;
  }
  state.counters["pages_per_batch"] =
      static_cast<double>(pruned_pages) / static_cast<double>(state.iterations());
}
BENCHMARK_CAPTURE(BM_Store_PruneBatch, sqlite_text, Backend::sqlite, false)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Store_PruneBatch, sqlite_images, Backend::sqlite, true)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Store_PruneBatch, postgresql_text, Backend::postgresql, false)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Store_PruneBatch, postgresql_images, Backend::postgresql, true)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
