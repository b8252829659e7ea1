// Faults whose truth only shows after a crash: the child process does the work and ends
// with _exit, never closing the database; the test then opens what it left behind.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "fairlane/store/store.hpp"
#include "support/faulty_vfs.hpp"
#include "support/store.hpp"

using fairlane::JobRequest;
using fairlane::PageTransition;
using fairlane::StatusCode;
using fairlane::StoreOptions;
using fairlane::testing::check_jobs_whole;
using fairlane::testing::enqueue;
using fairlane::testing::FaultyVfs;
using fairlane::testing::in_crashing_child;
using fairlane::testing::job_view;
using fairlane::testing::numbered_pages;
using fairlane::testing::open_store;
using fairlane::testing::TempDir;

TEST_CASE(
    "A disk that fills up in the middle of an upload leaves no partial job, even after a crash") {
  TempDir dir;
  const std::string path = dir.file("midway.db");
  const int child = in_crashing_child([&] {
    FaultyVfs::install();
    auto store = fairlane::Store::open(path, StoreOptions{.vfs = FaultyVfs::kName});
    if (!store.ok()) return 1;
    const auto alice = (*store)->add_user("alice");
    if (!alice.ok()) return 2;
    if (!(*store)->enqueue_job(JobRequest{alice->user.id, "a.pdf", numbered_pages(3), 100}).ok()) {
      return 3;
    }
    // 300 pages of 2 KB need hundreds of page writes; the disk is full after five.
    std::vector<fairlane::PageInput> pages;
    for (int i = 0; i < 300; ++i) pages.push_back({std::string(2048, 'p'), 600});
    FaultyVfs::fill_disk_after(5);
    const auto refused = (*store)->enqueue_job(JobRequest{alice->user.id, "big.pdf", pages, 100});
    if (refused.status().code() != StatusCode::disk_full) return 4;
    return FaultyVfs::refused() > 0 ? 0 : 5;
  });
  REQUIRE(child == 0);
  auto store = open_store(path);
  const auto alice = store->find_user_by_name("alice")->id;
  check_jobs_whole(*store, alice, 1);
  CHECK(store->load_lanes()->front().pages.size() == 3);
}

TEST_CASE(
    "A commit whose sync fails has an unknown outcome: the store stops writing, and a retry with "
    "the same Idempotency-Key finds the job once") {
  TempDir dir;
  const std::string path = dir.file("unknown.db");
  const int child = in_crashing_child([&] {
    FaultyVfs::install();
    auto store = fairlane::Store::open(path, StoreOptions{.vfs = FaultyVfs::kName});
    if (!store.ok()) return 1;
    const auto alice = (*store)->add_user("alice");
    if (!alice.ok()) return 2;
    const auto user = alice->user.id;
    const auto first =
        (*store)->enqueue_job(JobRequest{user, "a.pdf", numbered_pages(2), 100, "k1"});
    if (!first.ok()) return 3;
    FaultyVfs::break_sync();
    const auto unknown =
        (*store)->enqueue_job(JobRequest{user, "b.pdf", numbered_pages(2), 100, "k2"});
    if (unknown.status().code() != StatusCode::io_error) return 4;
    if (unknown.status().message().find("unknown") == std::string::npos) return 5;
    FaultyVfs::heal();
    // Healed or not, this store writes nothing more; reads still answer.
    if ((*store)->enqueue_job(JobRequest{user, "c.pdf", numbered_pages(2), 100, "k3"}).ok())
      return 6;
    const std::vector dispatch{PageTransition::dispatched(first->pages[0].page_id, 1)};
    if ((*store)->apply(dispatch).ok()) return 7;
    if (!(*store)->job(first->job.id).ok()) return 8;
    return 0;
  });
  REQUIRE(child == 0);

  auto store = open_store(path);
  const auto alice = store->find_user_by_name("alice")->id;
  const auto retry = store->enqueue_job(JobRequest{alice, "b.pdf", numbered_pages(2), 100, "k2"});
  REQUIRE(retry.ok());
  // a.pdf and b.pdf, whether b.pdf's first attempt survived the crash or not: never two.
  check_jobs_whole(*store, alice, 2);
}

TEST_CASE("Transitions commit without a sync: a failing sync after an upload does not stop them") {
  FaultyVfs::install();
  TempDir dir;
  auto store = open_store(dir.file("normal.db"), StoreOptions{.vfs = FaultyVfs::kName});
  const auto alice = store->add_user("alice")->user.id;
  const auto job = enqueue(*store, alice, 2);
  FaultyVfs::break_sync();
  const auto applied =
      store->apply(std::vector{PageTransition::dispatched(job.pages[0].page_id, 1)});
  FaultyVfs::heal();
  REQUIRE_MESSAGE(applied.ok(), applied.status().message());
  CHECK(job_view(*store, job.job.id).pages.in_flight == 1);
}
