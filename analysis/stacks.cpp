#include "analysis/stacks.h"

#include <algorithm>

namespace memtide::analysis {

void StackTable::define(uint64_t first, uint64_t parent, const uint64_t* ips, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    const uint64_t id = first + i;
    if (id == 0 || id < first) continue;  // the root is implicit; overflow
    Node n{i == 0 ? parent : id - 1, ips[i], true};
    Node* slot;
    if (id < kDenseLimit) {
      if (id >= dense_.size()) dense_.resize(std::max<std::size_t>(id + 1, dense_.size() * 3 / 2));
      slot = &dense_[id];
    } else {
      slot = &sparse_[id];
    }
    if (!slot->defined) ++count_;
    *slot = n;
  }
}

const StackTable::Node* StackTable::node(StackId id) const {
  if (id.value < kDenseLimit) {
    if (id.value < dense_.size() && dense_[id.value].defined) return &dense_[id.value];
    return nullptr;
  }
  auto it = sparse_.find(id.value);
  return it == sparse_.end() ? nullptr : &it->second;
}

bool StackTable::defined(StackId id) const { return id.value == 0 || node(id) != nullptr; }

StackId StackTable::parent(StackId id) const {
  const Node* n = node(id);
  return StackId(n ? n->parent : 0);
}

bool StackTable::frames(StackId id, std::vector<uint64_t>& out) const {
  out.clear();
  bool whole = true;
  uint64_t cur = id.value;
  while (cur != 0) {
    const Node* n = node(StackId(cur));
    if (!n || out.size() >= kMaxDepth) {
      whole = false;
      break;
    }
    out.push_back(n->ip);
    cur = n->parent;
  }
  std::reverse(out.begin(), out.end());
  return whole;
}

}  // namespace memtide::analysis
