// The Leaks view's suppressions on a real program: tests/cli/programs/leaky run under `memtide
// run`, its leaks made into rows as the loader makes them, matched by a suppressions file and
// compared with what `memtide check` and `memtide report` count (analysis::count_leaks: one
// match for all three); the view, driven through ImGui without a window, hides those rows.
#include <gtest/gtest.h>
#include <imgui.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "analysis/alloc_site.h"
#include "analysis/leaks.h"
#include "analysis/replay.h"
#include "analysis/suppressions.h"
#include "analysis/symbols.h"
#include "tests/viewer/headless.h"
#include "viewer/leaks_model.h"
#include "viewer/loader.h"
#include "viewer/views.h"

namespace memtide::viewer {
namespace {

namespace fs = std::filesystem;

struct Leaky {
  fs::path dir = fs::temp_directory_path() / ("memtide-view-supp-" + std::to_string(::getpid()));
  std::unique_ptr<analysis::Model> model;
  std::unique_ptr<analysis::Symbolizer> sym;
  std::shared_ptr<const LeaksData> leaks;
  std::shared_ptr<analysis::SuppressionList> supp = std::make_shared<analysis::SuppressionList>();

  Leaky() {
    fs::create_directories(dir);
    const std::string trace = (dir / "leaky.mtide").string();
    const std::string cmd = std::string(MT_WRAPPER) + " run -q -o " + trace + " -- " + MT_LEAKY + " > " +
                            (dir / "run.log").string() + " 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    auto r = analysis::analyze_file(trace);
    EXPECT_TRUE(r.ok()) << r.error;
    if (!r.ok()) return;
    model = std::move(r.model);
    sym = std::make_unique<analysis::Symbolizer>(*model);
    leaks = std::make_shared<LeaksData>(make_leaks(*model, *sym));
    std::ofstream((dir / "leaky.supp").string()) << "leak:leak_a\nleak:inlined_leak\n";
    std::string err;
    std::vector<std::string> notes;
    EXPECT_TRUE(analysis::load_suppressions(*supp, {(dir / "leaky.supp").string()}, true, err, notes)) << err;
  }
  ~Leaky() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

Leaky& leaky() {
  static Leaky l;
  return l;
}

bool row_has(const LeakRow& r, const std::string& fn) {
  for (const LeakFrame& f : r.frames)
    if (f.function.find(fn) != std::string::npos) return true;
  return false;
}

TEST(LeakSuppressions, RowsMatchedAreThoseCheckAndReportSetApart) {
  Leaky& l = leaky();
  ASSERT_TRUE(l.leaks);
  const LeakSuppression s = suppress_leaks(*l.leaks, *l.supp);
  analysis::SuppressionList copy = *l.supp;
  const analysis::CountedLeaks c = analysis::count_leaks(*l.model, *l.sym, copy, false);
  EXPECT_EQ(s.bytes, c.suppressed_bytes);
  EXPECT_EQ(s.blocks, c.suppressed_blocks);
  EXPECT_EQ(s.rows, c.suppressed.size());
  ASSERT_EQ(s.items.size(), copy.items().size());
  for (std::size_t i = 0; i < s.items.size(); ++i) {
    EXPECT_EQ(s.items[i].stacks, copy.items()[i].stacks) << copy.items()[i].pattern;
    EXPECT_EQ(s.items[i].bytes, copy.items()[i].bytes) << copy.items()[i].pattern;
  }
  // leak_a's 500 B and leak_c's 192 B (through the inlined inlined_leak) are matched; leak_b's not.
  uint64_t a = 0, b = 0, inl = 0;
  for (std::size_t i = 0; i < l.leaks->rows.size(); ++i) {
    const LeakRow& r = l.leaks->rows[i];
    if (row_has(r, "leak_a")) a += s.suppressed(static_cast<uint32_t>(i)) ? r.bytes : 0;
    if (row_has(r, "leak_b")) b += s.suppressed(static_cast<uint32_t>(i)) ? r.bytes : 0;
    if (row_has(r, "inlined_leak")) inl += s.suppressed(static_cast<uint32_t>(i)) ? r.bytes : 0;
  }
  EXPECT_EQ(a, 500u);
  EXPECT_EQ(inl, 192u);
  EXPECT_EQ(b, 0u);
}

class HeadlessLeaks : public ::testing::Test {
 protected:
  void SetUp() override {
    headless_context();
    auto v = std::make_shared<ViewData>();
    v->leaks = leaky().leaks;
    snap.view = v;
  }
  void TearDown() override { ImGui::DestroyContext(); }
  void frame() {
    headless_frame([&] {
      analysis::Domain domain = analysis::Domain::Heap;
      Frame f{snap, loader, true, 1.0f, selection, domain};
      view.draw(f);
    });
  }
  bool listed(const std::string& fn) const {
    for (uint32_t i : view.order())
      if (row_has(leaky().leaks->rows[i], fn)) return true;
    return false;
  }

  Snapshot snap;
  Loader loader;
  TimeRange selection;
  LeaksView view;
};

TEST_F(HeadlessLeaks, SuppressedRowsAreHiddenOrShownOnRequest) {
  ASSERT_TRUE(leaky().leaks);
  frame();
  EXPECT_TRUE(listed("leak_a"));
  EXPECT_EQ(view.order().size(), leaky().leaks->rows.size());
  view.suppressions = leaky().supp;
  frame();
  EXPECT_FALSE(listed("leak_a"));
  EXPECT_FALSE(listed("inlined_leak"));
  EXPECT_TRUE(listed("leak_b"));
  EXPECT_EQ(view.order().size(), leaky().leaks->rows.size() - view.suppressed().rows);
  EXPECT_GE(view.suppressed().bytes, 692u);
  view.show_suppressed = true;
  frame();
  EXPECT_TRUE(listed("leak_a"));
  EXPECT_EQ(view.order().size(), leaky().leaks->rows.size());
}

// The Leaks view's rows are named after their allocation site past the allocation functions
// (tests/cli/programs/wrapped.c allocates through zmalloc, on the built-in list, and through
// pool_take, its own name), as `memtide report` marks it; with pool_take named (`--alloc-fn`),
// past that too. The rows' frames stay whole, from the allocation.
TEST(Leaks, RowsAreNamedAfterTheSitePastTheAllocationFunctions) {
  const fs::path dir = fs::temp_directory_path() / ("memtide-view-site-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string trace = (dir / "wrapped.mtide").string();
  const std::string cmd = std::string(MT_WRAPPER) + " run -q -o " + trace + " -- " + MT_WRAPPED + " > " + (dir / "run.log").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto r = analysis::analyze_file(trace);
  ASSERT_TRUE(r.ok()) << r.error;
  analysis::Symbolizer sym(*r.model);
  auto sites = [&] {
    std::multiset<std::string> out;
    for (const LeakRow& row : make_leaks(*r.model, sym).rows)
      if (!row.frames.empty() && row.frames[0].function == "zmalloc") out.insert(row.site);  // (not stdout's buffer)
    return out;
  };
  const std::multiset<std::string> builtin = sites();
  EXPECT_EQ(builtin.size(), 5u);
  EXPECT_EQ(builtin.count("create_object"), 3u);
  EXPECT_EQ(builtin.count("pool_take"), 2u);
  analysis::AllocFunctions::process().add("^pool_take$");
  const std::multiset<std::string> named = sites();
  analysis::AllocFunctions::process() = analysis::AllocFunctions();
  EXPECT_EQ(named.count("create_object"), 3u);
  EXPECT_EQ(named.count("load_config"), 2u);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace memtide::viewer
