#include "viewer/diff_model.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <unordered_map>

namespace memtide::viewer {
namespace {

struct Key {
  uint32_t parent;
  std::string_view label;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  std::size_t operator()(const Key& k) const { return std::hash<std::string_view>{}(k.label) * 31 + k.parent; }
};

struct Pair {
  std::shared_ptr<const analysis::CallTree> a, b;
};

}  // namespace

FlameTree make_diff_flame(std::shared_ptr<const analysis::CallTree> before, std::shared_ptr<const analysis::CallTree> after,
                          bool shape_of_before) {
  FlameTree t;
  t.is_diff = true;
  t.nodes.emplace_back();
  t.nodes[0].label = "all";
  t.nodes[0].has_other = true;
  std::unordered_map<Key, uint32_t, KeyHash> index;
  // Adds every node of `tree`; `primary` values go to `value`, the others to `other`.
  auto merge = [&](const analysis::CallTree& tree, bool primary) {
    const auto& src = tree.nodes();
    std::vector<uint32_t> map(src.size(), 0);
    for (uint32_t i = 0; i < src.size(); ++i) {
      uint32_t id = 0;
      if (i) {
        const uint32_t p = map[src[i].parent];
        auto [it, fresh] = index.try_emplace(Key{p, src[i].label}, static_cast<uint32_t>(t.nodes.size()));
        if (fresh) {
          FlameNode n;
          n.parent = p;
          n.label = src[i].label;
          n.file = src[i].file;
          n.module = src[i].module;
          n.line = src[i].line;
          t.nodes.push_back(n);
        }
        id = it->second;
      }
      map[i] = id;
      FlameNode& n = t.nodes[id];
      n.has_other = true;
      if (primary) {
        n.value = src[i].total;
        n.self = src[i].self;
        n.blocks = src[i].blocks;
      } else {
        n.other = src[i].total;
      }
    }
  };
  const auto& primary = shape_of_before ? before : after;
  const auto& secondary = shape_of_before ? after : before;
  merge(*primary, true);
  merge(*secondary, false);
  t.owner = std::make_shared<Pair>(Pair{before, after});
  finish_flame_tree(t);
  t.shape_of_before = shape_of_before;
  return t;
}

std::vector<uint32_t> filter_and_sort_diff(const std::vector<DiffRow>& rows, std::string_view filter, DiffColumn c,
                                          bool ascending) {
  std::vector<uint32_t> idx;
  auto match = [&](const std::string& s) {
    return std::search(s.begin(), s.end(), filter.begin(), filter.end(), [](char a, char b) {
             return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
           }) != s.end();
  };
  for (uint32_t i = 0; i < rows.size(); ++i)
    if (filter.empty() || match(rows[i].label) || match(rows[i].module)) idx.push_back(i);
  auto key = [&](const DiffRow& r) -> int64_t {
    switch (c) {
      case DiffColumn::Before: return static_cast<int64_t>(r.before);
      case DiffColumn::After: return static_cast<int64_t>(r.after);
      case DiffColumn::Delta: return r.delta();
      default: return 0;
    }
  };
  std::stable_sort(idx.begin(), idx.end(), [&](uint32_t x, uint32_t y) {
    const DiffRow &a = rows[x], &b = rows[y];
    if (c == DiffColumn::Label) return ascending ? a.label < b.label : a.label > b.label;
    if (c == DiffColumn::Delta && !ascending) {  // largest change first, either way
      if (analysis::larger_change(a.delta(), b.delta())) return true;
      if (analysis::larger_change(b.delta(), a.delta())) return false;
      return a.label < b.label;
    }
    const int64_t ka = key(a), kb = key(b);
    if (ka != kb) return ascending ? ka < kb : ka > kb;
    return a.label < b.label;
  });
  return idx;
}

}  // namespace memtide::viewer
