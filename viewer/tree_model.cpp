#include "viewer/tree_model.h"

#include <algorithm>
#include <unordered_map>

namespace memtide::viewer {

using analysis::Metric;

const char* metric_name(Metric m) {
  switch (m) {
    case Metric::Allocated: return "allocated";
    case Metric::Count: return "allocations";
    case Metric::Temporary: return "temporary";
    case Metric::Leaked: return "leaked";
    case Metric::Peak: return "live at peak";
    case Metric::LiveAt: return "live at end of selection";
    case Metric::Count_: break;
  }
  return "?";
}

const char* metric_description(Metric m) {
  switch (m) {
    case Metric::Allocated: return "bytes allocated";
    case Metric::Count: return "number of allocations";
    case Metric::Temporary: return "number of temporary allocations (freed right away by the same thread)";
    case Metric::Leaked: return "bytes not freed at the end of the trace";
    case Metric::Peak: return "bytes live at the heap's high-water mark";
    case Metric::LiveAt: return "bytes allocated in the selected range and still live at its end";
    case Metric::Count_: break;
  }
  return "";
}

bool metric_is_bytes(Metric m) { return m != Metric::Count && m != Metric::Temporary; }

namespace {

struct EdgeKey {
  uint32_t parent;
  std::string_view label;
  bool operator==(const EdgeKey&) const = default;
};
struct EdgeHash {
  std::size_t operator()(const EdgeKey& k) const {
    return std::hash<std::string_view>{}(k.label) * 31 + k.parent;
  }
};

}  // namespace

TreeTable make_tree_table(const std::array<std::shared_ptr<const analysis::CallTree>, kMetricCount>& trees) {
  TreeTable t;
  const auto& shape = trees[static_cast<unsigned>(Metric::Count)];
  if (!shape) {
    t.nodes.emplace_back();
    return t;
  }
  const auto& src = shape->nodes();
  t.nodes.resize(src.size());
  std::unordered_map<EdgeKey, uint32_t, EdgeHash> edges;
  edges.reserve(src.size());
  for (uint32_t i = 0; i < src.size(); ++i) {
    TableNode& n = t.nodes[i];
    n.parent = src[i].parent;
    n.label = i == 0 ? std::string_view("all") : src[i].label;
    n.file = src[i].file;
    n.module = src[i].module;
    n.line = src[i].line;
    n.children = src[i].children;
    if (i) edges.emplace(EdgeKey{n.parent, src[i].label}, i);
  }
  for (unsigned m = 0; m < kMetricCount; ++m) {
    if (!trees[m]) continue;
    const auto& nodes = trees[m]->nodes();
    std::vector<uint32_t> map(nodes.size(), UINT32_MAX);
    map[0] = 0;
    for (uint32_t i = 0; i < nodes.size(); ++i) {
      if (i) {
        const uint32_t p = map[nodes[i].parent];
        if (p == UINT32_MAX) continue;
        auto it = edges.find(EdgeKey{p, nodes[i].label});
        if (it == edges.end()) continue;  // cannot happen for trees of one model
        map[i] = it->second;
      }
      t.nodes[map[i]].total[m] = nodes[i].total;
      t.nodes[map[i]].self[m] = nodes[i].self;
    }
  }
  t.owner = std::make_shared<std::array<std::shared_ptr<const analysis::CallTree>, kMetricCount>>(trees);
  t.by_allocated = sort_tree(t, TreeSort{});
  return t;
}

TreeOrder sort_tree(const TreeTable& t, TreeSort s) {
  TreeOrder o;
  o.first.resize(t.nodes.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    o.first[i] = static_cast<uint32_t>(total);
    total += t.nodes[i].children.size();
  }
  o.children.resize(total);
  const unsigned m = static_cast<unsigned>(s.metric);
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    const auto& c = t.nodes[i].children;
    auto b = o.children.begin() + o.first[i];
    std::copy(c.begin(), c.end(), b);
    std::stable_sort(b, b + static_cast<std::ptrdiff_t>(c.size()), [&](uint32_t x, uint32_t y) {
      const TableNode &a = t.nodes[x], &d = t.nodes[y];
      if (s.by_label) return s.ascending ? a.label < d.label : a.label > d.label;
      const uint64_t va = s.self ? a.self[m] : a.total[m], vd = s.self ? d.self[m] : d.total[m];
      if (va != vd) return s.ascending ? va < vd : va > vd;
      return a.label < d.label;
    });
  }
  return o;
}

FunctionRelatives function_relatives(const TreeTable& t, std::string_view function, Metric by) {
  FunctionRelatives r;
  r.function = function;
  std::unordered_map<std::string_view, std::size_t> callers, callees;
  auto add = [](std::vector<Relative>& v, std::unordered_map<std::string_view, std::size_t>& idx, std::string_view label,
                const std::array<uint64_t, kMetricCount>& val) {
    auto [it, fresh] = idx.try_emplace(label, v.size());
    if (fresh) v.push_back({std::string(label), {}});
    for (unsigned m = 0; m < kMetricCount; ++m) v[it->second].value[m] += val[m];
  };
  // Walk depth-first, knowing whether an ancestor already is `function` (recursion).
  std::vector<std::pair<uint32_t, bool>> todo{{0, false}};
  while (!todo.empty()) {
    const auto [i, inside] = todo.back();
    todo.pop_back();
    const TableNode& n = t.nodes[i];
    const bool is_fn = i != 0 && n.label == function;
    if (is_fn) {
      for (unsigned m = 0; m < kMetricCount; ++m) {
        r.self[m] += n.self[m];
        if (!inside) r.total[m] += n.total[m];
      }
      if (!inside) add(r.callers, callers, n.parent == 0 ? std::string_view("(root)") : t.nodes[n.parent].label, n.total);
      if (!inside)
        for (uint32_t c : n.children) add(r.callees, callees, t.nodes[c].label, t.nodes[c].total);
    }
    for (uint32_t c : n.children) todo.push_back({c, inside || is_fn});
  }
  const unsigned m = static_cast<unsigned>(by);
  auto order = [m](const Relative& a, const Relative& b) {
    return a.value[m] != b.value[m] ? a.value[m] > b.value[m] : a.label < b.label;
  };
  std::sort(r.callers.begin(), r.callers.end(), order);
  std::sort(r.callees.begin(), r.callees.end(), order);
  return r;
}

}  // namespace memtide::viewer
