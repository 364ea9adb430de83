#include "analysis/leaks.h"

#include <algorithm>

namespace memtide::analysis {

std::vector<const StackStats*> top_stacks(const Model& m, Domain d, Metric metric, std::size_t n) {
  std::vector<const StackStats*> v;
  for (const StackStats& s : m.stacks[static_cast<unsigned>(d)])
    if (s.m.value(metric) || (metric == Metric::Leaked && s.m.leaked_blocks)) v.push_back(&s);  // (malloc(0) leaks 0 B)
  auto cmp = [metric](const StackStats* a, const StackStats* b) { return before_by(metric, *a, *b); };
  if (v.size() > n) {
    std::partial_sort(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n), v.end(), cmp);
    v.resize(n);
  } else {
    std::sort(v.begin(), v.end(), cmp);
  }
  return v;
}

int suppress_leak(SuppressionList& supp, const std::vector<Frame>& frames, uint64_t blocks, uint64_t bytes) {
  const int i = supp.match(frames);
  if (i >= 0) {
    Suppression& x = supp.items()[static_cast<std::size_t>(i)];
    ++x.stacks;
    x.blocks += blocks;
    x.bytes += bytes;
  }
  return i;
}

CountedLeaks count_leaks(const Model& m, Symbolizer& sym, SuppressionList& supp, bool unreachable_only) {
  CountedLeaks e;
  for (const StackStats* s : top_stacks(m, Domain::Heap, Metric::Leaked, SIZE_MAX)) {
    StackStats c = *s;
    if (unreachable_only) {
      c.m.leaked_bytes -= s->m.reachable_bytes;
      c.m.leaked_blocks -= s->m.reachable_blocks;
      e.reachable_bytes += s->m.reachable_bytes;
      e.reachable_blocks += s->m.reachable_blocks;
      if (c.m.leaked_blocks == 0) continue;
    }
    e.counted.push_back(c);
  }
  std::stable_sort(e.counted.begin(), e.counted.end(), larger_leak);
  std::vector<Frame> frames;
  for (const StackStats& s : e.counted) {
    sym.stack(s.stack, frames);
    if (const int i = suppress_leak(supp, frames, s.m.leaked_blocks, s.m.leaked_bytes); i >= 0) {
      e.suppressed.emplace_back(&s, static_cast<std::size_t>(i));
      e.suppressed_blocks += s.m.leaked_blocks;
      e.suppressed_bytes += s.m.leaked_bytes;
      continue;
    }
    e.leaks.push_back(&s);
    e.leaked_blocks += s.m.leaked_blocks;
    e.leaked_bytes += s.m.leaked_bytes;
  }
  return e;
}

}  // namespace memtide::analysis
