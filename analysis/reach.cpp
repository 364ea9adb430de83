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
      if (done_) break;
      const auto size = static_cast<std::size_t>(x.data_end - x.data);
      records_.push_back({raw_.size(), size, x.count});
      raw_.insert(raw_.end(), x.data, x.data_end);
      nrefs_ += x.count;
      break;
    }
    case fmt::ScanOp::Suppressions:
      suppressions_.assign(reinterpret_cast<const char*>(x.data), static_cast<std::size_t>(x.data_end - x.data));
      break;
    case fmt::ScanOp::Done:
      done_ = true;
      words_ = x.words;
      duration_ns_ = x.duration_ns;
      break;
  }
}

template <class F>
void ScanData::for_each_ref(F&& f) const {
  for (const RecordSpan& r : records_) {
    fmt::Scan x;
    x.op = fmt::ScanOp::Refs;
    x.count = r.count;
    x.data = raw_.data() + r.offset;
    x.data_end = x.data + r.size;
    fmt::ScanRefIterator it(x);
    for (uint64_t loc, value; it.next(loc, value);) f(loc, value);
  }
}

std::vector<Reach> ScanData::classify(const std::vector<Block>& blocks,
                                      const std::vector<std::pair<uint64_t, uint64_t>>& mappings) const {
  const std::size_t n = blocks.size();
  std::vector<Reach> out(n, Reach::Definite);
  if (n == 0 || !done_) return out;
  auto end_of = [&](std::size_t i) { return blocks[i].addr + std::max<uint64_t>(blocks[i].size, 1); };
  // The block holding address a, or n.
  auto block_of = [&](uint64_t a) -> std::size_t {
    if (a < blocks.front().addr) return n;
    auto it = std::upper_bound(blocks.begin(), blocks.end(), a, [](uint64_t v, const Block& b) { return v < b.addr; });
    const auto i = static_cast<std::size_t>(it - blocks.begin()) - 1;
    return a < end_of(i) ? i : n;
  };
  // The block a pointer keeps alive, or n. Not a 16-byte aligned address in a block's last 8
  // bytes: with glibc's allocator the header of the next chunk can lie there (a block of 500
  // bytes at p is followed by a chunk at p + 496), and glibc's own lists (its top chunk, its
  // bins, in libc's data) point at free chunks' headers.
  // A pointer just past an 8-byte block keeps it too: `new T[0]` of a class with a destructor
  // returns its block's address past the 8-byte element count (as LeakSanitizer counts it).
  auto target_of = [&](uint64_t v) -> std::size_t {
    const std::size_t t = block_of(v);
    if (t < n && v != blocks[t].addr && (v & 15) == 0 && end_of(t) - v <= 8) return n;
    if (t == n && v >= 8) {
      const std::size_t c = block_of(v - 8);
      if (c < n && blocks[c].size == 8 && blocks[c].addr + 8 == v) return c;
    }
    return t;
  };
  // Root ranges: Root regions, and Mapping regions and the program's mappings without a live
  // block.
  auto holds_block = [&](uint64_t start, uint64_t end) {
    auto it = std::lower_bound(blocks.begin(), blocks.end(), start, [](const Block& b, uint64_t v) { return b.addr < v; });
    return it != blocks.end() && it->addr < end;
  };
  std::vector<std::pair<uint64_t, uint64_t>> roots;
  for (const Region& r : regions_)
    if (r.kind == fmt::ScanKind::Root || (r.kind == fmt::ScanKind::Mapping && !holds_block(r.start, r.end)))
      roots.emplace_back(r.start, r.end);
  for (const auto& [start, end] : mappings)
    if (end > start && !holds_block(start, end)) roots.emplace_back(start, end);
  std::sort(roots.begin(), roots.end());
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  for (const auto& r : roots) {
    if (!merged.empty() && r.first <= merged.back().second) merged.back().second = std::max(merged.back().second, r.second);
    else merged.push_back(r);
  }

  // One walk over the words (in address order) beside the blocks and the roots: a word inside
  // a block that points to a block is an edge (the edges of each block are one range of
  // `edges`, [first[i], last[i])); a root's target goes on the stack. The recorder writes the
  // words in address order; a walk that meets them in another order stops (false), and they
  // are sorted and walked again.
  std::vector<std::size_t> first(n, 0), last(n, 0);
  std::vector<uint32_t> edges;
  std::vector<std::size_t> stack;
  std::vector<uint8_t> seen(n, 0);
  auto mark = [&](std::size_t t) {
    if (!seen[t]) {
      seen[t] = 1;
      stack.push_back(t);
    }
  };
  auto walk = [&](auto&& each_ref) {
    std::size_t bi = 0, ri = 0;
    uint64_t prev = 0;
    bool ordered = true;
    each_ref([&](uint64_t loc, uint64_t value) {
      if (!ordered || loc < prev) {
        ordered = false;
        return;
      }
      prev = loc;
      const std::size_t t = target_of(value);
      if (t == n) return;
      while (bi < n && end_of(bi) <= loc) ++bi;
      if (bi < n && blocks[bi].addr <= loc) {
        if (last[bi] == 0) first[bi] = edges.size();
        edges.push_back(static_cast<uint32_t>(t));
        last[bi] = edges.size();
        return;
      }
      while (ri < merged.size() && merged[ri].second <= loc) ++ri;
      if (ri < merged.size() && merged[ri].first <= loc) mark(t);
    });
    return ordered;
  };
  if (!walk([&](auto&& f) { for_each_ref(f); })) {
    std::vector<std::pair<uint64_t, uint64_t>> pairs;
    pairs.reserve(nrefs_);
    for_each_ref([&](uint64_t loc, uint64_t value) { pairs.emplace_back(loc, value); });
    std::sort(pairs.begin(), pairs.end());
    std::fill(first.begin(), first.end(), 0);
    std::fill(last.begin(), last.end(), 0);
    std::fill(seen.begin(), seen.end(), 0);
    edges.clear();
    stack.clear();
    walk([&](auto&& f) {
      for (const auto& [loc, value] : pairs) f(loc, value);
    });
  }
  while (!stack.empty()) {
    const std::size_t i = stack.back();
    stack.pop_back();
    for (std::size_t k = first[i]; k < last[i]; ++k) mark(edges[k]);
  }
  for (std::size_t i = 0; i < n; ++i)
    if (seen[i]) out[i] = Reach::Reachable;
  // Indirect: pointed to by another unreachable block.
  for (std::size_t i = 0; i < n; ++i) {
    if (seen[i]) continue;
    for (std::size_t k = first[i]; k < last[i]; ++k)
      if (edges[k] != i && !seen[edges[k]]) out[edges[k]] = Reach::Indirect;
  }
  return out;
}

}  // namespace memtide::analysis
