// StackTable: the recorder's stack trie as read from StackDef records. A stack id names a node;
// the stack is the path from the root (id 0, the empty stack) to it, outermost caller first,
// and the node itself holds the return address in the caller of the allocation function.
//
// Nodes may be defined after an allocation that uses them was read (another thread's block
// can arrive later), so nothing is resolved while replaying: ask for frames at the end.
// Ids below kDenseLimit live in chunks of kChunk nodes, allocated zeroed as ids reach them and
// never moved (a growing vector copied and faulted in its nodes again at every growth: 39% of
// `memtide symbolize` on a compiler's trace); others (only a hostile or odd file has them) in a
// map.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <unordered_map>
#include <vector>

#include "analysis/ids.h"

namespace memtide::analysis {

class StackTable {
 public:
  static constexpr uint64_t kDenseLimit = uint64_t{1} << 26;
  static constexpr std::size_t kMaxDepth = 1u << 16;  // a cycle in a hostile file stops here

  struct Node {
    uint64_t parent = 0;
    uint64_t ip = 0;
    bool defined = false;
  };

  StackTable() = default;
  StackTable(const StackTable& o) { *this = o; }
  StackTable& operator=(const StackTable& o);
  StackTable(StackTable&&) noexcept = default;
  StackTable& operator=(StackTable&&) noexcept = default;

  // Defines `count` nodes starting at `first` (StackDef semantics).
  void define(uint64_t first, uint64_t parent, const uint64_t* ips, uint32_t count);

  bool defined(StackId id) const;
  const Node* node(StackId id) const;
  StackId parent(StackId id) const;

  // Return addresses of the stack, outermost caller first (the root's side), allocation site
  // last. False when a node on the way is undefined (the frames found so far are kept).
  bool frames(StackId id, std::vector<uint64_t>& out) const;

  // Calls f(StackId, const Node&) for every defined node.
  template <class F>
  void for_each(F&& f) const {
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      const Node* nodes = chunks_[c].get();
      if (!nodes) continue;
      for (std::size_t i = 0; i < kChunk; ++i)
        if (nodes[i].defined) f(StackId((c << kChunkBits) + i), nodes[i]);
    }
    for (const auto& [id, n] : sparse_) f(StackId(id), n);
  }

  std::size_t size() const { return count_; }
  std::size_t memory_bytes() const {
    return chunk_count_ * kChunk * sizeof(Node) + chunks_.capacity() * sizeof(void*) +
           sparse_.size() * (sizeof(Node) + 32);
  }

 private:
  static constexpr unsigned kChunkBits = 15;
  static constexpr std::size_t kChunk = std::size_t{1} << kChunkBits;
  struct Free {
    void operator()(Node* p) const { std::free(p); }
  };
  // The slot of dense id `id` (< kDenseLimit), its chunk allocated if `make`; nullptr when the
  // chunk is not there (or cannot be had).
  Node* dense_slot(uint64_t id, bool make);

  std::vector<std::unique_ptr<Node[], Free>> chunks_;  // by id >> kChunkBits
  std::size_t chunk_count_ = 0;
  std::unordered_map<uint64_t, Node> sparse_;
  std::size_t count_ = 0;
};

}  // namespace memtide::analysis
