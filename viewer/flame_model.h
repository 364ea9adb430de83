// Flamegraph view model: a call tree flattened for drawing (children sorted by value), its
// layout for a given width and zoom (frames narrower than a few pixels merged into one block
// per parent), search, and a stable colour per module.
//
// Both directions are drawn as icicles (root on top): top-down shows callers first, bottom-up
// shows the allocation sites first with their callers below.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/calltree.h"
#include "viewer/serial.h"

namespace memtide::viewer {

struct FlameNode {
  uint32_t parent = 0;
  uint32_t first_child = 0, child_count = 0;  // into FlameTree::children
  uint32_t depth = 0;
  uint64_t value = 0;   // total of this frame and everything below
  uint64_t self = 0;
  uint64_t blocks = 0;
  uint64_t other = 0;   // compare: the value in the other (older) trace
  bool has_other = false;
  std::string_view label, file, module;
  uint32_t line = 0;
};

struct FlameTree {
  std::vector<FlameNode> nodes;    // node 0 is the root ("all")
  std::vector<uint32_t> children;  // per node, a run sorted by value, largest first
  uint32_t max_depth = 0;
  bool is_diff = false;
  bool shape_of_before = false;  // diff: `value` is the older trace's, `other` the newer's
  std::shared_ptr<const void> owner;  // keeps the strings the views point into alive
  uint64_t serial = next_serial();

  uint64_t total() const { return nodes.empty() ? 0 : nodes[0].value; }
  const FlameNode& node(uint32_t i) const { return nodes[i]; }
  uint64_t before(const FlameNode& n) const { return shape_of_before ? n.value : n.other; }
  uint64_t after(const FlameNode& n) const { return shape_of_before ? n.other : n.value; }
};

// Flattens a call tree (shared: the labels point into it).
FlameTree make_flame_tree(std::shared_ptr<const analysis::CallTree> tree);

// Builds a tree from explicit nodes (the parent before its children; node 0 the root) and
// sorts the children. Used by make_flame_tree, the comparison, and tests.
void finish_flame_tree(FlameTree& t);

inline constexpr uint32_t kMergedNode = UINT32_MAX;

struct FlameRect {
  float x0 = 0, x1 = 0;  // pixels from the left edge of the graph
  uint32_t depth = 0;    // rows below the zoomed frame (0: the zoomed frame itself)
  uint32_t node = 0;     // FlameTree node, or kMergedNode
  uint32_t parent = 0;   // for merged blocks: whose children they are
  uint32_t merged = 0;   // number of frames in a merged block
  uint64_t value = 0;    // of the frame, or the sum of the merged ones
};

struct FlameLayout {
  std::vector<FlameRect> rects;  // parents before children
  uint32_t rows = 0;
  uint64_t scale_total = 0;  // value of the zoomed frame (the full width)
};

// Lays out the subtree of `zoom` over `width` pixels: each frame's width is proportional to
// its value; siblings narrower than `min_px` (they are the smallest, the children being
// sorted) are merged into one block whose children are not drawn. At most `max_rows` rows.
FlameLayout layout_flame(const FlameTree& t, uint32_t zoom, float width, float min_px, uint32_t max_rows = 4096);

// The path from the root to `node` (root first), for the breadcrumb.
std::vector<uint32_t> flame_path(const FlameTree& t, uint32_t node);

// Search: nodes whose label, file or module contains `query` (case-insensitive), and the
// share of the total they cover (a match below another match is counted once).
struct FlameSearch {
  std::string query;
  std::vector<uint8_t> matched;  // per node
  uint64_t matched_value = 0;
  uint32_t matches = 0;
};
FlameSearch search_flame(const FlameTree& t, std::string_view query);

// Stable colour of a module (same module, same hue, whatever the trace), 0xAABBGGRR as ImGui
// packs it; `variant` (e.g. a hash of the function) nudges the lightness so neighbours differ.
uint32_t module_colour(std::string_view module, uint32_t variant, bool dark_theme);
// Compare: red when the frame grew, blue when it shrank, grey when equal.
uint32_t diff_colour(uint64_t before, uint64_t after, bool dark_theme);
uint32_t hash_string(std::string_view s);

}  // namespace memtide::viewer
