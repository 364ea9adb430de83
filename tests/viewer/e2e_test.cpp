// End to end: record the example worker under the real LD_PRELOAD recorder, render each view
// with `xvfb-run -a memtide-view --screenshot`, decode the PNG and check that the expected view
// is drawn: the right size, not blank, the selected tab, and each view's own marks (the
// timeline's heap and RSS lines, the flamegraph's rows of frames, the tables' header bands).
// Without xvfb-run the tests fail: they do not pass vacuously.
#include <gtest/gtest.h>
#include <stb_image.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Rgb {
  int r, g, b;
};

struct Image {
  int w = 0, h = 0;
  std::vector<unsigned char> px;
  Rgb at(int x, int y) const {
    const unsigned char* p = &px[(static_cast<std::size_t>(y) * w + x) * 4];
    return {p[0], p[1], p[2]};
  }
};

bool near(Rgb a, Rgb b, int tol) { return std::abs(a.r - b.r) <= tol && std::abs(a.g - b.g) <= tol && std::abs(a.b - b.b) <= tol; }
int chroma(Rgb c) { return std::max({c.r, c.g, c.b}) - std::min({c.r, c.g, c.b}); }

int run(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

bool have_xvfb_run() { return run("command -v xvfb-run >/dev/null 2>&1") == 0; }

// `xvfb-run -a` looks for a free display from :99 up; two runs starting at once (other test
// suites, other users of the machine) can pick the same one and one fails. Starting the
// search from a number of our own makes that unlikely. The X authority file is ours too:
// without -f, xvfb-run removes a temporary directory of its own at exit and, when that fails
// (the program exited while the server was still starting), exits 5 instead of with the
// program's status.
std::string xvfb_run() {
  const fs::path auth = fs::temp_directory_path() / ("memtide-view-e2e-xauth-" + std::to_string(::getpid()));
  return "xvfb-run -a -n " + std::to_string(100 + ::getpid() % 800) + " -f " + auth.string() + " ";
}

class ViewerE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("memtide-view-e2e-" + std::to_string(::getpid())));
    fs::create_directories(*dir_);
    trace_ = new std::string((*dir_ / "worker.mtide").string());
    const std::string cmd = std::string(MT_WRAPPER) + " run -o " + *trace_ + " -- " + MT_WORKER +
                            " --seconds 2 > " + (*dir_ / "record.log").string() + " 2>&1";
    record_status_ = run(cmd);
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    fs::remove(fs::temp_directory_path() / ("memtide-view-e2e-xauth-" + std::to_string(::getpid())), ec);
    delete dir_;
    delete trace_;
  }

  // Renders `view` of `trace` (default: the worker's); fails the test (not skips) when the
  // picture cannot be made.
  Image shoot(const std::string& view, const std::string& extra = "", int w = 1100, int h = 720,
              const std::string& trace = "") {
    Image img;
    EXPECT_TRUE(have_xvfb_run()) << "xvfb-run is missing (install xvfb and xauth: scripts/setup)";
    EXPECT_EQ(record_status_, 0) << "recording the example worker failed; see the log in " << *dir_;
    if (!have_xvfb_run() || record_status_ != 0) return img;
    const std::string out = (*dir_ / (view + ".png")).string();
    const std::string cmd = xvfb_run() + "-s '-screen 0 1280x1024x24' " + std::string(MT_VIEW) + " --screenshot " + out +
                            " --view " + view + " --width " + std::to_string(w) + " --height " + std::to_string(h) + " " +
                            extra + " " + (trace.empty() ? *trace_ : trace) + " > " + out + ".log 2>&1";
    const int st = run(cmd);
    EXPECT_EQ(st, 0) << cmd;
    int n = 0;
    unsigned char* data = stbi_load(out.c_str(), &img.w, &img.h, &n, 4);
    EXPECT_NE(data, nullptr) << "cannot decode " << out;
    if (data) {
      img.px.assign(data, data + static_cast<std::size_t>(img.w) * img.h * 4);
      stbi_image_free(data);
    }
    return img;
  }

  static fs::path* dir_;
  static std::string* trace_;
  static int record_status_;
};

fs::path* ViewerE2E::dir_ = nullptr;
std::string* ViewerE2E::trace_ = nullptr;
int ViewerE2E::record_status_ = -1;

std::size_t distinct_colours(const Image& img) {
  std::set<uint32_t> s;
  for (std::size_t i = 0; i + 3 < img.px.size(); i += 4)
    s.insert(uint32_t{img.px[i]} << 16 | uint32_t{img.px[i + 1]} << 8 | img.px[i + 2]);
  return s.size();
}

// The index of the selected tab: tabs are runs of tab colour along one row of pixels; the
// selected one has the TabActive colour (ImGui's dark style: (51,105,173)).
int selected_tab(const Image& img) {
  const Rgb active{51, 105, 173};
  int best_y = -1, best = 0;
  for (int y = 0; y < img.h / 2; ++y) {
    int c = 0;
    for (int x = 0; x < img.w; ++x) c += near(img.at(x, y), active, 6);
    // Not the line under the tab bar, which spans the whole width in the same colour.
    if (c > best && c < img.w / 3) best = c, best_y = y;
  }
  if (best_y < 0 || best < 30) return -1;
  // Walk the row: every run of bluish tab pixels is a tab; the first run containing the
  // active colour is the selected one.
  int index = -1, runs = 0;
  bool in_run = false, run_active = false;
  for (int x = 0; x <= img.w; ++x) {
    const Rgb c = x < img.w ? img.at(x, best_y) : Rgb{0, 0, 0};
    const bool tabby = c.b > c.r + 40 && c.b > 90;
    if (tabby && !in_run) in_run = true, run_active = false;
    if (tabby && near(c, active, 6)) run_active = true;
    if (!tabby && in_run) {
      in_run = false;
      if (run_active && index < 0) index = runs;
      ++runs;
    }
  }
  (void)runs;
  return index;
}

// Rows of pixels in [y0, y1) where at least `share` of the pixels satisfy `pred`.
template <class Pred>
int lines_where(const Image& img, int y0, int y1, double share, Pred&& pred) {
  int n = 0;
  for (int y = std::max(0, y0); y < std::min(img.h, y1); ++y) {
    int c = 0;
    for (int x = 0; x < img.w; ++x) c += pred(img.at(x, y));
    n += c >= share * img.w;
  }
  return n;
}

// Separate bands of table header colour (ImGui dark: TableHeaderBg (48,48,51)).
int header_bands(const Image& img) {
  int bands = 0;
  bool in = false;
  for (int y = 0; y < img.h; ++y) {
    int c = 0;
    for (int x = 0; x < img.w; ++x) c += near(img.at(x, y), {48, 48, 51}, 3);
    const bool line = c >= 0.6 * img.w;
    if (line && !in) ++bands;
    in = line;
  }
  return bands;
}

int pixels_near(const Image& img, Rgb colour, int tol, int y0 = 0) {
  int n = 0;
  for (int y = y0; y < img.h; ++y)
    for (int x = 0; x < img.w; ++x) n += near(img.at(x, y), colour, tol);
  return n;
}

void expect_picture(const Image& img, int w, int h) {
  EXPECT_EQ(img.w, w);
  EXPECT_EQ(img.h, h);
  EXPECT_GT(distinct_colours(img), 60u) << "the picture looks blank";
}

TEST_F(ViewerE2E, SummaryView) {
  const Image img = shoot("summary");
  if (img.px.empty()) return;
  expect_picture(img, 1100, 720);
  EXPECT_EQ(selected_tab(img), 0);
  // Text in the lower half (the summary rows): many light pixels, no coloured frames.
  EXPECT_GT(pixels_near(img, {255, 255, 255}, 40, img.h / 3), 1500);
  EXPECT_EQ(lines_where(img, img.h / 2, img.h, 0.5, [](Rgb c) { return chroma(c) > 50; }), 0);
}

TEST_F(ViewerE2E, TimelineView) {
  const Image img = shoot("timeline");
  if (img.px.empty()) return;
  expect_picture(img, 1100, 720);
  EXPECT_EQ(selected_tab(img), 1);
  // The heap line, the RSS line and the high-water mark in the plot (below the legend).
  EXPECT_GT(pixels_near(img, {86, 180, 250}, 12, img.h / 5), 400) << "heap line";
  EXPECT_GT(pixels_near(img, {250, 170, 60}, 12, img.h / 5), 300) << "RSS line";
  EXPECT_GT(pixels_near(img, {255, 80, 80}, 12, img.h / 5), 20) << "peak mark";
}

TEST_F(ViewerE2E, FlamegraphView) {
  const Image img = shoot("flamegraph");
  if (img.px.empty()) return;
  expect_picture(img, 1100, 720);
  EXPECT_EQ(selected_tab(img), 2);
  // Rows of frames spanning most of the width in the lower part: at least five rows' worth.
  const int rows = lines_where(img, img.h / 4, img.h, 0.6, [](Rgb c) { return chroma(c) > 50; });
  EXPECT_GT(rows, 5 * 18) << "frame rows";
}

TEST_F(ViewerE2E, FlamegraphBottomUpWithSearch) {
  const Image img = shoot("flamegraph", "--direction bottom-up --search handle_request --metric peak");
  if (img.px.empty()) return;
  expect_picture(img, 1100, 720);
  // Matches are drawn in the search colour (255,0,200).
  EXPECT_GT(pixels_near(img, {255, 0, 200}, 10), 500);
}

TEST_F(ViewerE2E, FlamegraphFollowsATimeSelection) {
  // Allocated in 0.5 s .. 1.5 s and still live at 1.5 s: the worker's session cache.
  const Image img = shoot("flamegraph", "--select 0.5s:1.5s --metric live");
  if (img.px.empty()) return;
  expect_picture(img, 1100, 720);
  EXPECT_EQ(selected_tab(img), 2);
  EXPECT_GT(lines_where(img, img.h / 4, img.h, 0.6, [](Rgb c) { return chroma(c) > 50; }), 5 * 18);
}

TEST_F(ViewerE2E, CompareWithItselfShowsNoDifference) {
  const Image img = shoot("compare", "--baseline " + *trace_);
  if (img.px.empty()) return;
  expect_picture(img, 1100, 720);
  EXPECT_EQ(selected_tab(img), 5);
  // Equal frames are grey (diff_colour: no hue); none red, none blue.
  const int grey_rows = lines_where(img, img.h / 3, img.h, 0.6, [](Rgb c) { return chroma(c) < 8 && c.r > 80 && c.r < 130; });
  const int coloured_rows = lines_where(img, img.h / 3, img.h, 0.6, [](Rgb c) { return chroma(c) > 60; });
  EXPECT_GT(grey_rows, 3 * 18);
  EXPECT_EQ(coloured_rows, 0);
}

TEST_F(ViewerE2E, FlamegraphOfAnonymousMappings) {
  // exact_workload maps and unmaps anonymous memory in mappings() (and uses a custom pool).
  const std::string trace = (*dir_ / "exact.mtide").string();
  ASSERT_EQ(run(std::string(MT_WRAPPER) + " run -o " + trace + " -- " + MT_EXACT + " > " + trace + ".log 2>&1"), 0);
  const Image mm = shoot("flamegraph", "--domain mmap --search mappings", 1100, 720, trace);
  const Image heap = shoot("flamegraph", "--search mappings", 1100, 720, trace);
  if (heap.px.empty() || mm.px.empty()) return;
  expect_picture(mm, 1100, 720);
  EXPECT_EQ(selected_tab(mm), 2);
  // mappings() makes every mapping and no heap block: found (search colour, a full-width
  // frame) only in the mmap domain's flamegraph.
  EXPECT_GT(pixels_near(mm, {255, 0, 200}, 10), 10000);
  EXPECT_EQ(pixels_near(heap, {255, 0, 200}, 10), 0);
}

TEST_F(ViewerE2E, TimelineLegendNamesMappedBytes) {
  // exact_workload makes anonymous mappings: the timeline has a mapped line (cyan) and its
  // legend entry. Its few pages stay at the bottom of a 64 MiB axis, under the heap's line,
  // so the legend's swatch is what shows here (the line is tested on the timeline model).
  const std::string trace = (*dir_ / "exact-timeline.mtide").string();
  ASSERT_EQ(run(std::string(MT_WRAPPER) + " run -o " + trace + " -- " + MT_EXACT + " > " + trace + ".log 2>&1"), 0);
  const Image img = shoot("timeline", "", 1100, 720, trace);
  if (img.px.empty()) return;
  expect_picture(img, 1100, 720);
  const int swatch = pixels_near(img, {70, 215, 215}, 12) - pixels_near(img, {70, 215, 215}, 12, img.h / 5);
  EXPECT_GT(swatch, 40) << "mapped legend entry";
}

TEST_F(ViewerE2E, LeaksView) {
  const Image img = shoot("leaks");
  if (img.px.empty()) return;
  expect_picture(img, 1100, 720);
  EXPECT_EQ(selected_tab(img), 3);
  EXPECT_EQ(header_bands(img), 2) << "the leaks table and the stack of the selected row";
}

TEST_F(ViewerE2E, TreeView) {
  const Image img = shoot("tree");
  if (img.px.empty()) return;
  expect_picture(img, 1100, 720);
  EXPECT_EQ(selected_tab(img), 4);
  EXPECT_EQ(header_bands(img), 1);
  // Many rows of text in the table.
  const int text_lines = lines_where(img, img.h / 4, img.h, 0.02, [](Rgb c) { return c.r > 200 && c.g > 200 && c.b > 200; });
  EXPECT_GT(text_lines, 80);
}

TEST_F(ViewerE2E, GrowthViewStacksTheLeakOverTheCache) {
  // tests/cli/programs/soak: a slow leak (growing: the first warm layer, red), a cache that
  // fills and holds (a cool layer, blue), churn.
  const std::string trace = (*dir_ / "soak.mtide").string();
  ASSERT_EQ(run(std::string(MT_WRAPPER) + " run -o " + trace + " -- " + MT_SOAK + " --seconds 3 > " + trace + ".log 2>&1"), 0);
  const Image img = shoot("growth", "", 1100, 720, trace);
  if (img.px.empty()) return;
  expect_picture(img, 1100, 720);
  EXPECT_EQ(selected_tab(img), 6);
  // The areas: the leak's layer, the first warm colour (235,80,70), at the bottom; the cache's, a
  // cool one (the second layer: (80,190,160)), above it.
  EXPECT_GT(pixels_near(img, {235, 80, 70}, 10, img.h / 5), 3000) << "the growing stack's layer";
  EXPECT_GT(pixels_near(img, {80, 190, 160}, 10, img.h / 5), 3000) << "the cache's layer";
  // The table under the chart.
  EXPECT_EQ(header_bands(img), 1);
}

TEST_F(ViewerE2E, SizesViewDrawsTheHistogramOfAllocationSizes) {
  const Image img = shoot("sizes");
  if (img.px.empty()) return;
  expect_picture(img, 1100, 720);
  EXPECT_EQ(selected_tab(img), 7);
  // Below the timeline strip (whose heap and RSS lines have the same colours): the bars of the
  // allocations' shares (heap blue) and of the bytes' (RSS orange), then the table of classes.
  const int top = img.h / 4;
  EXPECT_GT(pixels_near(img, {86, 180, 250}, 12, top), 3000) << "allocation bars";
  EXPECT_GT(pixels_near(img, {250, 170, 60}, 12, top), 3000) << "byte bars";
  EXPECT_EQ(header_bands(img), 1) << "the table of classes";
}

TEST_F(ViewerE2E, LeaksViewWithSuppressions) {
  // Every leak of the worker suppressed (its module's name): the table lists none.
  const std::string supp = (*dir_ / "all.supp").string();
  std::ofstream(supp) << "leak:*\n";
  const Image img = shoot("leaks", "--suppressions " + supp);
  if (img.px.empty()) return;
  expect_picture(img, 1100, 720);
  EXPECT_EQ(selected_tab(img), 3);
  EXPECT_EQ(header_bands(img), 1) << "the leaks table, and no stack: no row to select";
  const std::string bad = (*dir_ / "bad.supp").string();
  std::ofstream(bad) << "not a suppression\n";
  EXPECT_EQ(run(std::string(MT_VIEW) + " --screenshot " + (*dir_ / "x.png").string() + " --suppressions " + bad + " " +
                *trace_ + " 2>/dev/null"),
            2);
}

TEST_F(ViewerE2E, LoadingScreenShowsProgress) {
  // The second frame, long before the trace is read: no tab bar yet, but the progress bar
  // (its frame in the dark style's FrameBg over the window: (29,47,73)).
  const Image img = shoot("summary", "--capture-frame 2");
  if (img.px.empty()) return;
  EXPECT_EQ(img.w, 1100);
  EXPECT_EQ(selected_tab(img), -1);
  EXPECT_GT(pixels_near(img, {29, 47, 73}, 6), 2000) << "the progress bar's frame";
}

TEST_F(ViewerE2E, SizeOptionAndLightTheme) {
  const Image img = shoot("summary", "--theme light", 640, 480);
  if (img.px.empty()) return;
  expect_picture(img, 640, 480);
  // Light theme: mostly light background.
  EXPECT_GT(lines_where(img, 0, img.h, 0.5, [](Rgb c) { return c.r > 200 && c.g > 200 && c.b > 200; }), img.h / 2);
}

TEST_F(ViewerE2E, MissingFileExitsWithStatus2AndOneLine) {
  ASSERT_TRUE(have_xvfb_run()) << "xvfb-run is missing (install xvfb and xauth: scripts/setup)";
  const std::string log = (*dir_ / "missing.log").string();
  const int st = run(xvfb_run() + std::string(MT_VIEW) + " --screenshot " + (*dir_ / "x.png").string() + " " +
                     (*dir_ / "nope.mtide").string() + " 2> " + log);
  EXPECT_EQ(st, 2);
  std::ifstream in(log);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("memtide-view: ", 0), 0u) << lines[0];
  // Without a display the answer is still about the file, before any window is tried.
  const std::string nope = (*dir_ / "nope.mtide").string();
  const int st2 = run("env -u DISPLAY -u WAYLAND_DISPLAY " + std::string(MT_VIEW) + " " + nope + " 2> " + log);
  EXPECT_EQ(st2, 2);
  std::ifstream in2(log);
  std::string line, rest;
  std::getline(in2, line);
  EXPECT_EQ(line, "memtide-view: cannot open " + nope + ": No such file or directory");
  EXPECT_FALSE(std::getline(in2, rest)) << rest;
}

}  // namespace
