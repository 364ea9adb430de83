#include "analysis/reach.h"

#include <algorithm>

#include "formats/decoder.h"

namespace memtide::analysis {

void ScanData::add(const fmt::Scan& x) {
  present_ = true;
  switch (x.op) {
    case fmt::ScanOp::Region:
      if (x.end > x.start) regions_.push_back({x.start, x.end, x.kind});
      break;
    case fmt::ScanOp::Refs: {
      fmt::ScanRefIterator it(x);
      for (uint64_t loc, value; it.next(loc, value);) refs_.emplace_back(loc, value);
      break;
    }
    case fmt::ScanOp::Done:
      done_ = true;
      words_ = x.words;
      duration_ns_ = x.duration_ns;
      break;
  }
}

std::vector<Reach> ScanData::classify(const std::vector<Block>& blocks) const {
  const std::size_t n = blocks.size();
  std::vector<Reach> out(n, Reach::Definite);
  if (n == 0) return out;
  // The block holding address a, or n.
  auto block_of = [&](uint64_t a) -> std::size_t {
    auto it = std::upper_bound(blocks.begin(), blocks.end(), a, [](uint64_t v, const Block& b) { return v < b.addr; });
    if (it == blocks.begin()) return n;
    --it;
    return a - it->addr < std::max<uint64_t>(it->size, 1) ? static_cast<std::size_t>(it - blocks.begin()) : n;
  };
  // Root ranges: Root regions, and Mapping regions without a live block.
  std::vector<std::pair<uint64_t, uint64_t>> roots;
  for (const Region& r : regions_) {
    bool root = r.kind == fmt::ScanKind::Root;
    if (r.kind == fmt::ScanKind::Mapping) {
      auto it = std::lower_bound(blocks.begin(), blocks.end(), r.start, [](const Block& b, uint64_t v) { return b.addr < v; });
      root = it == blocks.end() || it->addr >= r.end;
    }
    if (root) roots.emplace_back(r.start, r.end);
  }
  std::sort(roots.begin(), roots.end());
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  for (const auto& r : roots) {
    if (!merged.empty() && r.first <= merged.back().second) merged.back().second = std::max(merged.back().second, r.second);
    else merged.push_back(r);
  }
  auto in_root = [&](uint64_t a) {
    auto it = std::upper_bound(merged.begin(), merged.end(), a, [](uint64_t v, const auto& r) { return v < r.first; });
    return it != merged.begin() && a < std::prev(it)->second;
  };

  // Edges: the refs held inside each block (by the block's index), and the roots' targets.
  std::vector<std::pair<uint64_t, uint64_t>> refs = refs_;
  std::sort(refs.begin(), refs.end());
  refs.erase(std::unique(refs.begin(), refs.end()), refs.end());
  std::vector<std::size_t> stack;
  std::vector<uint8_t> seen(n, 0);
  auto reach = [&](uint64_t value) {
    const std::size_t t = block_of(value);
    if (t < n && !seen[t]) {
      seen[t] = 1;
      stack.push_back(t);
    }
  };
  for (const auto& [loc, value] : refs)
    if (block_of(loc) == n && in_root(loc)) reach(value);
  // The refs inside block i.
  auto refs_in = [&](std::size_t i, auto&& f) {
    const uint64_t lo = blocks[i].addr, hi = blocks[i].addr + blocks[i].size;
    for (auto it = std::lower_bound(refs.begin(), refs.end(), std::make_pair(lo, uint64_t{0}));
         it != refs.end() && it->first < hi; ++it)
      f(it->second);
  };
  while (!stack.empty()) {
    const std::size_t i = stack.back();
    stack.pop_back();
    refs_in(i, reach);
  }
  for (std::size_t i = 0; i < n; ++i)
    if (seen[i]) out[i] = Reach::Reachable;
  // Indirect: pointed to by another unreachable block.
  for (std::size_t i = 0; i < n; ++i) {
    if (seen[i]) continue;
    refs_in(i, [&](uint64_t value) {
      const std::size_t t = block_of(value);
      if (t < n && t != i && !seen[t]) out[t] = Reach::Indirect;
    });
  }
  return out;
}

}  // namespace memtide::analysis
