// A Store that hands every call to another one: a base for test doubles that change one or
// two calls (a commit that waits for the test, a read that counts) and keep the rest real.
#pragma once

#include <memory>
#include <utility>

#include "fairlane/store/store.hpp"

namespace fairlane::testing {

class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(std::unique_ptr<Store> inner) : inner_(std::move(inner)) {}

  [[nodiscard]] const std::string& path() const override { return inner_->path(); }
  Result<NewUser> add_user(std::string_view name, std::int64_t weight) override {
    return inner_->add_user(name, weight);
  }
  Result<User> find_user_by_key(std::string_view key) override {
    return inner_->find_user_by_key(key);
  }
  Result<User> find_user_by_name(std::string_view name) override {
    return inner_->find_user_by_name(name);
  }
  Status set_weight(std::string_view name, std::int64_t weight) override {
    return inner_->set_weight(name, weight);
  }
  Result<std::vector<User>> users() override { return inner_->users(); }
  Result<EnqueuedJob> enqueue_job(const JobRequest& request) override {
    return inner_->enqueue_job(request);
  }
  Result<std::vector<Lane>> load_lanes() override { return inner_->load_lanes(); }
  Result<std::vector<std::int64_t>> apply(std::span<const PageTransition> transitions) override {
    return inner_->apply(transitions);
  }
  Result<std::int64_t> cancel_job(JobId job) override { return inner_->cancel_job(job); }
  Result<JobView> job(JobId job) override { return inner_->job(job); }
  Result<std::vector<JobView>> jobs(std::span<const JobId> ids) override {
    return inner_->jobs(ids);
  }
  Status revise_eta(JobId job, WallTime eta_at, std::string_view reason) override {
    return inner_->revise_eta(job, eta_at, reason);
  }
  Status set_promise(JobId job, WallTime promised_eta_at) override {
    return inner_->set_promise(job, promised_eta_at);
  }
  Result<JobView> job_of(std::string_view public_id, UserId owner) override {
    return inner_->job_of(public_id, owner);
  }
  Result<JobList> jobs_of(UserId user, std::size_t limit,
                          std::optional<std::string_view> cursor) override {
    return inner_->jobs_of(user, limit, cursor);
  }
  Result<KeyedJob> job_by_idempotency_key(UserId user, std::string_view key) override {
    return inner_->job_by_idempotency_key(user, key);
  }
  Result<std::vector<PageResult>> results_from(JobId job, std::int64_t from_seq,
                                               std::int64_t limit) override {
    return inner_->results_from(job, from_seq, limit);
  }
  Result<PageCall> page_call(PageId page) override { return inner_->page_call(page); }
  Result<std::vector<std::pair<UserId, std::int64_t>>> in_flight_by_user() override {
    return inner_->in_flight_by_user();
  }
  Result<Spend> recent_spend(std::chrono::milliseconds window) override {
    return inner_->recent_spend(window);
  }
  Result<CallsOut> calls_out(std::chrono::milliseconds window) override {
    return inner_->calls_out(window);
  }
  Result<std::vector<EndedCall>> recent_calls(std::size_t limit) override {
    return inner_->recent_calls(limit);
  }
  Result<RecentJobs> recent_jobs(WallTime since, std::size_t limit) override {
    return inner_->recent_jobs(since, limit);
  }
  Result<Pruned> prune(WallTime finished_before, std::int64_t budget) override {
    return inner_->prune(finished_before, budget);
  }
  Result<Pruned> prunable(WallTime finished_before) override {
    return inner_->prunable(finished_before);
  }
  [[nodiscard]] Status write_health() const override { return inner_->write_health(); }
  Status probe_write() override { return inner_->probe_write(); }
  ClusterStore* cluster() override { return inner_->cluster(); }

 private:
  std::unique_ptr<Store> inner_;
};

}  // namespace fairlane::testing
