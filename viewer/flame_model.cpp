#include "viewer/flame_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace memtide::viewer {

FlameTree make_flame_tree(std::shared_ptr<const analysis::CallTree> tree) {
  FlameTree t;
  const auto& src = tree->nodes();
  t.nodes.resize(src.size());
  for (std::size_t i = 0; i < src.size(); ++i) {
    const analysis::TreeNode& s = src[i];
    FlameNode& n = t.nodes[i];
    n.parent = s.parent;
    n.value = s.total;
    n.self = s.self;
    n.blocks = s.blocks;
    n.label = i == 0 ? std::string_view("all") : s.label;
    n.file = s.file;
    n.module = s.module;
    n.line = s.line;
  }
  t.owner = std::move(tree);
  finish_flame_tree(t);
  return t;
}

void finish_flame_tree(FlameTree& t) {
  if (t.nodes.empty()) t.nodes.emplace_back();
  std::vector<uint32_t> count(t.nodes.size(), 0);
  for (std::size_t i = 1; i < t.nodes.size(); ++i) ++count[t.nodes[i].parent];
  uint32_t next = 0;
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    t.nodes[i].first_child = next;
    t.nodes[i].child_count = 0;
    next += count[i];
  }
  t.children.assign(next, 0);
  t.max_depth = 0;
  t.nodes[0].depth = 0;
  for (uint32_t i = 1; i < t.nodes.size(); ++i) {
    FlameNode& p = t.nodes[t.nodes[i].parent];
    t.children[p.first_child + p.child_count++] = i;
    t.nodes[i].depth = p.depth + 1;  // parents come first
    t.max_depth = std::max(t.max_depth, t.nodes[i].depth);
  }
  for (const FlameNode& n : t.nodes) {
    auto b = t.children.begin() + n.first_child;
    std::sort(b, b + n.child_count, [&](uint32_t x, uint32_t y) {
      const FlameNode &a = t.nodes[x], &c = t.nodes[y];
      return a.value != c.value ? a.value > c.value : a.label < c.label;
    });
  }
}

FlameLayout layout_flame(const FlameTree& t, uint32_t zoom, float width, float min_px, uint32_t max_rows) {
  FlameLayout out;
  if (zoom >= t.nodes.size() || width <= 0) return out;
  const FlameNode& z = t.nodes[zoom];
  out.scale_total = z.value;
  if (z.value == 0) return out;
  const double px_per_unit = static_cast<double>(width) / static_cast<double>(z.value);
  out.rects.push_back({0, width, 0, zoom, 0, 0, z.value});
  out.rows = 1;
  // Breadth-first over the rects just added: each visible frame lays out its children.
  for (std::size_t r = 0; r < out.rects.size(); ++r) {
    const FlameRect parent = out.rects[r];
    if (parent.node == kMergedNode || parent.depth + 1 >= max_rows) continue;
    const FlameNode& n = t.nodes[parent.node];
    double x = parent.x0;
    for (uint32_t k = 0; k < n.child_count; ++k) {
      const uint32_t c = t.children[n.first_child + k];
      const double w = static_cast<double>(t.nodes[c].value) * px_per_unit;
      if (w < min_px) {
        // This child and every later one (smaller still) go into one block.
        uint64_t rest = 0;
        for (uint32_t j = k; j < n.child_count; ++j) rest += t.nodes[t.children[n.first_child + j]].value;
        const double rw = static_cast<double>(rest) * px_per_unit;
        if (rw >= 1.0)
          out.rects.push_back({static_cast<float>(x), static_cast<float>(x + rw), parent.depth + 1, kMergedNode,
                               parent.node, n.child_count - k, rest});
        break;
      }
      out.rects.push_back({static_cast<float>(x), static_cast<float>(x + w), parent.depth + 1, c, parent.node, 0,
                           t.nodes[c].value});
      x += w;
    }
  }
  for (const FlameRect& r : out.rects) out.rows = std::max(out.rows, r.depth + 1);
  return out;
}

std::vector<uint32_t> flame_path(const FlameTree& t, uint32_t node) {
  std::vector<uint32_t> path;
  if (node >= t.nodes.size()) return path;
  for (uint32_t n = node;; n = t.nodes[n].parent) {
    path.push_back(n);
    if (n == 0 || path.size() > t.nodes.size()) break;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

namespace {

bool contains_nocase(std::string_view hay, std::string_view needle) {
  if (needle.empty()) return false;
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
  return it != hay.end();
}

}  // namespace

FlameSearch search_flame(const FlameTree& t, std::string_view query) {
  FlameSearch s;
  s.query = query;
  s.matched.assign(t.nodes.size(), 0);
  if (query.empty()) return s;
  // covered[i]: node i or one of its ancestors matched (parents come before children).
  std::vector<uint8_t> covered(t.nodes.size(), 0);
  for (uint32_t i = 1; i < t.nodes.size(); ++i) {
    const FlameNode& n = t.nodes[i];
    const bool m = contains_nocase(n.label, query) || contains_nocase(n.file, query) || contains_nocase(n.module, query);
    s.matched[i] = m;
    s.matches += m;
    if (m && !covered[n.parent]) s.matched_value += n.value;
    covered[i] = m || covered[n.parent];
  }
  return s;
}

uint32_t hash_string(std::string_view s) {
  uint32_t h = 2166136261u;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return h;
}

namespace {

uint32_t pack(double r, double g, double b) {
  auto c = [](double v) { return static_cast<uint32_t>(std::clamp(v, 0.0, 1.0) * 255.0 + 0.5); };
  return 0xFF000000u | c(b) << 16 | c(g) << 8 | c(r);
}

uint32_t hsl(double h, double s, double l) {
  auto f = [&](double n) {
    const double k = std::fmod(n + h * 12.0, 12.0);
    const double a = s * std::min(l, 1 - l);
    return l - a * std::max(-1.0, std::min({k - 3, 9 - k, 1.0}));
  };
  return pack(f(0), f(8), f(4));
}

}  // namespace

uint32_t module_colour(std::string_view module, uint32_t variant, bool dark_theme) {
  // Hue from the module's file name (not the full path: the same library installed elsewhere
  // keeps its colour); warm hues for the program, the whole wheel otherwise.
  const auto slash = module.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? module : module.substr(slash + 1);
  const uint32_t h = hash_string(name);
  // The module fixes the hue; the function moves it a little and changes the lightness, so
  // that neighbouring frames of one module stay distinguishable.
  const double shift = (static_cast<double>(variant >> 8 & 15) - 7.5) / 360.0;
  const double hue = module.empty() ? 0.0 : std::fmod(static_cast<double>(h % 360) / 360.0 + shift + 1.0, 1.0);
  const double sat = module.empty() ? 0.0 : 0.50 + static_cast<double>(h >> 9 & 7) * 0.03;
  const double base = dark_theme ? 0.40 : 0.70;
  const double light = base + (static_cast<double>(variant % 9) - 4.0) * 0.018;
  return hsl(hue, sat, light);
}

uint32_t diff_colour(uint64_t before, uint64_t after, bool dark_theme) {
  const double l = dark_theme ? 0.40 : 0.70;
  if (before == after) return hsl(0, 0, l);
  const double big = static_cast<double>(std::max(before, after));
  const double rel = std::min(1.0, std::abs(static_cast<double>(after) - static_cast<double>(before)) / big);
  const double sat = 0.25 + 0.7 * rel;
  return after > before ? hsl(0.0, sat, l) : hsl(0.60, sat, l);
}

}  // namespace memtide::viewer
