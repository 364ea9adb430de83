#include "analysis/stacks.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace memtide::analysis {

StackTable::Node* StackTable::dense_slot(uint64_t id, bool make) {
  const std::size_t c = static_cast<std::size_t>(id >> kChunkBits);
  if (c >= chunks_.size()) {
    if (!make) return nullptr;
    chunks_.resize(c + 1);
  }
  if (!chunks_[c]) {
    if (!make) return nullptr;
    // Zero bytes are empty nodes (Node is an aggregate of integers and a bool); calloc's large
    // blocks come from fresh pages, touched only where nodes are defined.
    chunks_[c].reset(static_cast<Node*>(std::calloc(kChunk, sizeof(Node))));
    if (!chunks_[c]) throw std::bad_alloc();
    ++chunk_count_;
  }
  return &chunks_[c][id & (kChunk - 1)];
}

StackTable& StackTable::operator=(const StackTable& o) {
  if (this == &o) return *this;
  chunks_.clear();
  chunks_.resize(o.chunks_.size());
  for (std::size_t c = 0; c < o.chunks_.size(); ++c) {
    if (!o.chunks_[c]) continue;
    chunks_[c].reset(static_cast<Node*>(std::malloc(kChunk * sizeof(Node))));
    if (!chunks_[c]) throw std::bad_alloc();
    std::memcpy(chunks_[c].get(), o.chunks_[c].get(), kChunk * sizeof(Node));
  }
  chunk_count_ = o.chunk_count_;
  sparse_ = o.sparse_;
  count_ = o.count_;
  return *this;
}

void StackTable::define(uint64_t first, uint64_t parent, const uint64_t* ips, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    const uint64_t id = first + i;
    if (id == 0 || id < first) continue;  // the root is implicit; overflow
    Node n{i == 0 ? parent : id - 1, ips[i], true};
    Node* slot = id < kDenseLimit ? dense_slot(id, true) : &sparse_[id];
    if (!slot->defined) ++count_;
    *slot = n;
  }
}

const StackTable::Node* StackTable::node(StackId id) const {
  if (id.value < kDenseLimit) {
    const std::size_t c = static_cast<std::size_t>(id.value >> kChunkBits);
    if (c >= chunks_.size() || !chunks_[c]) return nullptr;
    const Node* n = &chunks_[c][id.value & (kChunk - 1)];
    return n->defined ? n : nullptr;
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
