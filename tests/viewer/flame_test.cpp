#include <gtest/gtest.h>

#include <algorithm>

#include "viewer/flame_model.h"

namespace memtide::viewer {
namespace {

// root(100) -> a(60) -> a1(60); b(30); c(6); d(3); e(1)
FlameTree sample() {
  FlameTree t;
  auto add = [&](uint32_t parent, const char* label, uint64_t v, const char* module = "/lib/libx.so") {
    FlameNode n;
    n.parent = parent;
    n.label = label;
    n.value = v;
    n.module = module;
    t.nodes.push_back(n);
    return static_cast<uint32_t>(t.nodes.size() - 1);
  };
  t.nodes.emplace_back();
  t.nodes[0].value = 100;
  t.nodes[0].label = "all";
  add(0, "d", 3);
  const uint32_t a = add(0, "a", 60, "/usr/bin/prog");
  add(0, "e", 1);
  add(0, "b", 30);
  add(0, "c", 6);
  add(a, "a1", 60, "/usr/bin/prog");
  finish_flame_tree(t);
  return t;
}

const FlameRect* find(const FlameLayout& l, const FlameTree& t, std::string_view label) {
  for (const FlameRect& r : l.rects)
    if (r.node != kMergedNode && t.nodes[r.node].label == label) return &r;
  return nullptr;
}

TEST(FlameTree, ChildrenSortedLargestFirstWithDepths) {
  const FlameTree t = sample();
  const FlameNode& root = t.nodes[0];
  ASSERT_EQ(root.child_count, 5u);
  std::vector<std::string_view> order;
  for (uint32_t k = 0; k < root.child_count; ++k) order.push_back(t.nodes[t.children[root.first_child + k]].label);
  EXPECT_EQ(order, (std::vector<std::string_view>{"a", "b", "c", "d", "e"}));
  EXPECT_EQ(t.max_depth, 2u);
}

TEST(FlameLayout, WidthsAreProportionalToValues) {
  const FlameTree t = sample();
  const FlameLayout l = layout_flame(t, 0, 1000, 1);
  const FlameRect* a = find(l, t, "a");
  const FlameRect* b = find(l, t, "b");
  const FlameRect* c = find(l, t, "c");
  ASSERT_TRUE(a && b && c);
  EXPECT_FLOAT_EQ(a->x0, 0);
  EXPECT_FLOAT_EQ(a->x1, 600);
  EXPECT_FLOAT_EQ(b->x0, 600);
  EXPECT_FLOAT_EQ(b->x1, 900);
  EXPECT_FLOAT_EQ(c->x1 - c->x0, 60);
  EXPECT_EQ(a->depth, 1u);
  const FlameRect* a1 = find(l, t, "a1");
  ASSERT_TRUE(a1);
  EXPECT_EQ(a1->depth, 2u);
  EXPECT_FLOAT_EQ(a1->x1, 600);
  EXPECT_EQ(l.rows, 3u);
}

TEST(FlameLayout, NarrowFramesAreMergedIntoOneBlock) {
  const FlameTree t = sample();
  // 100 px: c = 6 px stays, d = 3 px and e = 1 px (< 4 px) merge into one 4 px block.
  const FlameLayout l = layout_flame(t, 0, 100, 4);
  EXPECT_TRUE(find(l, t, "c"));
  EXPECT_FALSE(find(l, t, "d"));
  EXPECT_FALSE(find(l, t, "e"));
  const auto merged = std::find_if(l.rects.begin(), l.rects.end(), [](const FlameRect& r) { return r.node == kMergedNode; });
  ASSERT_NE(merged, l.rects.end());
  EXPECT_EQ(merged->merged, 2u);
  EXPECT_EQ(merged->value, 4u);
  EXPECT_FLOAT_EQ(merged->x0, 96);
  EXPECT_FLOAT_EQ(merged->x1, 100);
  EXPECT_EQ(merged->parent, 0u);
}

TEST(FlameLayout, MergedBlocksBelowAPixelAreDropped) {
  const FlameTree t = sample();
  const FlameLayout l = layout_flame(t, 0, 20, 4);  // d+e = 0.8 px
  ASSERT_FALSE(l.rects.empty());
  for (const FlameRect& r : l.rects) EXPECT_NE(r.node == kMergedNode && r.value == 4, true);
}

TEST(FlameLayout, ZoomGivesTheFrameTheFullWidth) {
  const FlameTree t = sample();
  uint32_t a = 0;
  for (uint32_t i = 0; i < t.nodes.size(); ++i)
    if (t.nodes[i].label == "a") a = i;
  const FlameLayout l = layout_flame(t, a, 500, 1);
  ASSERT_EQ(l.rects.size(), 2u);
  EXPECT_EQ(l.rects[0].node, a);
  EXPECT_FLOAT_EQ(l.rects[0].x1, 500);
  EXPECT_EQ(l.rects[1].depth, 1u);
  EXPECT_FLOAT_EQ(l.rects[1].x1, 500);
  EXPECT_EQ(l.scale_total, 60u);
  const auto path = flame_path(t, l.rects[1].node);
  ASSERT_EQ(path.size(), 3u);
  EXPECT_EQ(path[0], 0u);
  EXPECT_EQ(path[1], a);
}

TEST(FlameLayout, RowLimit) {
  const FlameTree t = sample();
  EXPECT_EQ(layout_flame(t, 0, 1000, 1, 2).rows, 2u);
}

TEST(FlameSearch, SumsMatchesOnceEvenWhenNested) {
  const FlameTree t = sample();
  const FlameSearch s = search_flame(t, "A");  // "a" and "a1" (nested): 60, not 120
  EXPECT_EQ(s.matches, 2u);
  EXPECT_EQ(s.matched_value, 60u);
  const FlameSearch m = search_flame(t, "libx");  // by module: b, c, d, e
  EXPECT_EQ(m.matched_value, 40u);
  EXPECT_EQ(search_flame(t, "").matches, 0u);
}

TEST(FlameColour, StablePerModuleAndDifferentAcrossModules) {
  EXPECT_EQ(module_colour("/usr/lib/libc.so.6", 0, true), module_colour("/lib/x86_64/libc.so.6", 0, true));
  EXPECT_NE(module_colour("/usr/lib/libc.so.6", 0, true), module_colour("/usr/bin/prog", 0, true));
  EXPECT_NE(module_colour("/usr/bin/prog", 0, true), module_colour("/usr/bin/prog", 0, false));
  EXPECT_EQ(module_colour("x", 1, true) >> 24, 0xFFu);
}

TEST(FlameColour, DiffIsRedWhenGrownBlueWhenShrunk) {
  auto r = [](uint32_t c) { return c & 0xFF; };
  auto b = [](uint32_t c) { return c >> 16 & 0xFF; };
  const uint32_t grew = diff_colour(10, 100, true), shrank = diff_colour(100, 10, true), same = diff_colour(5, 5, true);
  EXPECT_GT(r(grew), b(grew));
  EXPECT_GT(b(shrank), r(shrank));
  EXPECT_EQ(r(same), b(same));
}

}  // namespace
}  // namespace memtide::viewer
