#include "support/store.hpp"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <system_error>

namespace fairlane::testing {

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "fairlane-test-XXXXXX").string();
  REQUIRE(mkdtemp(pattern.data()) != nullptr);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::unique_ptr<Store> open_store(const std::string& path, StoreOptions options) {
  auto store = Store::open(path, std::move(options));
  REQUIRE_MESSAGE(store.ok(), store.status().message());
  return std::move(store).value();
}

std::vector<PageInput> numbered_pages(int count, std::int64_t tokens) {
  std::vector<PageInput> pages;
  for (int i = 1; i <= count; ++i) pages.push_back({"page " + std::to_string(i), tokens});
  return pages;
}

EnqueuedJob enqueue(Store& store, UserId user, int pages, const std::string& name,
                    std::optional<std::string> idempotency_key) {
  auto job = store.enqueue_job(
      JobRequest{user, name, numbered_pages(pages), 200, std::move(idempotency_key)});
  REQUIRE_MESSAGE(job.ok(), job.status().message());
  return std::move(job).value();
}

std::vector<std::int64_t> apply(Store& store, std::vector<PageTransition> transitions) {
  auto changed = store.apply(transitions);
  REQUIRE_MESSAGE(changed.ok(), changed.status().message());
  return std::move(changed).value();
}

void finish(Store& store, const EnqueuedJob& job) {
  std::vector<PageTransition> sent;
  std::vector<PageTransition> done;
  for (const LanePage& page : job.pages) {
    sent.push_back(PageTransition::dispatched(page.page_id, page.estimated_tokens));
    done.push_back(PageTransition::completed(page.page_id, "text", Usage{10, 5}));
  }
  apply(store, sent);
  apply(store, done);
}

JobView job_view(Store& store, JobId job) {
  auto view = store.job(job);
  REQUIRE_MESSAGE(view.ok(), view.status().message());
  return std::move(view).value();
}

void check_jobs_whole(Store& store, UserId user, std::size_t count) {
  const auto jobs = store.jobs_of(user, 100);
  REQUIRE_MESSAGE(jobs.ok(), jobs.status().message());
  CHECK(jobs->jobs.size() == count);
  for (const auto& job : jobs->jobs) {
    const auto results = store.results(job.id);
    REQUIRE(results.ok());
    CHECK(static_cast<std::int64_t>(results->size()) == job.pages.total);
    CHECK(job.pages.queued == job.pages.total);
  }
}

int in_crashing_child(const std::function<int()>& work) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 98;
    try {
      code = work();
    } catch (...) {
    }
    _exit(code);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace fairlane::testing
