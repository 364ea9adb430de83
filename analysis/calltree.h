// Call trees of one metric: top-down (callers first, as a flamegraph draws them) or bottom-up
// (allocation sites first), built from the per-stack statistics with frames merged by label
// (function name, else module+offset), and the folded-stack text of flamegraph.pl / inferno /
// speedscope ("main;f;g 1234" per line).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "analysis/model.h"
#include "analysis/symbols.h"

namespace memtide::analysis {

struct TreeNode {
  uint32_t parent = 0;          // index of the parent; the root is node 0 (its own parent)
  std::string_view label;       // owned by the tree
  std::string_view file;        // of the first frame merged into this node (may be empty)
  uint32_t line = 0;
  std::string_view module;
  uint64_t total = 0;           // this node and everything below it
  uint64_t self = 0;            // stacks ending here
  uint64_t blocks = 0;          // blocks behind `total`
  std::vector<uint32_t> children;
};

class CallTree {
 public:
  // Adds every stack of `domain` with a non-zero value of `metric`.
  void build(const Model& model, Symbolizer& symbols, Domain domain, Metric metric, bool bottom_up = false);

  const std::vector<TreeNode>& nodes() const { return nodes_; }
  const TreeNode& root() const { return nodes_[0]; }
  uint64_t total() const { return nodes_.empty() ? 0 : nodes_[0].total; }

  // Folded stacks, one line per distinct path with a non-zero self value, root side first.
  // Labels have ';' and control characters replaced so that the format stays parseable.
  void write_folded(std::ostream& out) const;

 private:
  // A frame's label, file and module, interned (equal strings are one string).
  struct Labelled {
    std::string_view label, file, module;
    uint32_t line = 0;
  };
  Labelled labelled_frame(const Frame& f);
  // The child of `parent` labelled `f.label`, made from `f` if there is none yet.
  uint32_t child(uint32_t parent, const Labelled& f);
  std::string_view intern(std::string_view s);
  std::vector<TreeNode> nodes_{TreeNode{}};
  std::unordered_set<std::string> strings_;  // node-based: views into it stay valid
  struct EdgeHash {
    std::size_t operator()(const std::pair<uint32_t, const char*>& k) const {
      const uint64_t x = reinterpret_cast<uintptr_t>(k.second) ^ (static_cast<uint64_t>(k.first) * 0x9E3779B97F4A7C15ull);
      return static_cast<std::size_t>(x ^ (x >> 29));
    }
  };
  std::unordered_map<std::pair<uint32_t, const char*>, uint32_t, EdgeHash> edges_;  // (parent, label) -> node, while building
};

// A label safe for the folded format.
std::string folded_label(std::string_view label);

}  // namespace memtide::analysis
