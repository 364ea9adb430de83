#include "viewer/growth_model.h"

#include <algorithm>
#include <unordered_map>

#include "analysis/alloc_site.h"

namespace memtide::viewer {

GrowthData make_growth(const analysis::Model& m, analysis::Symbolizer& sym, std::size_t max_stacks,
                       const analysis::GrowthOptions& o) {
  GrowthData d;
  d.sampled = m.sampling.sampled();
  d.growth = analysis::analyze_growth(m, o);
  d.problem = d.growth.problem;
  auto rel = [&](uint64_t t) { return t > m.time_base ? t - m.time_base : 0; };
  d.start = rel(m.kept_from);
  d.warmup = o.warmup ? *o.warmup : (m.duration() - std::min(m.duration(), d.start)) / 10;
  d.window_from = rel(d.growth.from);
  d.window_to = rel(d.growth.to);
  const analysis::StackHistory& h = m.stack_history;
  if (h.empty()) return d;
  for (uint32_t i = 0; i < h.intervals; ++i) d.times.push_back(h.end_of(i) > m.time_base ? h.end_of(i) - m.time_base : 0);

  // Which stacks get a layer: the growing ones, then the largest on average.
  std::unordered_map<uint64_t, const analysis::StackHistory::Track*> tracks;
  std::vector<std::pair<double, const analysis::StackHistory::Track*>> by_mean;
  std::vector<uint64_t> bytes, total(h.intervals, 0);
  for (const analysis::StackHistory::Track& t : h.tracks) {
    tracks[t.stack.value] = &t;
    h.dense(t, bytes);
    double sum = 0;
    for (uint32_t i = 0; i < h.intervals; ++i) sum += static_cast<double>(bytes[i]), total[i] += bytes[i];
    by_mean.emplace_back(sum, &t);
  }
  std::sort(by_mean.begin(), by_mean.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second->stack < b.second->stack;
  });
  std::vector<std::pair<const analysis::StackHistory::Track*, const analysis::StackGrowth*>> chosen;
  auto taken = [&](uint64_t stack) {
    for (const auto& [t, g] : chosen)
      if (t->stack.value == stack) return true;
    return false;
  };
  for (const analysis::StackGrowth& g : d.growth.growing)
    if (chosen.size() < max_stacks) chosen.emplace_back(tracks.at(g.stack.value), &g);
  for (const auto& [sum, t] : by_mean)
    if (chosen.size() < max_stacks && sum > 0 && !taken(t->stack.value)) chosen.emplace_back(t, nullptr);

  std::vector<uint64_t> rest = total;
  std::vector<analysis::Frame> frames;
  std::vector<uint64_t> window_times;
  uint32_t first = 0;
  while (first < h.intervals && h.end_of(first) < d.growth.from) ++first;
  for (const auto& [t, g] : chosen) {
    GrowthLayer l;
    l.stack = t->stack.value;
    std::vector<uint64_t> blocks;
    h.dense(*t, l.bytes, &blocks);
    for (uint32_t i = 0; i < h.intervals; ++i) rest[i] -= l.bytes[i];
    l.growing = g != nullptr;
    if (g) {
      l.g = *g;
    } else if (d.growth.ok()) {  // its figures all the same, for the table
      window_times.clear();
      const uint32_t last = first + d.growth.intervals;  // (an exited process's teardown left out)
      for (uint32_t i = first; i < last; ++i) window_times.push_back(h.end_of(i));
      l.g = analysis::stack_growth(window_times, std::vector<uint64_t>(l.bytes.begin() + first, l.bytes.begin() + last),
                                   std::vector<uint64_t>(blocks.begin() + first, blocks.begin() + last));
      l.g.stack = t->stack;
    }
    sym.stack(t->stack, frames);
    for (auto it = frames.rbegin(); it != frames.rend() && l.frames.size() < 64; ++it)
      l.frames.push_back(analysis::format_frame(*it));
    if (!frames.empty()) {
      std::reverse(frames.begin(), frames.end());  // (allocation first)
      const analysis::Frame& site = frames[analysis::allocation_site(frames)];
      l.site = site.function.empty() ? analysis::frame_label(site) : std::string(site.function);
      l.module = std::string(analysis::basename_of(site.module));
    } else {
      l.site = "stack #" + std::to_string(l.stack);
    }
    d.layers.push_back(std::move(l));
  }
  GrowthLayer other;
  other.site = "other stacks";
  other.bytes = std::move(rest);
  d.layers.push_back(std::move(other));
  std::vector<uint64_t> sum(h.intervals, 0);
  for (GrowthLayer& l : d.layers) {
    for (uint32_t i = 0; i < h.intervals; ++i) sum[i] += l.bytes[i];
    l.top = sum;
  }
  for (uint32_t i = 0; i < h.intervals; ++i) d.max_total = std::max(d.max_total, total[i]);
  return d;
}

}  // namespace memtide::viewer
