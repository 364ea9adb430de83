#include "analysis/diff.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

namespace memtide::analysis {

void add_metrics(StackMetrics& to, const StackMetrics& m) {
  // Every field is named below: one added to StackMetrics must be added here too.
  static_assert(sizeof(StackMetrics) == 20 * sizeof(uint64_t) + 2 * sizeof(double),
                "a StackMetrics field is not summed by add_metrics()");
  if (m.leaked_blocks) {
    if (to.leaked_blocks == 0 || m.first_leak_time < to.first_leak_time) to.first_leak_time = m.first_leak_time;
    to.last_leak_time = std::max(to.last_leak_time, m.last_leak_time);
  }
  to.alloc_count += m.alloc_count;
  to.alloc_bytes += m.alloc_bytes;
  to.temp_count += m.temp_count;
  to.temp_bytes += m.temp_bytes;
  to.leaked_blocks += m.leaked_blocks;
  to.leaked_bytes += m.leaked_bytes;
  to.peak_blocks += m.peak_blocks;
  to.peak_bytes += m.peak_bytes;
  to.at_blocks += m.at_blocks;
  to.at_bytes += m.at_bytes;
  to.reachable_blocks += m.reachable_blocks;
  to.reachable_bytes += m.reachable_bytes;
  to.indirect_blocks += m.indirect_blocks;
  to.indirect_bytes += m.indirect_bytes;
  to.before_range_blocks += m.before_range_blocks;
  to.before_range_bytes += m.before_range_bytes;
  to.alloc_samples += m.alloc_samples;
  to.leaked_samples += m.leaked_samples;
  to.alloc_var += m.alloc_var;  // the samples are independent: their variances add
  to.leaked_var += m.leaked_var;
}

namespace {

// Key of a stack: its frames by name and place, allocation site first.
std::string stack_key(Symbolizer& sym, StackId id, std::vector<Frame>& frames) {
  sym.stack(id, frames);
  std::string k;
  for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
    k += frame_label(*f);
    k += '\x1f';
    k += f->file;
    k += ':';
    k += std::to_string(f->line);
    k += '\x1e';
  }
  return k;
}

}  // namespace

StackDiff::StackDiff(const Model& a, Symbolizer& sa, const Model& b, Symbolizer& sb, Domain d) {
  const Model* models[2] = {&a, &b};
  Symbolizer* syms[2] = {&sa, &sb};
  std::vector<Frame> frames;
  for (int i = 0; i < 2; ++i)
    for (const StackStats& s : models[i]->stacks[static_cast<unsigned>(d)]) {
      StackSide& side = changes_[stack_key(*syms[i], s.stack, frames)].s[i];
      add_metrics(side.m, s.m);
      if (!side.present) side.stack = s.stack;
      side.present = true;
    }
}

std::vector<const StackChange*> StackDiff::largest(Metric m, std::size_t n) const {
  std::vector<const StackChange*> v;
  for (const auto& [k, c] : changes_)
    if (c.delta(m) != 0) v.push_back(&c);
  std::stable_sort(v.begin(), v.end(),
                   [m](const StackChange* x, const StackChange* y) { return larger_change(x->delta(m), y->delta(m)); });
  if (v.size() > n) v.resize(n);
  return v;
}

std::vector<SiteChange> diff_sites(const CallTree& before, const CallTree& after) {
  std::vector<SiteChange> rows;
  std::unordered_map<std::string_view, std::size_t> index;
  auto add_tree = [&](const CallTree& t, bool is_after) {
    for (uint32_t c : t.root().children) {
      const TreeNode& n = t.nodes()[c];
      auto [it, fresh] = index.try_emplace(n.label, rows.size());
      if (fresh) rows.push_back({std::string(n.label), std::string(basename_of(n.module)), 0, 0});
      (is_after ? rows[it->second].after : rows[it->second].before) += n.total;
    }
  };
  add_tree(before, false);
  add_tree(after, true);
  return rows;
}

}  // namespace memtide::analysis
