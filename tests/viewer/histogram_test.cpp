// The Sizes view's model: the histogram of allocation sizes equals `memtide report --histogram
// --json` on the same file, its job reads it on its own thread, and the view, driven through
// ImGui without a window, tells a class's numbers when its bars are hovered.
#include <gtest/gtest.h>
#include <imgui.h>
#include <imgui_internal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "analysis/replay.h"
#include "synthetic_trace.h"
#include "tests/viewer/headless.h"
#include "viewer/histogram_model.h"
#include "viewer/loader.h"
#include "viewer/views.h"

namespace memtide::viewer {
namespace {

namespace fs = std::filesystem;
using test::kMs;

// The standard program with its mappings and pool blocks (not heap allocations: not counted),
// plus sizes on the edges of classes: 0, 1, 2, 3, 4096, 4097.
std::string write_trace(const std::string& name) {
  const std::string path = (fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + ".mtide")).string();
  test::Synthetic s(path);
  test::program_with_domains(s);
  s.malloc(40 * kMs, 0x60000, 0, 5).malloc(41 * kMs, 0x60100, 1, 5).malloc(42 * kMs, 0x60200, 2, 5);
  s.malloc(43 * kMs, 0x60300, 3, 5).malloc(44 * kMs, 0x61000, 4096, 5).malloc(45 * kMs, 0x63000, 4097, 5);
  s.end(50 * kMs);
  return path;
}

std::string run_cli(const std::string& args) {
  std::string out;
  FILE* p = ::popen((std::string(MEMTIDE_CLI) + " " + args + " 2>/dev/null").c_str(), "r");
  if (!p) return out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ::pclose(p);
  return out;
}

TEST(Histogram, ClassesAreThoseOfReportHistogramJson) {
  const std::string path = write_trace("histogram-model");
  const HistogramData d = make_histogram(analysis::size_histogram_of_file(path));
  ASSERT_TRUE(d.error.empty()) << d.error;
  // By hand: {0, 1} | {2} | {3} | 50 | 100 x 3 | 1000 | 4096 | 4097; mappings and pool blocks
  // left out.
  EXPECT_EQ(d.allocations, 11u);
  EXPECT_EQ(d.bytes, 0u + 1 + 2 + 3 + 50 + 300 + 1000 + 4096 + 4097);
  ASSERT_EQ(d.classes.size(), 14u) << "classes 0 .. 13, the empty ones between included";
  EXPECT_EQ(d.classes[0].allocations, 2u);
  EXPECT_EQ(d.classes[0].max_size, 1u);
  EXPECT_EQ(d.classes[2].min_size, 3u);
  EXPECT_EQ(d.classes[2].max_size, 4u);
  EXPECT_EQ(d.classes[7].min_size, 65u);
  EXPECT_EQ(d.classes[7].allocations, 3u);
  EXPECT_EQ(d.classes[7].bytes, 300u);
  EXPECT_EQ(d.classes[12].max_size, 4096u);
  EXPECT_EQ(d.classes[13].allocations, 1u);
  EXPECT_EQ(d.most_allocations, 3u);
  EXPECT_EQ(d.most_bytes, 4097u);

  const nlohmann::json j = nlohmann::json::parse(run_cli("report --histogram --json " + path), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "memtide report --histogram --json gave no JSON";
  EXPECT_EQ(j["allocations"].get<uint64_t>(), d.allocations);
  ASSERT_EQ(j["histogram"].size(), d.classes.size());
  for (std::size_t i = 0; i < d.classes.size(); ++i) {
    const nlohmann::json& row = j["histogram"][i];
    EXPECT_EQ(row["min_size"].get<uint64_t>(), d.classes[i].min_size) << i;
    EXPECT_EQ(row["max_size"].get<uint64_t>(), d.classes[i].max_size) << i;
    EXPECT_EQ(row["allocations"].get<uint64_t>(), d.classes[i].allocations) << i;
    EXPECT_EQ(row["bytes"].get<uint64_t>(), d.classes[i].bytes) << i;
  }
  fs::remove(path);
}

// The classes add up to the heap's allocations as the replay counts them, of the whole trace
// and of a window (the viewer's selection; the window's bounds are included, as the replay's).
TEST(Histogram, ClassesAddUpToTheReplaysAllocations) {
  const std::string path = write_trace("histogram-window");
  for (const auto& [from, to] : {std::pair<uint64_t, uint64_t>{0, 0}, {11 * kMs, 20 * kMs}, {40 * kMs, 43 * kMs}}) {
    analysis::ReplayOptions o;
    if (to) o.from = from, o.to = to;
    auto r = analysis::analyze_file(path, o);
    ASSERT_TRUE(r.ok()) << r.error;
    const uint64_t base = r.model->time_base;
    const analysis::SizeHistogramResult h =
        to ? analysis::size_histogram_of_file(path, {}, base + from, base + to) : analysis::size_histogram_of_file(path);
    ASSERT_TRUE(h.ok()) << h.error;
    EXPECT_EQ(h.histogram.allocations(), r.model->heap().allocations) << from << " .. " << to;
    EXPECT_EQ(h.histogram.total_bytes(), r.model->heap().allocated_bytes) << from << " .. " << to;
  }
  // 11 ms .. 20 ms: two blocks of 100 B and one of 1000 B; 40 .. 43 ms: the sizes 0, 1, 2, 3.
  auto r = analysis::analyze_file(path);
  ASSERT_TRUE(r.ok());
  const uint64_t base = r.model->time_base;
  EXPECT_EQ(analysis::size_histogram_of_file(path, {}, base + 11 * kMs, base + 20 * kMs).histogram.total_bytes(), 1200u);
  EXPECT_EQ(analysis::size_histogram_of_file(path, {}, base + 40 * kMs, base + 43 * kMs).histogram.allocations(), 4u);
  fs::remove(path);
}

TEST(Histogram, LabelsOfClasses) {
  EXPECT_EQ(size_class_label({65, 128, 0, 0}), "65 B .. 128 B");
  EXPECT_EQ(size_class_tick({65, 128, 0, 0}), "128 B");
  EXPECT_EQ(size_class_tick({2049, 4096, 0, 0}), "4 KiB");
  EXPECT_EQ(size_class_tick({(1u << 19) + 1, 1u << 20, 0, 0}), "1 MiB");
}

TEST(Histogram, ASampledTraceHasNone) {
  const std::string path = (fs::temp_directory_path() / ("histogram-sampled-" + std::to_string(::getpid()) + ".mtide")).string();
  {
    memtide::test::TraceBuilder::Options o;
    o.path = path;
    o.start = test::kStart;
    o.sample_interval = 4096;
    memtide::test::TraceBuilder b(o);
    b.stack(0, 1, 0, {0x1000});
    b.sampled_malloc(0, kMs, 0x1000, 64, 4096, 1);
    b.end(2 * kMs);
  }
  const HistogramData d = make_histogram(analysis::size_histogram_of_file(path));
  EXPECT_NE(d.error.find("sampled"), std::string::npos) << d.error;
  EXPECT_TRUE(d.classes.empty());
  fs::remove(path);
}

TEST(Histogram, AMissingFileIsAnError) {
  const HistogramData d = make_histogram(analysis::size_histogram_of_file("/nonexistent/histogram.mtide"));
  EXPECT_FALSE(d.error.empty());
}

class HeadlessSizes : public ::testing::Test {
 protected:
  void SetUp() override {
    headless_context();
    path = write_trace("histogram-view");
    auto r = analysis::analyze_file(path);
    ASSERT_TRUE(r.ok()) << r.error;
    snap.path = path;
    snap.refreshes = 1;
    snap.base = std::move(r.model);
  }
  void TearDown() override {
    ImGui::DestroyContext();
    fs::remove(path);
  }
  void frame(ImVec2 pos) {
    ImGuiIO& io = ImGui::GetIO();
    io.MousePos = pos;
    headless_frame([&] {
      analysis::Domain domain = analysis::Domain::Heap;
      Frame f{snap, loader, true, 1.0f, selection, domain};
      view.draw(f);
    });
  }

  std::string path;
  Snapshot snap;
  Loader loader;
  TimeRange selection;
  SizesView view;
};

TEST_F(HeadlessSizes, HoveringAClassTellsItsNumbers) {
  frame(ImVec2(-1, -1));
  // The first draw starts the read on the job's thread; a watchdog bounds the wait.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!view.complete(snap, selection) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(view.complete(snap, selection));
  frame(ImVec2(-1, -1));
  EXPECT_EQ(view.hovered(), -1);
  EXPECT_TRUE(view.tooltip().empty());
  const ImVec2 bar = view.bar(7);  // 65 B .. 128 B: the three blocks of 100 bytes
  ASSERT_GT(bar.x, 0);
  frame(bar);
  frame(bar);
  EXPECT_EQ(view.hovered(), 7);
  EXPECT_NE(view.tooltip().find("65 B .. 128 B"), std::string::npos) << view.tooltip();
  EXPECT_NE(view.tooltip().find("3 allocations (27.3 %)"), std::string::npos) << view.tooltip();
  EXPECT_NE(view.tooltip().find("300 B"), std::string::npos) << view.tooltip();
  EXPECT_NE(view.tooltip().find("average 100 B"), std::string::npos) << view.tooltip();
  const ImGuiWindow* tip = ImGui::FindWindowByName("##Tooltip_00");
  ASSERT_NE(tip, nullptr);
  EXPECT_TRUE(tip->Active) << "the tooltip is drawn";
  // Another class under the pointer, another tooltip.
  frame(view.bar(13));
  EXPECT_EQ(view.hovered(), 13);
  EXPECT_NE(view.tooltip().find("1 allocation ("), std::string::npos) << view.tooltip();
}

TEST_F(HeadlessSizes, ASelectedRangeHasItsOwnHistogram) {
  selection = {40 * kMs, 43 * kMs};
  frame(ImVec2(-1, -1));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!view.complete(snap, selection) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(view.complete(snap, selection));
  EXPECT_FALSE(view.complete(snap, {})) << "the whole trace's is another";
  const auto d = view.job().result();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->window, selection);
  EXPECT_EQ(d->allocations, 4u) << "the sizes 0, 1, 2 and 3";
  ASSERT_EQ(d->classes.size(), 3u);
  EXPECT_EQ(d->classes[0].allocations, 2u);
}

TEST_F(HeadlessSizes, ANewRefreshOfTheFileIsReadAgain) {
  frame(ImVec2(-1, -1));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!view.complete(snap, selection) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(view.complete(snap, selection));
  snap.refreshes = 2;
  EXPECT_FALSE(view.complete(snap, selection));
  frame(ImVec2(-1, -1));
  while (!view.complete(snap, selection) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(view.complete(snap, selection));
}

}  // namespace
}  // namespace memtide::viewer
