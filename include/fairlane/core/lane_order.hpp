// LaneOrder: the jobs of one lane in lane order, each filed under the id of a page (its
// first queued page) with its tokens, indexed so that the tokens of every job filed after a
// given page id are summed in O(log jobs). The FairScheduler keeps one per lane: a lane is
// in page-id order and a job's pages are contiguous in it, so the jobs behind a job are the
// ones filed after its first page, and the tokens ahead of it are the lane's total minus its
// own minus those.
//
// A treap: a binary search tree on (page id, job id) whose shape follows pseudo-random
// priorities, each node holding the tokens of its subtree. Inserting, erasing, changing a
// job's tokens and summing cost O(log jobs) expected; the priorities come from a fixed
// generator, so a given sequence of operations always builds the same tree.
//
// Thread safety: none, by design; it lives with the FairScheduler on one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fairlane/core/ids.hpp"

namespace fairlane {

class LaneOrder {
 public:
  // Files `job` under `page` with `tokens`. A job is filed once: (page, job) must be new.
  void insert(PageId page, JobId job, std::int64_t tokens);
  // Removes the job filed under (page, job); false if there is none.
  bool erase(PageId page, JobId job);
  // Adds `delta` to the tokens of the job filed under (page, job); false if there is none.
  bool add_tokens(PageId page, JobId job, std::int64_t delta);

  // The tokens of the jobs filed under a page id greater than `page`.
  [[nodiscard]] std::int64_t tokens_after(PageId page) const;
  // The tokens of every job filed.
  [[nodiscard]] std::int64_t tokens() const { return nodes_[root_].subtree_tokens; }
  [[nodiscard]] std::int64_t size() const { return size_; }

 private:
  struct Key {
    PageId page = 0;
    JobId job = 0;
    friend bool operator<(const Key& a, const Key& b) {
      return a.page != b.page ? a.page < b.page : a.job < b.job;
    }
    friend bool operator==(const Key& a, const Key& b) = default;
  };
  struct Node {
    Key key;
    std::int64_t tokens = 0;
    std::int64_t subtree_tokens = 0;
    std::uint64_t priority = 0;
    std::size_t left = 0;  // 0: none (nodes_[0] is an empty sentinel)
    std::size_t right = 0;
  };

  // Recomputes a node's subtree tokens from its children.
  void pull(std::size_t node);
  // The subtrees of `node` with keys below `key` and the rest.
  struct Halves {
    std::size_t below;
    std::size_t rest;
  };
  Halves split(std::size_t node, const Key& key);
  // Joins two trees, every key of `low` below every key of `high`.
  std::size_t merge(std::size_t low, std::size_t high);
  // `node`'s subtree without the node filed under `key`; `found` says whether there was one.
  std::size_t erase(std::size_t node, const Key& key, bool& found);
  [[nodiscard]] std::size_t find(const Key& key) const;
  std::uint64_t next_priority();

  std::vector<Node> nodes_{Node{}};
  std::vector<std::size_t> free_;  // erased nodes, for reuse
  std::size_t root_ = 0;
  std::int64_t size_ = 0;
  std::uint64_t seed_ = 0;
};

}  // namespace fairlane
