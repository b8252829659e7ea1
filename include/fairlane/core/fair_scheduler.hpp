// FairScheduler: who goes next. One FIFO lane per user; deficit round robin over the
// non-empty lanes with a page's estimated tokens as its cost. Each visit a lane earns
// quantum x weight tokens of credit and gives up head pages while its credit covers them,
// so every backlogged user gets a share of TOKENS in proportion to their weight: equal page
// costs make it plain round robin, a user of 8,000-token pages gets one page a turn while a
// user of 800-token pages gets ten.
//
// The scheduler never skips a page because the budget cannot take it now: the caller peeks
// the next page, waits for the budget, and then takes that same page, so order is kept.
// A page returned after a provider 429 goes back to the HEAD of its lane (among pages that
// came back, in page order) with its credit refunded, so it keeps its place.
//
// Cost: next page O(1) whatever the number of lanes (the quantum is at least the largest
// head-of-lane charge, so a visit to a backlogged lane not in debt always yields a page); adding a
// page O(1), or O(log jobs queued in its lane) expected when it starts a job there; taking one
// O(1), or O(log jobs in the lane) when it is its job's last; a job's place in its lane
// O(log jobs queued in that lane) expected (its indices are O(1), the tokens ahead of it come
// from the lane's LaneOrder); returning a page O(queued pages with lower ids + log jobs in
// the lane); removing a cancelled job O(pages and jobs in its lane), for the pages kept and
// the marks of the jobs behind it. Lanes are kept in page-id order, so a job's pages stay
// together: a page whose id is below its lane's tail (a job another instance accepted,
// heard of late) is inserted in its place, O(pages and jobs in its lane).
//
// Thread safety: none, by design; only the io_context thread touches it.
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "fairlane/core/ids.hpp"
#include "fairlane/core/lane_lengths.hpp"
#include "fairlane/core/lane_order.hpp"

namespace fairlane {

struct QueuedPage {
  PageId page_id = 0;
  JobId job_id = 0;
  UserId user_id = 0;
  std::int64_t cost = 0;  // estimated tokens: the TPM reservation of its call
  // What its lane was charged when it was taken (FairScheduler): what the page is expected to
  // use. 0 while queued, and for a page sent out of turn (take_from), whose lane paid nothing.
  std::int64_t charged = 0;
};

class FairScheduler {
 public:
  // `quantum`: credit per visit per unit of weight, in tokens. 0 (the default) means
  // automatic: the largest charge (settle()) among the pages at the heads of the lanes, and
  // at least 1, so equal charges are plain round robin. A larger quantum lets a lane send
  // several pages a visit; a smaller one is raised to that largest head charge (while a big
  // page waits at a head, lanes of small pages send several a visit: fair in tokens,
  // coarser in turns).
  explicit FairScheduler(std::int64_t quantum = 0);

  FairScheduler(const FairScheduler&) = delete;
  FairScheduler& operator=(const FairScheduler&) = delete;

  // A user's weight (1 unless set); weights below 1 count as 1.
  void set_weight(UserId user, std::int64_t weight);
  [[nodiscard]] std::int64_t weight(UserId user) const;

  // Adds a page to its user's lane, in page-id order: at the tail, but for a page whose id is
  // below the tail's (a job another instance accepted before this user's latest, heard of
  // after it), which goes before the pages with higher ids. The lane joins the round if it
  // was empty.
  void add(const QueuedPage& page);

  // Returns a page taken earlier to the HEAD of its user's lane (after any returned page
  // with a smaller id) and refunds what it was charged to the lane's credit: a retry keeps
  // its place. If the lane had emptied meanwhile, it joins the round like a new lane.
  void put_back(const QueuedPage& page);

  // A page taken earlier settled: the provider counted `used` tokens for its call. Its lane
  // is corrected by `used` minus what it was charged: an overrun is owed by the lane's next
  // turns, a refund is theirs to use, so backlogged users share the tokens the provider
  // counted, not fairlane's estimates. Refunds are the lane's from its next visit on, and
  // come to one visit's credit (quantum x weight) at most: refunds that came while a lane
  // was visited, banked while it was alone, or owed for pages charged before it had learned
  // what they use, would otherwise buy it a run of pages while a newcomer waits. A lane that
  // has emptied since has forgotten its credit, and the correction with it.
  //
  // A lane is charged what a page is expected to use, not its reservation: its cost times
  // the average of used / cost over the lane's own pages settled so far (each counted up to
  // 2), the n-th weighing max(0.1, 1 / n). A lane none of whose pages has settled is charged
  // at that average over every lane's pages, which follows each settle; the whole cost until
  // one has. Charged its reservation, a lane whose pages reserve four times what they use
  // spends its refunds in bursts of four pages, and a backlogged user runs a whole
  // reservation of counted tokens ahead of another. Charged one average for every lane, a
  // user whose pages use all they reserve, beside one whose pages use a quarter, was charged
  // next to nothing, took a whole window of calls, and owed it in the next.
  void settle(const QueuedPage& page, std::int64_t used);

  // A page taken earlier made no call and does not come back (it was withdrawn, or its job
  // cancelled, or it failed before it was sent): what its lane was charged goes back to the
  // lane's credit, as for a page put back, so that its user's other pages keep the turn.
  void refund(const QueuedPage& page);

  // The next page in fair order, or nullptr when every lane is empty. Repeated calls return
  // the same page until it is taken. The pointer is valid until the next change.
  [[nodiscard]] const QueuedPage* peek();

  // Takes the page peek() returns, with what its lane was charged for it.
  std::optional<QueuedPage> take();

  // The lane whose page peek() returns gives its turn away: it is charged for that page as
  // if it had sent it, and the page stays at its head (PromiseOrder sends a page whose
  // promise is at risk in its place). Nothing happens when every lane is empty.
  void give_turn();

  // The page at the head of `user`'s lane, or nullptr when it is empty: what take_from(user)
  // takes. The pointer is valid until the next change.
  [[nodiscard]] const QueuedPage* peek_lane(UserId user) const;

  // Takes the head page of `user`'s lane out of turn (PromiseOrder, after give_turn()). The
  // round and the lane's credit are left as they are: the lane's own turns are still its,
  // and the page is charged nothing (so nothing is refunded or corrected for it either).
  std::optional<QueuedPage> take_from(UserId user);

  // Removes every queued page of `job` from `user`'s lane (a cancellation) and returns them.
  std::vector<QueuedPage> remove_job(UserId user, JobId job);

  [[nodiscard]] std::int64_t size() const { return size_; }
  [[nodiscard]] std::size_t lane_count() const { return ring_.size(); }
  [[nodiscard]] std::int64_t lane_length(UserId user) const;
  // How many jobs have pages queued in the user's lane.
  [[nodiscard]] std::size_t lane_jobs(UserId user) const;
  // The tokens (costs) of every page queued in the user's lane.
  [[nodiscard]] std::int64_t lane_tokens(UserId user) const;

  // Where a job's queued pages stand in its lane: the 1-based index of its next page and
  // of its last, how many are queued and their tokens, and the tokens of the lane's pages
  // ahead of it (its user's earlier jobs). std::nullopt when none is queued.
  struct JobPlace {
    std::int64_t next_index;
    std::int64_t last_index;
    std::int64_t queued;
    std::int64_t tokens;
    std::int64_t tokens_before;
  };
  [[nodiscard]] std::optional<JobPlace> job_place(UserId user, JobId job) const;

  // Every lane's length by weight, for the estimator.
  [[nodiscard]] const LaneLengths& lengths() const { return lengths_; }
  // The tokens of the lanes, by weight, for the estimator, each lane in one of two indexes
  // filed under ceil(value / kTokenUnit): sum_min(weight, tokens, kTokenUnit) is the sum
  // over the index's lanes of min(their value, tokens), exact but for a lane less than a
  // unit below the threshold, which counts the threshold.
  //   token_lengths(): the lanes that have not learned what their pages use (lane_usage()),
  //     by their tokens (the costs of their queued pages);
  //   used_lengths(): the lanes that have, by the tokens their queued pages are expected to
  //     use, expected_use(lane_tokens(), *lane_usage()): what fair order shares, once each
  //     page's charge is corrected by what it used.
  static constexpr std::int64_t kTokenUnit = 256;
  [[nodiscard]] const LaneLengths& token_lengths() const { return token_lengths_; }
  [[nodiscard]] const LaneLengths& used_lengths() const { return used_lengths_; }
  // What the user's settled pages used over what they cost, as averages (settle(), at the
  // weights of its charges' usage), or std::nullopt while none has settled: what its queued
  // pages are expected to use per token, as used_lengths() files them.
  [[nodiscard]] std::optional<double> lane_usage(UserId user) const;
  // The average cost of the user's settled pages, at the same weights (0 while none has
  // settled): what kind of page its lane_usage() was learned from.
  [[nodiscard]] double lane_cost(UserId user) const;
  // What pages of `tokens` in all are expected to use at `usage`, as used_lengths() files them.
  [[nodiscard]] static std::int64_t expected_use(std::int64_t tokens, double usage);

 private:
  // A job's queued pages occupy lane positions first..last, counted from the lane's
  // creation (absolute), so taking a page moves no job's marks.
  // `filed_under` is the page id the job is filed under in its lane's `order`.
  struct JobMarks {
    std::int64_t first = 0;
    std::int64_t last = 0;
    std::int64_t queued = 0;
    std::int64_t tokens = 0;
    PageId filed_under = 0;
  };
  // A head page's key: its charge, in head_charges_, once its lane has learned what its own
  // pages use; its cost, in unlearned_head_costs_, before (it is charged at usage_, which
  // every settle moves).
  struct HeadKey {
    std::int64_t value = 0;
    bool learned = false;
    bool operator==(const HeadKey&) const = default;
  };
  struct Lane {
    std::deque<QueuedPage> pages;
    std::int64_t weight = 1;
    std::int64_t credit = 0;
    bool credited = false;            // has earned its credit for the current visit
    std::int64_t consumed = 0;        // absolute position of the head, minus one
    std::int64_t enqueued = 0;        // absolute position of the tail
    std::int64_t tokens = 0;          // the costs of `pages`
    std::int64_t indexed = 0;         // the key token_lengths_ or used_lengths_ holds it under
    std::int64_t indexed_tokens = 0;  // and the value it holds for it
    bool indexed_used = false;        // true: in used_lengths_
    std::unordered_map<JobId, JobMarks> jobs;
    // The jobs in lane order with their tokens. Every job is filed under its first queued
    // page with its tokens, except the head page's job: takes leave it where it was filed
    // (an earlier page of its own, still below every other job's) with its tokens then,
    // so that a take stays O(1). Only put_back and insert_in_order can put a job ahead of
    // it, and they file the head's job afresh first.
    LaneOrder order;
    std::optional<std::list<UserId>::iterator> in_ring;
    // The average used / cost of the lane's settled pages (each counted up to twice its cost),
    // what it is charged by, and how many have settled.
    double usage = 1.0;
    double settled = 0.0;
    // The averages of what they used and of what they cost, at the same weights: what its
    // queued pages are expected to use is their tokens times the ratio of the two, as the
    // estimator's averages count it (the mean of each page's ratio is not: pages of 1,000
    // using 100 beside pages of 3,000 using 3,000 use 0.775 of their tokens, not 0.55).
    double used_average = 0.0;
    double cost_average = 0.0;
    [[nodiscard]] double use_ratio() const {
      return cost_average > 0.0 ? used_average / cost_average : usage;
    }
    std::int64_t refunded = 0;  // refunds, added to the credit at the next visit (settle())
    // Where the lane's head page is indexed for the quantum, if it has one (HeadKey).
    std::optional<HeadKey> head;
  };

  Lane& lane_of(UserId user);
  void join_ring(UserId user, Lane& lane);
  void leave_ring_if_empty(Lane& lane);
  // Records a change of `lane` in the length and token indexes and the head index.
  void changed(Lane& lane, std::int64_t length_before);
  // Files the lane afresh in token_lengths_ or used_lengths_, if its tokens, its usage or
  // its weight changed (`weight_before`: the weight it was filed under).
  void index_tokens(Lane& lane, std::int64_t weight_before);
  // Files the lane's head page afresh in the head index, if its key changed.
  void index_head(Lane& lane);
  [[nodiscard]] std::int64_t quantum() const;
  // What a page of `cost` is charged at `usage` (used / cost): at least 1 if it costs anything.
  [[nodiscard]] static std::int64_t charge_at(std::int64_t cost, double usage);
  // Adds a refund of `tokens` to the lane's next visit, up to one visit's credit (settle()).
  void give_back(Lane& lane, std::int64_t tokens);
  // What `lane` is charged for a page of `cost` (settle()).
  [[nodiscard]] std::int64_t charge_for(const Lane& lane, std::int64_t cost) const;
  // Adds `page` to a non-empty lane whose tail has a higher id, before the pages with higher
  // ids: the marks of their jobs move one slot towards the tail.
  void insert_in_order(Lane& lane, const QueuedPage& page);
  // Counts `page`, just inserted at absolute `position` of `lane`, in its job's marks and
  // tokens, and in the lane's order: its job filed afresh when the page is its first.
  void file(Lane& lane, const QueuedPage& page, std::int64_t position);
  // Removes the head page of a non-empty lane (its credit untouched) and returns it.
  QueuedPage pop_head(Lane& lane);
  // The id of the first queued page of a job of `lane`.
  [[nodiscard]] static PageId first_page(const Lane& lane, const JobMarks& marks) {
    return lane.pages[static_cast<std::size_t>(marks.first - lane.consumed - 1)].page_id;
  }
  // Files a queued job of `lane` afresh: under its first queued page, with its tokens.
  static void refile(Lane& lane, JobId job, JobMarks& marks);

  // Constant after construction.
  const std::int64_t configured_quantum_;

  // Only touched on the owning thread.
  std::unordered_map<UserId, Lane> lanes_;
  std::list<UserId> ring_;  // the non-empty lanes, in visiting order
  std::list<UserId>::iterator current_ = ring_.end();
  // The heads of the lanes, for the quantum: charge -> lanes that have learned and are
  // charged that for their head page; cost -> lanes that have not, with a head of that cost.
  std::map<std::int64_t, std::int64_t> head_charges_;
  std::map<std::int64_t, std::int64_t> unlearned_head_costs_;
  std::int64_t size_ = 0;
  double usage_ = 1.0;    // the average used / cost of every lane's settled pages
  double settled_ = 0.0;  // pages settled
  LaneLengths lengths_;
  LaneLengths token_lengths_;
  LaneLengths used_lengths_;
};

}  // namespace fairlane
