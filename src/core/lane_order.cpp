#include "fairlane/core/lane_order.hpp"

namespace fairlane {

std::uint64_t LaneOrder::next_priority() {
  // splitmix64: well-spread priorities from a counter, the same every run.
  std::uint64_t z = (seed_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30U)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27U)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31U);
}

void LaneOrder::pull(std::size_t node) {
  Node& n = nodes_[node];
  n.subtree_tokens = n.tokens + nodes_[n.left].subtree_tokens + nodes_[n.right].subtree_tokens;
}

LaneOrder::Halves LaneOrder::split(std::size_t node, const Key& key) {
  if (node == 0) return {0, 0};
  if (nodes_[node].key < key) {
    const Halves right = split(nodes_[node].right, key);
    nodes_[node].right = right.below;
    pull(node);
    return {node, right.rest};
  }
  const Halves left = split(nodes_[node].left, key);
  nodes_[node].left = left.rest;
  pull(node);
  return {left.below, node};
}

std::size_t LaneOrder::merge(std::size_t low, std::size_t high) {
  if (low == 0) return high;
  if (high == 0) return low;
  if (nodes_[low].priority > nodes_[high].priority) {
    nodes_[low].right = merge(nodes_[low].right, high);
    pull(low);
    return low;
  }
  nodes_[high].left = merge(low, nodes_[high].left);
  pull(high);
  return high;
}

void LaneOrder::insert(PageId page, JobId job, std::int64_t tokens) {
  std::size_t node = 0;
  if (free_.empty()) {
    node = nodes_.size();
    nodes_.emplace_back();
  } else {
    node = free_.back();
    free_.pop_back();
  }
  const Key key{page, job};
  nodes_[node] = Node{.key = key,
                      .tokens = tokens,
                      .subtree_tokens = tokens,
                      .priority = next_priority(),
                      .left = 0,
                      .right = 0};
  const Halves halves = split(root_, key);
  root_ = merge(merge(halves.below, node), halves.rest);
  ++size_;
}

std::size_t LaneOrder::erase(std::size_t node, const Key& key, bool& found) {
  if (node == 0) return 0;
  if (nodes_[node].key == key) {
    found = true;
    free_.push_back(node);
    return merge(nodes_[node].left, nodes_[node].right);
  }
  if (key < nodes_[node].key) {
    nodes_[node].left = erase(nodes_[node].left, key, found);
  } else {
    nodes_[node].right = erase(nodes_[node].right, key, found);
  }
  pull(node);
  return node;
}

bool LaneOrder::erase(PageId page, JobId job) {
  bool found = false;
  root_ = erase(root_, Key{page, job}, found);
  if (found) --size_;
  return found;
}

std::size_t LaneOrder::find(const Key& key) const {
  std::size_t node = root_;
  while (node != 0 && !(nodes_[node].key == key)) {
    node = key < nodes_[node].key ? nodes_[node].left : nodes_[node].right;
  }
  return node;
}

bool LaneOrder::add_tokens(PageId page, JobId job, std::int64_t delta) {
  const Key key{page, job};
  const std::size_t target = find(key);
  if (target == 0) return false;
  // Every node on the way down holds the target in its subtree.
  for (std::size_t node = root_; node != target;
       node = key < nodes_[node].key ? nodes_[node].left : nodes_[node].right) {
    nodes_[node].subtree_tokens += delta;
  }
  nodes_[target].tokens += delta;
  nodes_[target].subtree_tokens += delta;
  return true;
}

std::int64_t LaneOrder::tokens_after(PageId page) const {
  std::int64_t total = 0;
  std::size_t node = root_;
  while (node != 0) {
    const Node& n = nodes_[node];
    if (n.key.page > page) {
      total += n.tokens + nodes_[n.right].subtree_tokens;
      node = n.left;
    } else {
      node = n.right;
    }
  }
  return total;
}

}  // namespace fairlane
