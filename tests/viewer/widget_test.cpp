// The flamegraph widget driven through ImGui without a window: ImGui runs headless (a font
// atlas, a display size, mouse input set by hand), so clicks, right-clicks and the search can
// be tested on what the widget really does.
#include <gtest/gtest.h>
#include <imgui.h>

#include "tests/viewer/headless.h"
#include "viewer/frame_stats.h"
#include "viewer/loader.h"
#include "viewer/views.h"

namespace memtide::viewer {
namespace {

FlameTree sample() {  // root(100) -> a(60) -> a1(60); b(30); c(10)
  FlameTree t;
  auto add = [&](uint32_t parent, const char* label, uint64_t v) {
    FlameNode n;
    n.parent = parent;
    n.label = label;
    n.value = v;
    n.module = "/opt/x/prog";
    t.nodes.push_back(n);
    return static_cast<uint32_t>(t.nodes.size() - 1);
  };
  t.nodes.emplace_back();
  t.nodes[0].value = 100;
  t.nodes[0].label = "all";
  const uint32_t a = add(0, "a", 60);
  add(0, "b", 30);
  add(0, "c", 10);
  add(a, "a1", 60);
  finish_flame_tree(t);
  return t;
}

class Headless : public ::testing::Test {
 protected:
  void SetUp() override {
    headless_context();
  }
  void TearDown() override { ImGui::DestroyContext(); }

  // One frame with the mouse at `pos` and the buttons as given.
  void frame(ImVec2 pos, bool left = false, bool right = false) {
    ImGuiIO& io = ImGui::GetIO();
    io.MousePos = pos;
    io.MouseDown[0] = left;
    io.MouseDown[1] = right;
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(io.DisplaySize);
    ImGui::Begin("w", nullptr, ImGuiWindowFlags_NoDecoration);
    analysis::Domain domain = analysis::Domain::Heap;
    Frame f{snap, loader, true, 1.0f, selection, domain};
    widget.draw(f, &tree, true, "flame");
    ImGui::End();
    ImGui::Render();
  }
  void click(ImVec2 pos, bool right = false) {
    frame(pos);
    frame(pos, !right, right);
    frame(pos);
  }
  // Centre of the rectangle of `label` in the current layout.
  ImVec2 centre(std::string_view label) {
    for (const FlameRect& r : widget.layout().rects)
      if (r.node != kMergedNode && tree.nodes[r.node].label == label)
        return ImVec2(widget.graph_x() + (r.x0 + r.x1) / 2,
                      widget.graph_y() + (static_cast<float>(r.depth) + 0.5f) * widget.row_height());
    ADD_FAILURE() << "no frame " << label;
    return ImVec2(-1, -1);
  }
  uint32_t node(std::string_view label) const {
    for (uint32_t i = 0; i < tree.nodes.size(); ++i)
      if (tree.nodes[i].label == label) return i;
    return UINT32_MAX;
  }

  FlameTree tree = sample();
  Snapshot snap;
  Loader loader;
  TimeRange selection;
  FlameWidget widget;
};

TEST_F(Headless, ClickZoomsIntoAFrameAndRightClickZoomsOut) {
  frame(ImVec2(-1, -1));
  EXPECT_EQ(widget.zoom(), 0u);
  const float full = widget.layout().rects[0].x1;
  click(centre("a"));
  EXPECT_EQ(widget.zoom(), node("a"));
  frame(ImVec2(-1, -1));
  // The zoomed frame now spans the whole width, its child too.
  ASSERT_GE(widget.layout().rects.size(), 2u);
  EXPECT_EQ(widget.layout().rects[0].node, node("a"));
  EXPECT_FLOAT_EQ(widget.layout().rects[1].x1, full);
  click(centre("a1"), /*right=*/true);
  EXPECT_EQ(widget.zoom(), 0u);
}

TEST_F(Headless, ZoomFollowsLabelsIntoANewTree) {
  frame(ImVec2(-1, -1));
  click(centre("a"));
  ASSERT_EQ(widget.zoom(), node("a"));
  tree = sample();  // a refresh: same frames, new tree (new serial)
  tree.serial = next_serial();
  frame(ImVec2(-1, -1));
  EXPECT_EQ(widget.zoom(), node("a"));
  widget.reset_zoom();
  frame(ImVec2(-1, -1));
  EXPECT_EQ(widget.zoom(), 0u);
}

TEST_F(Headless, SearchHighlightsAndSums) {
  widget.search = "a";
  frame(ImVec2(-1, -1));
  EXPECT_EQ(widget.search_result().matches, 2u);  // a, a1 (not "all": the root is never matched)
  EXPECT_EQ(widget.search_result().matched_value, 60u);
  widget.search = "b";
  frame(ImVec2(-1, -1));
  EXPECT_EQ(widget.search_result().matched_value, 30u);
}

class HeadlessTimeline : public Headless {
 protected:
  void SetUp() override {
    Headless::SetUp();
    auto d = std::make_shared<TimelineData>();
    d->duration = 1'000'000'000;  // 1 s
    d->heap = {{0, 0, 100, 100}, {500'000'000, 100, 900, 900}};
    d->heap_bucket_ns = 1000;
    d->max_value = 900;
    d->peak_bytes = 900;
    d->peak_time = 500'000'000;
    snap.timeline = d;
  }
  void tl_frame(ImVec2 pos, bool left = false, float wheel = 0) {
    ImGuiIO& io = ImGui::GetIO();
    io.MousePos = pos;
    io.MouseDown[0] = left;
    io.MouseWheel = wheel;
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(io.DisplaySize);
    ImGui::Begin("w", nullptr, ImGuiWindowFlags_NoDecoration);
    analysis::Domain domain = analysis::Domain::Heap;
    Frame f{snap, loader, true, 1.0f, selection, domain};
    timeline.draw(f, 400, false);
    ImGui::End();
    ImGui::Render();
  }
  float x_at(double share) const {
    return timeline.plot_x0() + static_cast<float>(share) * (timeline.plot_x1() - timeline.plot_x0());
  }
  TimelineView timeline;
};

TEST_F(HeadlessTimeline, DragSelectsATimeRange) {
  tl_frame(ImVec2(-1, -1));
  const float y = timeline.plot_y();
  tl_frame(ImVec2(x_at(0.25), y));
  tl_frame(ImVec2(x_at(0.25), y), true);  // press
  tl_frame(ImVec2(x_at(0.50), y), true);
  tl_frame(ImVec2(x_at(0.75), y), true);
  EXPECT_TRUE(selection.empty()) << "not before the button is released";
  tl_frame(ImVec2(x_at(0.75), y), false);  // release
  EXPECT_NEAR(static_cast<double>(selection.from), 250e6, 5e6);
  EXPECT_NEAR(static_cast<double>(selection.to), 750e6, 5e6);
}

TEST_F(HeadlessTimeline, WheelZoomsAroundThePointer) {
  tl_frame(ImVec2(-1, -1));
  const float y = timeline.plot_y();
  tl_frame(ImVec2(x_at(0.5), y), false, 2.0f);  // two notches in
  const TimeRange v = timeline.view_range();
  EXPECT_LT(v.length(), 700'000'000u);
  EXPECT_NEAR(static_cast<double>(v.from + v.to) / 2, 500e6, 10e6);
  EXPECT_TRUE(selection.empty()) << "zooming selects nothing";
}

TEST_F(Headless, DrawCountsGiveTheAreaInsideTheClipRectangles) {
  ImGui::NewFrame();
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(ImGui::GetIO().DisplaySize);
  ImGui::Begin("w", nullptr, ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoBackground);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(ImVec2(10, 10), ImVec2(110, 60), IM_COL32(255, 0, 0, 255));  // 100 x 50
  dl->PushClipRect(ImVec2(0, 0), ImVec2(60, 600));
  dl->AddRectFilled(ImVec2(10, 100), ImVec2(110, 150), IM_COL32(0, 255, 0, 255));  // 50 x 50 inside
  dl->PopClipRect();
  ImGui::End();
  ImGui::Render();
  const FrameStats::DrawCounts c = count_draws(ImGui::GetDrawData());
  EXPECT_EQ(c.vertices, 8u);
  EXPECT_EQ(c.triangles, 4u);
  EXPECT_EQ(c.commands, 2u) << "a new clip rectangle is a new draw call";
  EXPECT_NEAR(c.pixels, 5000 + 2500, 1);
}

}  // namespace
}  // namespace memtide::viewer
