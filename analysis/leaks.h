// Leaks as every reader lists them: the stacks of a domain ordered by a metric (largest leak
// first, ties by stack id), and the heap's leaks once the reachable blocks and the suppressed
// stacks are set aside: what `memtide check` counts, and what `memtide report --suppressions`
// and the viewer's Leaks view leave out of their lists (suppress_leak: one match for all three).
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/model.h"
#include "analysis/suppressions.h"
#include "analysis/symbols.h"

namespace memtide::analysis {

// Whether `a` comes before `b` when listed by `metric`: the larger value first, then the
// smaller stack id (so that the order does not depend on the replay's).
inline bool before_by(Metric metric, const StackStats& a, const StackStats& b) {
  const uint64_t x = a.m.value(metric), y = b.m.value(metric);
  return x != y ? x > y : a.stack < b.stack;
}
// The largest leak first.
inline bool larger_leak(const StackStats& a, const StackStats& b) { return before_by(Metric::Leaked, a, b); }

// The `n` stacks of domain `d` with the largest `metric`, in that order (non-zero only).
std::vector<const StackStats*> top_stacks(const Model& m, Domain d, Metric metric, std::size_t n);

// The heap leaks a gate counts.
struct CountedLeaks {
  // Per leaking stack, what counts (without the reachable blocks when `unreachable_only`),
  // largest first.
  std::vector<StackStats> counted;
  std::vector<const StackStats*> leaks;  // of those, the ones no suppression matches (into `counted`)
  // The others, each with the index of the suppression that matched it (into `counted`).
  std::vector<std::pair<const StackStats*, std::size_t>> suppressed;
  uint64_t reachable_bytes = 0, reachable_blocks = 0;  // set aside (unreachable_only)
  uint64_t leaked_bytes = 0, leaked_blocks = 0;        // of `leaks`
  uint64_t suppressed_bytes = 0, suppressed_blocks = 0;
};

// The suppression of `supp` that matches a leaking stack whose frames are `frames` (outermost
// first, allocation site last, as Symbolizer::stack gives them), with the leak's blocks and
// bytes counted on it (Suppression::stacks / blocks / bytes); its index, or -1 for none.
int suppress_leak(SuppressionList& supp, const std::vector<Frame>& frames, uint64_t blocks, uint64_t bytes);

// Counts the heap's leaks of `m`: with `unreachable_only` (a complete leak scan), the blocks
// still reachable at exit are not leaks; the stacks that match a suppression of `supp` are set
// aside, and each suppression's Suppression::stacks / blocks / bytes say what it hid.
CountedLeaks count_leaks(const Model& m, Symbolizer& sym, SuppressionList& supp, bool unreachable_only);

}  // namespace memtide::analysis
