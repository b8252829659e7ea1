// Pages of every kind in the store: text pages as before, image pages with their encoded
// image (read back whole for the call), blank pages written done and never in a lane.
#include <doctest/doctest.h>

#include <string>

#include "fairlane/store/store.hpp"
#include "support/store.hpp"
#include "support/store_home.hpp"

using fairlane::JobRequest;
using fairlane::JobState;
using fairlane::PageImage;
using fairlane::PageInput;
using fairlane::PageKind;
using fairlane::PageState;
using fairlane::PageTransition;
using fairlane::StoreOptions;
using fairlane::testing::apply;
using fairlane::testing::job_view;
using fairlane::testing::ManualWallClock;

namespace {

// Bytes with a NUL and high bytes in them, as any PNG has: a BLOB must keep them all.
PageImage an_image(int n) {
  return PageImage{"image/png", 800 + n, 1000,
                   std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16) + std::to_string(n)};
}

JobRequest mixed_job(fairlane::UserId user) {
  JobRequest request;
  request.user_id = user;
  request.name = "scan.pdf";
  request.max_tokens = 200;
  request.pages = {PageInput{"Page 1 of 4\n", 300, PageKind::text, std::nullopt},
                   PageInput{"", 1'800, PageKind::image, an_image(2)},
                   PageInput{"", 0, PageKind::blank, std::nullopt},
                   PageInput{"", 1'900, PageKind::image, an_image(4)}};
  return request;
}

}  // namespace

FAIRLANE_STORE_TEST_CASE(
    "Pages of each kind: blank ones done at once, images kept whole for their call",
    sqlite_memory) {
  ManualWallClock wall;
  auto store = home.open(StoreOptions{.wall_clock = wall.function()});
  const auto alice = store->add_user("alice").value().user.id;
  const auto job = store->enqueue_job(mixed_job(alice)).value();

  // Only the pages that make a call are in the lane, in page order.
  REQUIRE(job.pages.size() == 3);
  CHECK(job.pages[0].estimated_tokens == 300);
  CHECK(job.pages[1].estimated_tokens == 1'800);
  CHECK(job.pages[2].estimated_tokens == 1'900);
  // As enqueue returns it, and as it is read back.
  for (const fairlane::JobView& stored : {job.job, job_view(*store, job.job.id)}) {
    CHECK(stored.pages.total == 4);
    CHECK(stored.pages.queued == 3);
    CHECK(stored.pages.done == 1);
    CHECK(stored.pages.blank == 1);
    CHECK(stored.pages.images == 2);
    CHECK(stored.state == JobState::queued);
    CHECK_FALSE(stored.finished_at.has_value());
  }

  const auto text_call = store->page_call(job.pages[0].page_id).value();
  CHECK(text_call.text == "Page 1 of 4\n");
  CHECK_FALSE(text_call.image.has_value());
  const auto image_call = store->page_call(job.pages[1].page_id).value();
  CHECK(image_call.text.empty());
  CHECK(image_call.max_tokens == 200);
  REQUIRE(image_call.image.has_value());
  CHECK(image_call.image->media_type == "image/png");
  CHECK(image_call.image->width == 802);
  CHECK(image_call.image->height == 1000);
  CHECK(image_call.image->bytes == an_image(2).bytes);

  const auto results = store->results(job.job.id).value();
  REQUIRE(results.size() == 4);
  CHECK(results[0].kind == PageKind::text);
  CHECK(results[1].kind == PageKind::image);
  CHECK(results[2].kind == PageKind::blank);
  CHECK(results[2].state == PageState::done);
  CHECK(results[2].output == std::string());
  CHECK(results[3].kind == PageKind::image);
  CHECK(results[3].state == PageState::queued);

  // The three calls end; the job is done, the blank page counted once.
  for (const auto& page : job.pages) {
    apply(*store, {PageTransition::dispatched(page.page_id, page.estimated_tokens),
                   PageTransition::completed(page.page_id, "text", fairlane::Usage{10, 20})});
  }
  const auto done = job_view(*store, job.job.id);
  CHECK(done.state == JobState::done);
  CHECK(done.pages.done == 4);
  CHECK(done.pages.queued == 0);
  CHECK(done.finished_at.has_value());
}

FAIRLANE_STORE_TEST_CASE("A job whose pages are all blank is done from the start", sqlite_memory) {
  ManualWallClock wall;
  auto store = home.open(StoreOptions{.wall_clock = wall.function()});
  const auto alice = store->add_user("alice").value().user.id;
  JobRequest request{alice, "empty.pdf", {PageInput{"", 0, PageKind::blank, std::nullopt}}, 100};
  const auto job = store->enqueue_job(request).value();
  CHECK(job.pages.empty());
  CHECK(job.job.state == JobState::done);
  // The view the upload answers with says when, as the stored one does.
  CHECK(job.job.created_at == wall.now);
  CHECK(job.job.finished_at == wall.now);
  const auto stored = job_view(*store, job.job.id);
  CHECK(stored.state == JobState::done);
  CHECK(stored.finished_at == wall.now);
  CHECK(store->load_lanes()->empty());
}

FAIRLANE_STORE_TEST_CASE("An image page needs its image, and a text page none", sqlite_memory) {
  auto store = home.open();
  const auto alice = store->add_user("alice").value().user.id;
  JobRequest request{alice, "bad.pdf", {PageInput{"", 10, PageKind::image, std::nullopt}}, 100};
  const auto refused = store->enqueue_job(request);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == fairlane::StatusCode::invalid_argument);
  request.pages = {PageInput{"text", 10, PageKind::text, an_image(1)}};
  CHECK_FALSE(store->enqueue_job(request).ok());
  CHECK(store->jobs_of(alice, 10)->jobs.empty());
}

FAIRLANE_STORE_TEST_CASE(
    "Restart: image pages come back in their lanes with their images, blank ones never",
    sqlite_file) {
  std::vector<fairlane::PageId> lane;
  fairlane::JobId job_id = 0;
  {
    auto store = home.open();
    const auto alice = store->add_user("alice").value().user.id;
    const auto job = store->enqueue_job(mixed_job(alice)).value();
    job_id = job.job.id;
    for (const auto& page : job.pages) lane.push_back(page.page_id);
    apply(*store, {PageTransition::dispatched(lane[1], 1'800)});
  }  // ends with the first image page in flight
  auto store = home.open();
  const auto lanes = store->load_lanes().value();
  REQUIRE(lanes.size() == 1);
  REQUIRE(lanes[0].pages.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK(lanes[0].pages[i].page_id == lane[i]);
  CHECK(store->page_call(lane[1])->image->bytes == an_image(2).bytes);
  const auto view = job_view(*store, job_id);
  CHECK(view.pages.queued == 3);
  CHECK(view.pages.blank == 1);
}
