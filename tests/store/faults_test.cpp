// Real faults beneath a real store: a lock held by another process, a full disk, a failing
// sync, a read-only file system. Each must give a Status naming the file and the problem,
// lose nothing already accepted, leave no partial job, and heal when the fault goes.
#include <doctest/doctest.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>
#include <string>

#include "core/fake_clock.hpp"
#include "fairlane/store/group_commit.hpp"
#include "fairlane/store/store.hpp"
#include "support/faulty_vfs.hpp"
#include "support/store.hpp"

using namespace std::chrono_literals;
using fairlane::GroupCommit;
using fairlane::JobRequest;
using fairlane::PageTransition;
using fairlane::StatusCode;
using fairlane::StoreOptions;
using fairlane::Usage;
using fairlane::testing::check_jobs_whole;
using fairlane::testing::enqueue;
using fairlane::testing::FaultyVfs;
using fairlane::testing::in_crashing_child;
using fairlane::testing::job_view;
using fairlane::testing::numbered_pages;
using fairlane::testing::open_store;
using fairlane::testing::TempDir;

namespace {

bool is_root() {
  return geteuid() == 0;
}
// What a test that needs a tmpfs says when it cannot mount one; CTest takes the test as
// skipped on it (SKIP_REGULAR_EXPRESSION in tests/CMakeLists.txt), so it does not vanish.
constexpr const char* kNotRoot =
    "SKIPPED: mounting a tmpfs needs root (CAP_SYS_ADMIN): run the tests as root for this one";

// A tmpfs of `size` mounted on a fresh directory; unmounted when the object goes.
class Tmpfs {
 public:
  explicit Tmpfs(const std::string& size) : options_("size=" + size) {
    REQUIRE_MESSAGE(mount("tmpfs", dir_.path().c_str(), "tmpfs", 0, options_.c_str()) == 0,
                    "mounting a tmpfs needs root (CAP_SYS_ADMIN)");
  }
  Tmpfs(const Tmpfs&) = delete;
  Tmpfs& operator=(const Tmpfs&) = delete;
  ~Tmpfs() { umount2(dir_.path().c_str(), MNT_DETACH); }
  std::string file(const std::string& name) const { return dir_.file(name); }
  void set_read_only(bool read_only) {
    unsigned long flags = MS_REMOUNT;
    if (read_only) flags |= MS_RDONLY;
    REQUIRE(mount(nullptr, dir_.path().c_str(), nullptr, flags, options_.c_str()) == 0);
  }

 private:
  TempDir dir_;
  std::string options_;
};

}  // namespace

TEST_CASE("A database locked by another process gives busy, naming the file, and then recovers") {
  TempDir dir;
  const std::string path = dir.file("locked.db");
  auto store = open_store(path, StoreOptions{.busy_timeout = 50ms});
  const auto alice = store->add_user("alice")->user.id;
  enqueue(*store, alice, 2);

  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr) == SQLITE_OK);
  const auto refused = store->enqueue_job(JobRequest{alice, "b.pdf", numbered_pages(3), 100, {}});
  CHECK(refused.status().code() == StatusCode::busy);
  CHECK(refused.status().message().find(path) != std::string::npos);
  CHECK(refused.status().message().find("locked") != std::string::npos);
  REQUIRE(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(other);

  check_jobs_whole(*store, alice, 1);
  enqueue(*store, alice, 3);
  check_jobs_whole(*store, alice, 2);
}

TEST_CASE("A full disk refuses the upload with disk_full, keeps what was accepted, and heals") {
  FaultyVfs::install();
  TempDir dir;
  const std::string path = dir.file("full.db");
  auto store = open_store(path, StoreOptions{.vfs = FaultyVfs::kName});
  const auto alice = store->add_user("alice")->user.id;
  const auto first = enqueue(*store, alice, 5);

  FaultyVfs::fill_disk();
  const auto refused =
      store->enqueue_job(JobRequest{alice, "big.pdf", numbered_pages(50), 100, {}});
  CHECK(FaultyVfs::refused() > 0);
  CHECK(refused.status().code() == StatusCode::disk_full);
  CHECK(refused.status().message().find(path) != std::string::npos);
  CHECK(refused.status().message().find("full") != std::string::npos);
  // Reads still work while the disk is full.
  CHECK(job_view(*store, first.job.id).pages.queued == 5);

  FaultyVfs::heal();
  check_jobs_whole(*store, alice, 1);
  enqueue(*store, alice, 50);
  check_jobs_whole(*store, alice, 2);

  // And after a restart, the lanes hold exactly the accepted pages.
  store.reset();
  store = open_store(path, StoreOptions{.vfs = FaultyVfs::kName});
  CHECK(store->load_lanes()->front().pages.size() == 55);
}

TEST_CASE("Write health reports a write that failed for a full disk until a write commits") {
  FaultyVfs::install();
  TempDir dir;
  const std::string path = dir.file("health.db");
  auto store = open_store(path, StoreOptions{.vfs = FaultyVfs::kName});
  const auto alice = store->add_user("alice")->user.id;
  const auto job = enqueue(*store, alice, 2);
  CHECK(store->write_health().ok());

  FaultyVfs::fill_disk();
  CHECK(
      store->enqueue_job(JobRequest{alice, "b.pdf", numbered_pages(5), 100, {}}).status().code() ==
      StatusCode::disk_full);
  CHECK(store->write_health().code() == StatusCode::disk_full);
  CHECK(store->write_health().message().find(path) != std::string::npos);
  // A refusal that is not the disk's changes nothing; neither does a read.
  CHECK(store->enqueue_job(JobRequest{alice, "", numbered_pages(1), 100, {}}).status().code() ==
        StatusCode::invalid_argument);
  CHECK(job_view(*store, job.job.id).pages.queued == 2);
  CHECK(store->write_health().code() == StatusCode::disk_full);
  // The probe writes, so it fails too while the disk is full.
  CHECK(store->probe_write().code() == StatusCode::disk_full);
  CHECK(store->write_health().code() == StatusCode::disk_full);

  FaultyVfs::heal();
  CHECK(store->probe_write().ok());
  CHECK(store->write_health().ok());

  // The dispatcher's batches count as writes too.
  FaultyVfs::fill_disk();
  const auto dispatch = PageTransition::dispatched(job.pages[0].page_id, 300);
  CHECK(store->apply(std::span(&dispatch, 1)).status().code() == StatusCode::disk_full);
  CHECK(store->write_health().code() == StatusCode::disk_full);
  FaultyVfs::heal();
  CHECK(store->apply(std::span(&dispatch, 1)).ok());
  CHECK(store->write_health().ok());
  CHECK(job_view(*store, job.job.id).pages.in_flight == 1);
}

TEST_CASE("A failing sync refuses the upload with io_error and leaves no partial job") {
  FaultyVfs::install();
  TempDir dir;
  const std::string path = dir.file("sync.db");
  auto store = open_store(path, StoreOptions{.vfs = FaultyVfs::kName});
  const auto alice = store->add_user("alice")->user.id;
  enqueue(*store, alice, 2);

  FaultyVfs::break_sync();
  const auto refused = store->enqueue_job(JobRequest{alice, "b.pdf", numbered_pages(4), 100, {}});
  CHECK(refused.status().code() == StatusCode::io_error);
  CHECK(refused.status().message().find(path) != std::string::npos);
  FaultyVfs::heal();

  store.reset();
  store = open_store(path, StoreOptions{.vfs = FaultyVfs::kName});
  check_jobs_whole(*store, alice, 1);
}

TEST_CASE(
    "A batch that cannot commit stays queued, tells nobody, and commits once the disk heals") {
  FaultyVfs::install();
  TempDir dir;
  auto store = open_store(dir.file("batch.db"), StoreOptions{.vfs = FaultyVfs::kName});
  const auto alice = store->add_user("alice")->user.id;
  const auto job = enqueue(*store, alice, 2);
  fairlane::FakeClock clock;
  GroupCommit commits(*store, clock);
  int told = 0;
  commits.submit(PageTransition::dispatched(job.pages[0].page_id, 300), [&](auto) { ++told; });
  commits.submit(PageTransition::dispatched(job.pages[1].page_id, 300), [&](auto) { ++told; });

  FaultyVfs::fill_disk();
  const auto status = commits.flush();
  CHECK(status.code() == StatusCode::disk_full);
  CHECK(told == 0);
  CHECK(commits.pending() == 2);
  CHECK(job_view(*store, job.job.id).pages.in_flight == 0);
  // It is not due again at once: the next try waits 100 ms, then 200 ms after another failure.
  CHECK_FALSE(commits.due());
  CHECK(commits.deadline() == clock.now() + 100ms);
  clock.advance(100ms);
  CHECK(commits.due());
  CHECK(commits.flush().code() == StatusCode::disk_full);
  CHECK(commits.deadline() == clock.now() + 200ms);

  FaultyVfs::heal();
  CHECK(commits.flush().ok());
  CHECK(told == 2);
  CHECK(commits.pending() == 0);
  CHECK(job_view(*store, job.job.id).pages.in_flight == 2);
}

TEST_CASE(
    "A real full disk (a 2 MB tmpfs) refuses uploads, loses nothing, and recovers when space "
    "returns") {
  if (!is_root()) {
    MESSAGE(std::string(kNotRoot));
    return;
  }
  Tmpfs disk("2m");
  const std::string path = disk.file("tiny.db");
  auto store = open_store(path);
  const auto alice = store->add_user("alice")->user.id;
  enqueue(*store, alice, 10);
  {
    std::ofstream filler(disk.file("filler"), std::ios::binary);
    const std::string block(4096, 'x');
    while (filler.write(block.data(), static_cast<std::streamsize>(block.size()))) {
    }
  }
  // 200 pages of 2 KB each cannot fit in what is left.
  std::vector<fairlane::PageInput> pages;
  for (int i = 0; i < 200; ++i) {
    pages.push_back({std::string(2048, static_cast<char>('a' + i % 26)), 600});
  }
  const auto refused = store->enqueue_job(JobRequest{alice, "big.pdf", pages, 100, {}});
  CHECK(refused.status().code() == StatusCode::disk_full);
  CHECK(refused.status().message().find(path) != std::string::npos);
  check_jobs_whole(*store, alice, 1);

  std::filesystem::remove(disk.file("filler"));
  const auto accepted = store->enqueue_job(JobRequest{alice, "big.pdf", pages, 100, {}});
  REQUIRE_MESSAGE(accepted.ok(), accepted.status().message());
  check_jobs_whole(*store, alice, 2);
}

// (Linux refuses to remount a file system read-only while a file on it is open for
// writing, so the fault is met where it happens in practice: at start.)
TEST_CASE("A database on a read-only file system is refused at open, naming the file") {
  if (!is_root()) {
    MESSAGE(std::string(kNotRoot));
    return;
  }
  Tmpfs disk("4m");
  const std::string path = disk.file("ro.db");
  {
    auto store = open_store(path);
    enqueue(*store, store->add_user("alice")->user.id, 3);
  }
  disk.set_read_only(true);
  const auto refused = fairlane::Store::open(path);
  CHECK(refused.status().code() == StatusCode::read_only);
  CHECK(refused.status().message().find(path) != std::string::npos);
  CHECK(refused.status().message().find("read-only") != std::string::npos);

  disk.set_read_only(false);
  auto store = open_store(path);
  const auto alice = store->find_user_by_name("alice")->id;
  enqueue(*store, alice, 2);
  check_jobs_whole(*store, alice, 2);
}
