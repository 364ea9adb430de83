// What changed between two traces, for `memtide diff` and the viewer's Compare view: the same
// matching, summing and ordering for both.
//
//   - By stack (`memtide diff`): stacks are matched by their frames' function, file and line,
//     not by address (addresses differ between builds and runs); the stacks of one trace that
//     match the same frames are summed.
//   - By allocation site (the viewer's table): the first level of two bottom-up call trees,
//     matched by frame label.
//
// Either way the largest change comes first, whether it grew or shrank (larger_change).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "analysis/calltree.h"
#include "analysis/model.h"
#include "analysis/symbols.h"

namespace memtide::analysis {

// Adds `m` to `to`: every count, size and variance (of a sampled trace's estimates); the
// leaked blocks' first and last allocation times become the earliest and the latest of both.
void add_metrics(StackMetrics& to, const StackMetrics& m);

// Whether a change of `a` comes before a change of `b`: the larger one either way first.
inline bool larger_change(int64_t a, int64_t b) { return std::llabs(a) > std::llabs(b); }

// ---------------------------------------------------------------------------------------
// By stack
// ---------------------------------------------------------------------------------------

struct StackSide {
  StackMetrics m;   // summed over the trace's stacks with these frames
  StackId stack;    // one of them (for printing)
  bool present = false;
};

struct StackChange {
  StackSide s[2];  // 0: trace A (before), 1: trace B (after)
  int64_t delta(Metric m) const {
    return static_cast<int64_t>(s[1].m.value(m)) - static_cast<int64_t>(s[0].m.value(m));
  }
};

class StackDiff {
 public:
  // The stacks of domain `d` of `a` (before) and `b` (after), each read with its symbolizer.
  StackDiff(const Model& a, Symbolizer& sa, const Model& b, Symbolizer& sb, Domain d = Domain::Heap);

  // The `n` stacks whose `m` changed most, largest change first (ties: in key order).
  std::vector<const StackChange*> largest(Metric m, std::size_t n) const;

  const std::map<std::string, StackChange>& by_frames() const { return changes_; }

 private:
  std::map<std::string, StackChange> changes_;  // by frames (see stack_key in diff.cpp)
};

// ---------------------------------------------------------------------------------------
// By allocation site
// ---------------------------------------------------------------------------------------

struct SiteChange {
  std::string label, module;
  uint64_t before = 0, after = 0;
  int64_t delta() const { return static_cast<int64_t>(after) - static_cast<int64_t>(before); }
};

// One row per allocation site (the first level of the bottom-up trees), in both traces or either.
std::vector<SiteChange> diff_sites(const CallTree& before_bottom_up, const CallTree& after_bottom_up);

}  // namespace memtide::analysis
