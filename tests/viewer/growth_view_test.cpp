// The Growth view driven through ImGui without a window (as widget_test.cpp does the
// flamegraph): its buttons ask for a stack's flamegraph and leaks.
#include <gtest/gtest.h>
#include <imgui.h>

#include <memory>

#include "analysis/replay.h"
#include "analysis/symbols.h"
#include "synthetic_trace.h"
#include "tests/viewer/headless.h"
#include "viewer/loader.h"
#include "viewer/views.h"

namespace memtide::viewer {
namespace {

using test::kMs;

// Stack 1 (0x1000) leaks 100 B every 10 ms for 2 s; stack 2 (0x2000) holds 5000 B.
std::shared_ptr<const GrowthData> growth() {
  test::Synthetic s;
  s.stack(1, 0, {0x1000}).stack(2, 0, {0x2000});
  s.malloc(1 * kMs, 0x900000, 5000, 2);
  for (uint64_t ms = 10; ms <= 2000; ms += 10) s.malloc(ms * kMs, 0x100000 + ms * 16, 100, 1);
  analysis::ReplayOptions o;
  o.stack_history = true;
  auto r = analysis::analyze_memory(s.end(2001 * kMs), o);
  EXPECT_TRUE(r.ok()) << r.error;
  analysis::Symbolizer sym(*r.model);
  return std::make_shared<GrowthData>(make_growth(*r.model, sym));
}

class HeadlessGrowth : public ::testing::Test {
 protected:
  void SetUp() override {
    headless_context();
    snap.growth = growth();
  }
  void TearDown() override { ImGui::DestroyContext(); }

  void frame(ImVec2 pos, bool left = false) {
    ImGuiIO& io = ImGui::GetIO();
    io.MousePos = pos;
    io.MouseDown[0] = left;
    headless_frame([&] {
      analysis::Domain domain = analysis::Domain::Heap;
      Frame f{snap, loader, true, 1.0f, selection, domain};
      view.draw(f);
    });
  }
  void click(ImVec2 pos) {
    frame(pos);
    frame(pos, true);
    frame(pos);
  }

  Snapshot snap;
  Loader loader;
  TimeRange selection;
  GrowthView view;
};

TEST_F(HeadlessGrowth, ARowsButtonsAskForItsFlamegraphAndItsLeaks) {
  frame(ImVec2(-1, -1));
  ASSERT_EQ(snap.growth->layers.size(), 3u) << "the leak, the held block, the rest";
  ASSERT_TRUE(snap.growth->layers[0].growing);
  const std::string site = snap.growth->layers[0].site;
  EXPECT_EQ(view.go.to, GrowthView::GoTo::None);
  click(view.button(0, false));
  EXPECT_EQ(view.go.to, GrowthView::GoTo::Flamegraph);
  EXPECT_EQ(view.go.site, site);
  view.go = {};
  click(view.button(1, true));
  EXPECT_EQ(view.go.to, GrowthView::GoTo::Leaks);
  EXPECT_EQ(view.go.site, snap.growth->layers[1].site);
  EXPECT_EQ(view.button(2, false).x, -1) << "the rest of the heap has no buttons";
}

}  // namespace
}  // namespace memtide::viewer
