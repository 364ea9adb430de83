// Trees view model: the call tree with self and total of every metric per node (the shapes of
// the per-metric CallTrees merged into one), sorting of the children by any column, and the
// callers / callees of one function.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/calltree.h"
#include "viewer/serial.h"

namespace memtide::viewer {

inline constexpr unsigned kMetricCount = static_cast<unsigned>(analysis::Metric::Count_);
const char* metric_name(analysis::Metric m);         // "allocated", "allocations", ...
const char* metric_description(analysis::Metric m);  // one line for tooltips
bool metric_is_bytes(analysis::Metric m);

// Children of every node in some order: a run per node, as in FlameTree.
struct TreeOrder {
  std::vector<uint32_t> first;     // per node: start of its run in `children`
  std::vector<uint32_t> children;
};

struct TableNode {
  uint32_t parent = 0;
  std::string_view label, file, module;
  uint32_t line = 0;
  std::array<uint64_t, kMetricCount> total{}, self{};
  std::vector<uint32_t> children;
};

struct TreeTable {
  std::vector<TableNode> nodes;  // node 0: the root
  TreeOrder by_allocated;        // the default order (allocated bytes, largest first), built with the table
  std::shared_ptr<const void> owner;
  uint64_t serial = next_serial();
};

// Merges the trees of one direction, one per metric (index = Metric; null entries are left
// at zero). Every stack that has any value has an allocation, so the Count tree holds every
// path; the other trees' nodes are mapped onto it by label.
TreeTable make_tree_table(const std::array<std::shared_ptr<const analysis::CallTree>, kMetricCount>& trees);

// Sort key: total or self of a metric, or the label.
struct TreeSort {
  analysis::Metric metric = analysis::Metric::Allocated;
  bool self = false;
  bool by_label = false;
  bool ascending = false;
  bool operator==(const TreeSort&) const = default;
};

// Children of every node in the requested order.
TreeOrder sort_tree(const TreeTable& t, TreeSort s);

// Callers and callees of every node labelled `function` in a top-down table: callers are the
// parents' labels (with the total of the function below them), callees the children's labels
// (with their totals). Recursion is counted once, at its outermost call.
struct Relative {
  std::string label;
  std::array<uint64_t, kMetricCount> value{};
};
struct FunctionRelatives {
  std::string function;
  std::array<uint64_t, kMetricCount> total{}, self{};
  std::vector<Relative> callers, callees;  // by the value of `by`, largest first
};
FunctionRelatives function_relatives(const TreeTable& top_down, std::string_view function, analysis::Metric by);

}  // namespace memtide::viewer
