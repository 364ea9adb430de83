// Leaks table, tree table, callers/callees and comparison models on a synthetic trace whose
// every number is known (tests/viewer/synthetic_trace.h, standard_program).
#include <gtest/gtest.h>

#include <memory>

#include "analysis/calltree.h"
#include "analysis/replay.h"
#include "analysis/symbols.h"
#include "synthetic_trace.h"
#include "analysis/suppressions.h"
#include "formats/sampling.h"
#include "tests/trace_builder.h"
#include "viewer/compare_model.h"
#include "viewer/diff_model.h"
#include "viewer/leaks_model.h"
#include "viewer/summary_model.h"
#include "viewer/tree_model.h"

namespace memtide::viewer {
namespace {

constexpr unsigned kHeap = static_cast<unsigned>(analysis::Domain::Heap);

using analysis::Metric;

std::string label(uint64_t ip) {
  analysis::Frame f;
  f.offset = ip;
  return analysis::frame_label(f);
}

struct Loaded {
  std::unique_ptr<analysis::Model> model;
  std::unique_ptr<analysis::Symbolizer> sym;
};

Loaded load(const std::vector<uint8_t>& bytes, const analysis::ReplayOptions& o = {}) {
  Loaded l;
  auto r = analysis::analyze_memory(bytes, o);
  EXPECT_TRUE(r.ok()) << r.error;
  l.model = std::move(r.model);
  l.sym = std::make_unique<analysis::Symbolizer>(*l.model);
  return l;
}

Loaded standard() {
  static std::vector<uint8_t> bytes = [] {
    test::Synthetic s;
    return test::standard_program(s).end(40 * test::kMs);
  }();
  return load(bytes);
}

std::shared_ptr<const analysis::CallTree> tree(Loaded& l, Metric m, bool bottom_up) {
  auto t = std::make_shared<analysis::CallTree>();
  t->build(*l.model, *l.sym, analysis::Domain::Heap, m, bottom_up);
  return t;
}

TEST(Leaks, RowsByBytesWithStacksSiteFirst) {
  Loaded l = standard();
  const LeaksData d = make_leaks(*l.model, *l.sym);
  ASSERT_EQ(d.rows.size(), 2u);
  EXPECT_EQ(d.total_bytes, 150u);
  EXPECT_EQ(d.total_blocks, 2u);
  EXPECT_EQ(d.rows[0].bytes, 100u);  // leaf_a's third block
  EXPECT_EQ(d.rows[0].stack, 3u);
  EXPECT_EQ(d.rows[0].first, 12 * test::kMs);
  ASSERT_EQ(d.rows[0].frames.size(), 3u);
  EXPECT_EQ(d.rows[0].frames[0].function, label(0x3000));
  EXPECT_EQ(d.rows[0].frames[2].function, label(0x1000));
  EXPECT_EQ(d.rows[0].site, label(0x3000));
  EXPECT_EQ(d.rows[1].bytes, 50u);
  EXPECT_EQ(d.rows[1].first, 1 * test::kMs);
}

LeaksData table() {
  LeaksData d;
  auto row = [&](uint64_t bytes, uint64_t blocks, uint64_t first, std::string site, std::string module) {
    LeakRow r;
    r.bytes = bytes;
    r.blocks = blocks;
    r.first = r.last = first;
    r.site = site;
    r.module = module;
    r.frames.push_back({site, "x.cpp:1", "/usr/lib/" + module, false});
    r.frames.push_back({"main", "main.cpp:9", "/usr/bin/prog", false});
    d.rows.push_back(std::move(r));
  };
  row(300, 1, 5, "alpha", "liba.so");
  row(100, 7, 1, "Beta", "libb.so");
  row(200, 2, 9, "gamma", "libc.so.6");
  return d;
}

std::vector<std::string> sites(const LeaksData& d, const std::vector<uint32_t>& idx) {
  std::vector<std::string> v;
  for (uint32_t i : idx) v.push_back(d.rows[i].site);
  return v;
}

TEST(Leaks, OfEachDomain) {
  test::Synthetic s;
  Loaded l = load(test::program_with_domains(s).end(40 * test::kMs));
  const LeaksData heap = make_leaks(*l.model, *l.sym);
  EXPECT_EQ(heap.total_bytes, 150u);
  const LeaksData mm = make_leaks(*l.model, *l.sym, analysis::Domain::Mmap);
  ASSERT_EQ(mm.rows.size(), 1u);
  EXPECT_EQ(mm.rows[0].bytes, 65536u);
  EXPECT_EQ(mm.rows[0].blocks, 1u);
  EXPECT_EQ(mm.rows[0].site, label(0x6000));
  const LeaksData cu = make_leaks(*l.model, *l.sym, analysis::Domain::Custom);
  ASSERT_EQ(cu.rows.size(), 1u);
  EXPECT_EQ(cu.rows[0].bytes, 256u);
  EXPECT_EQ(cu.rows[0].site, label(0x7000));
}

TEST(Leaks, LeakScanClassesAndHidingStillReachableRows) {
  test::Synthetic s;
  s.stack(1, 0, {0x1000}).stack(2, 0, {0x2000}).stack(3, 0, {0x3000});
  s.malloc(1 * test::kMs, 0x10000, 100, 1)   // held by a root: reachable
      .malloc(2 * test::kMs, 0x20000, 40, 2)  // lost: definite
      .malloc(3 * test::kMs, 0x30000, 8, 3)   // only the lost block points to it: indirect
      .malloc(4 * test::kMs, 0x30100, 8, 3);  // a root points to it: reachable
  // The brk heap holds the blocks; a root region points to the first and the last.
  s.scan(fmt::ScanKind::Root, 0x500000, 0x501000, {{0x500000, 0x10000}, {0x500008, 0x30100}});
  Loaded l = load(s.end(10 * test::kMs));
  const LeaksData d = make_leaks(*l.model, *l.sym);
  ASSERT_TRUE(d.scanned);
  ASSERT_EQ(d.rows.size(), 3u);
  EXPECT_EQ(d.reachable_bytes, 108u);
  EXPECT_EQ(d.indirect_bytes, 0u);  // (the lost block's words were not in the scan)
  std::vector<std::string> kinds;
  for (const LeakRow& r : d.rows) kinds.push_back(leak_kind(d, r));
  EXPECT_EQ(kinds, (std::vector<std::string>{"reachable", "definite", "1 definite, 1 reachable"}));
  const auto shown = filter_and_sort_leaks(d, "", LeakColumn::Bytes, false, /*hide_reachable=*/true);
  ASSERT_EQ(shown.size(), 2u);
  EXPECT_EQ(d.rows[shown[0]].bytes, 40u);
  EXPECT_EQ(d.rows[shown[1]].bytes, 16u);
  // Without a scan: no classes.
  EXPECT_TRUE(leak_kind(table(), table().rows[0]).empty());
}

TEST(Leaks, SortsByEveryColumnBothWays) {
  const LeaksData d = table();
  using V = std::vector<std::string>;
  EXPECT_EQ(sites(d, filter_and_sort_leaks(d, "", LeakColumn::Bytes, false)), (V{"alpha", "gamma", "Beta"}));
  EXPECT_EQ(sites(d, filter_and_sort_leaks(d, "", LeakColumn::Bytes, true)), (V{"Beta", "gamma", "alpha"}));
  EXPECT_EQ(sites(d, filter_and_sort_leaks(d, "", LeakColumn::Blocks, false)), (V{"Beta", "gamma", "alpha"}));
  EXPECT_EQ(sites(d, filter_and_sort_leaks(d, "", LeakColumn::First, true)), (V{"Beta", "alpha", "gamma"}));
  EXPECT_EQ(sites(d, filter_and_sort_leaks(d, "", LeakColumn::Site, true)), (V{"Beta", "alpha", "gamma"}));
  EXPECT_EQ(sites(d, filter_and_sort_leaks(d, "", LeakColumn::Module, false)), (V{"gamma", "Beta", "alpha"}));
}

TEST(Leaks, FilterMatchesAnyFrameCaseInsensitively) {
  const LeaksData d = table();
  using V = std::vector<std::string>;
  EXPECT_EQ(sites(d, filter_and_sort_leaks(d, "BETA", LeakColumn::Bytes, false)), (V{"Beta"}));
  EXPECT_EQ(sites(d, filter_and_sort_leaks(d, "libc.so", LeakColumn::Bytes, false)), (V{"gamma"}));
  EXPECT_EQ(filter_and_sort_leaks(d, "main.cpp", LeakColumn::Bytes, false).size(), 3u);
  EXPECT_TRUE(filter_and_sort_leaks(d, "nothing", LeakColumn::Bytes, false).empty());
}

TEST(Leaks, SuppressionLineNamesTheChosenFrame) {
  LeakRow r;
  r.site = "std::vector<int>::_M_realloc_insert";
  r.frames = {{"std::vector<int>::_M_realloc_insert", "", "/usr/lib/libstdc++.so.6", false},
              {"Cache::add(int*)", "cache.cpp:12", "/usr/bin/prog", false},
              {"libfoo.so+0x1234", "+0x1234", "/opt/libfoo.so", false}};
  EXPECT_EQ(suggested_frame(r.frames), 1u);
  EXPECT_EQ(suppression_line(r, 1), "leak:Cache::add(int*)");
  EXPECT_EQ(suppression_line(r, 0), "leak:std::vector<int>::_M_realloc_insert");
  EXPECT_EQ(suppression_line(r, 2), "leak:libfoo.so");  // no function: the module
}

// A widespread function (an allocation wrapper: redis's zmalloc) is not suggested: the line
// would hide every leak. The next program frame is, and the reach of each line says what else
// it matches.
TEST(Leaks, SuggestionSkipsAWrapperInMostAllocations) {
  LeaksData d;
  LeakRow a, b;
  a.bytes = 100;
  a.frames = {{"malloc", "", "/lib/libc.so.6", false, 1.0, true},
              {"zmalloc", "zmalloc.c:10", "/usr/bin/redis-server", false, 0.97, true},
              {"createClient", "networking.c:99", "/usr/bin/redis-server", false, 0.02, false},
              {"main", "server.c:1", "/usr/bin/redis-server", false, 1.0, true}};
  b.bytes = 40;
  b.frames = {{"zmalloc", "zmalloc.c:10", "/usr/bin/redis-server", false, 0.97, true},
              {"dictCreate", "dict.c:5", "/usr/bin/redis-server", false, 0.10, false},
              {"main", "server.c:1", "/usr/bin/redis-server", false, 1.0, true}};
  d.rows = {a, b};
  EXPECT_EQ(suggested_frame(d.rows[0].frames), 2u);
  EXPECT_EQ(suppression_line(d.rows[0], 2), "leak:createClient");
  const SuppressionReach only = suppression_reach(d, d.rows[0], 2);
  EXPECT_EQ(only.other_rows, 0u);
  const SuppressionReach wrapper = suppression_reach(d, d.rows[0], 1);
  EXPECT_EQ(wrapper.other_rows, 1u);
  EXPECT_EQ(wrapper.other_bytes, 40u);
  EXPECT_GT(wrapper.share, 0.9);
  // Every program frame widespread: the first one, as before.
  LeakRow c;
  c.frames = {{"malloc", "", "/lib/libc.so.6", false, 1.0, true}, {"work", "w.c:1", "/bin/w", false, 1.0, true}};
  EXPECT_EQ(suggested_frame(c.frames), 1u);
}

// FunctionSpread counts each function once per stack, weighted by the stack's allocations; a
// frame without a name (the synthetic program's addresses lie in no module) counts as its
// module, here none.
TEST(Leaks, FunctionSpreadIsTheShareOfAllocations) {
  Loaded l = standard();
  const analysis::FunctionSpread spread(*l.model, *l.sym);
  analysis::Frame f;
  EXPECT_EQ(spread.share(f), 0.0);
  EXPECT_EQ(spread.share("no_such_function"), 0.0);
  const LeaksData d = make_leaks(*l.model, *l.sym);
  ASSERT_FALSE(d.rows.empty());
  for (const LeakFrame& lf : d.rows[0].frames) EXPECT_EQ(lf.share, 0.0);
}

TEST(TreeTable, EveryMetricPerNode) {
  Loaded l = standard();
  std::array<std::shared_ptr<const analysis::CallTree>, kMetricCount> trees;
  for (unsigned m = 0; m < kMetricCount; ++m) trees[m] = tree(l, static_cast<Metric>(m), false);
  const TreeTable t = make_tree_table(trees);
  auto node = [&](std::initializer_list<uint64_t> path) -> const TableNode* {
    uint32_t n = 0;
    for (uint64_t ip : path) {
      uint32_t found = UINT32_MAX;
      for (uint32_t c : t.nodes[n].children)
        if (t.nodes[c].label == label(ip)) found = c;
      if (found == UINT32_MAX) return nullptr;
      n = found;
    }
    return &t.nodes[n];
  };
  const unsigned A = static_cast<unsigned>(Metric::Allocated), C = static_cast<unsigned>(Metric::Count),
                 L = static_cast<unsigned>(Metric::Leaked), P = static_cast<unsigned>(Metric::Peak);
  EXPECT_EQ(t.nodes[0].total[A], 1350u);
  const TableNode* work = node({0x1000, 0x2000});
  ASSERT_TRUE(work);
  EXPECT_EQ(work->total[A], 1300u);
  EXPECT_EQ(work->total[C], 4u);
  EXPECT_EQ(work->total[L], 100u);
  EXPECT_EQ(work->total[P], 1300u);
  EXPECT_EQ(work->self[A], 0u);
  const TableNode* a = node({0x1000, 0x2000, 0x3000});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->self[A], 300u);
  EXPECT_EQ(a->self[L], 100u);
  const TableNode* init = node({0x1000, 0x5000});
  ASSERT_TRUE(init);
  EXPECT_EQ(init->total[L], 50u);
}

TEST(TreeTable, SortByAnyColumn) {
  Loaded l = standard();
  std::array<std::shared_ptr<const analysis::CallTree>, kMetricCount> trees;
  for (unsigned m = 0; m < kMetricCount; ++m) trees[m] = tree(l, static_cast<Metric>(m), true);
  const TreeTable t = make_tree_table(trees);  // bottom-up: leaf_b 1000, leaf_a 300, init 50
  auto first_level = [&](TreeSort s) {
    const TreeOrder o = sort_tree(t, s);
    std::vector<std::string_view> v;
    for (std::size_t k = 0; k < t.nodes[0].children.size(); ++k) v.push_back(t.nodes[o.children[o.first[0] + k]].label);
    return v;
  };
  using V = std::vector<std::string_view>;
  const std::string a = label(0x3000), b = label(0x4000), i = label(0x5000);
  EXPECT_EQ(first_level({Metric::Allocated, false, false, false}), (V{b, a, i}));
  EXPECT_EQ(first_level({Metric::Allocated, false, false, true}), (V{i, a, b}));
  EXPECT_EQ(first_level({Metric::Count, false, false, false}), (V{a, b, i}));
  EXPECT_EQ(first_level({Metric::Leaked, false, false, false}), (V{a, i, b}));
  EXPECT_EQ(first_level({Metric::Leaked, true, true, true}), (V{a, b, i}));  // by label
}

TEST(TreeTable, CallersAndCallees) {
  Loaded l = standard();
  std::array<std::shared_ptr<const analysis::CallTree>, kMetricCount> trees;
  for (unsigned m = 0; m < kMetricCount; ++m) trees[m] = tree(l, static_cast<Metric>(m), false);
  const TreeTable t = make_tree_table(trees);
  const FunctionRelatives r = function_relatives(t, label(0x2000), Metric::Allocated);
  const unsigned A = static_cast<unsigned>(Metric::Allocated);
  EXPECT_EQ(r.total[A], 1300u);
  ASSERT_EQ(r.callers.size(), 1u);
  EXPECT_EQ(r.callers[0].label, label(0x1000));
  ASSERT_EQ(r.callees.size(), 2u);
  EXPECT_EQ(r.callees[0].label, label(0x4000));
  EXPECT_EQ(r.callees[0].value[A], 1000u);
  EXPECT_EQ(r.callees[1].value[A], 300u);
  const FunctionRelatives top = function_relatives(t, label(0x1000), Metric::Allocated);
  ASSERT_EQ(top.callers.size(), 1u);
  EXPECT_EQ(top.callers[0].label, "(root)");
}

TEST(Compare, DiffFlameAndSites) {
  Loaded after = standard();
  test::Synthetic s;  // the baseline: only init (50) and leaf_a once (100)
  s.stack(1, 0, {0x1000}).stack(2, 1, {0x2000}).stack(3, 2, {0x3000}).stack(5, 1, {0x5000});
  s.malloc(1 * test::kMs, 0x10000, 50, 5).malloc(2 * test::kMs, 0x20000, 100, 3);
  Loaded before = load(s.end(10 * test::kMs));
  const auto bt = tree(before, Metric::Allocated, false), at = tree(after, Metric::Allocated, false);
  const FlameTree d = make_diff_flame(bt, at);
  EXPECT_TRUE(d.is_diff);
  EXPECT_EQ(d.after(d.nodes[0]), 1350u);
  EXPECT_EQ(d.before(d.nodes[0]), 150u);
  bool saw_b = false;
  for (const FlameNode& n : d.nodes)
    if (n.label == label(0x4000)) {
      saw_b = true;
      EXPECT_EQ(d.before(n), 0u);
      EXPECT_EQ(d.after(n), 1000u);
    }
  EXPECT_TRUE(saw_b);
  const FlameTree old_shape = make_diff_flame(bt, at, true);
  EXPECT_EQ(old_shape.nodes[0].value, 150u);
  EXPECT_EQ(old_shape.after(old_shape.nodes[0]), 1350u);

  const auto rows = diff_sites(*tree(before, Metric::Allocated, true), *tree(after, Metric::Allocated, true));
  ASSERT_EQ(rows.size(), 3u);
  const auto order = filter_and_sort_diff(rows, "", DiffColumn::Delta, false);
  EXPECT_EQ(rows[order[0]].label, label(0x4000));  // +1000
  EXPECT_EQ(rows[order[0]].delta(), 1000);
  EXPECT_EQ(rows[order[1]].label, label(0x3000));  // +200
  EXPECT_EQ(rows[order[2]].delta(), 0);            // init unchanged
}

// The baseline of the comparison tests: init (50 bytes at 1 ms), leaf_a at 2 ms and 11 ms.
const std::vector<uint8_t>& baseline_bytes() {
  static std::vector<uint8_t> bytes = [] {
    test::Synthetic s;
    s.stack(1, 0, {0x1000}).stack(2, 1, {0x2000}).stack(3, 2, {0x3000}).stack(5, 1, {0x5000});
    s.malloc(1 * test::kMs, 0x10000, 50, 5).malloc(2 * test::kMs, 0x20000, 100, 3).malloc(11 * test::kMs, 0x20100, 100, 3);
    return s.end(20 * test::kMs);
  }();
  return bytes;
}

// The main trace's view of a window, as the loader builds it (every metric, both directions).
ViewData view_of(Loaded& l, TimeRange window) {
  ViewData v;
  v.window = window;
  v.model = std::shared_ptr<const analysis::Model>(std::move(l.model));
  for (unsigned m = 0; m < kMetricCount; ++m)
    for (unsigned d = 0; d < 2; ++d) {
      auto t = std::make_shared<analysis::CallTree>();
      t->build(*v.model, *l.sym, analysis::Domain::Heap, static_cast<Metric>(m), d == 1);
      v.trees[m][d] = std::move(t);
    }
  return v;
}

analysis::ReplayOptions window_options(TimeRange r) {
  analysis::ReplayOptions o;
  o.from = r.from;
  o.to = r.to;
  o.at = r.to;
  return o;
}

TEST(Compare, WholeTracesWithoutASelection) {
  Loaded after = standard();
  Loaded before = load(baseline_bytes());
  const BaselineView b = make_baseline_view(std::move(before.model), *before.sym, {});
  const CompareData c = make_compare("base.mtide", b, view_of(after, {}));
  ASSERT_TRUE(c.complete);
  EXPECT_TRUE(c.window.empty());
  const unsigned A = static_cast<unsigned>(Metric::Allocated);
  ASSERT_TRUE(c.flames[kHeap][A][0] && c.sites[kHeap][A]);
  EXPECT_EQ(c.flames[kHeap][A][0]->before(c.flames[kHeap][A][0]->nodes[0]), 250u);
  EXPECT_EQ(c.flames[kHeap][A][0]->after(c.flames[kHeap][A][0]->nodes[0]), 1350u);
  EXPECT_EQ(c.model->heap().allocated_bytes, 250u);
  EXPECT_EQ(c.after->heap().allocated_bytes, 1350u);
}

TEST(Compare, FollowsTheSelectionInBothTraces) {
  // 5 ms .. 15 ms: this trace allocates leaf_a three times (300 bytes, all live at 15 ms), the
  // baseline once (100 bytes, live); init and leaf_b fall outside in both.
  const TimeRange w{5 * test::kMs, 15 * test::kMs};
  test::Synthetic s;
  Loaded after = load(test::standard_program(s).end(40 * test::kMs), window_options(w));
  Loaded before = load(baseline_bytes(), window_options(w));
  const BaselineView b = make_baseline_view(std::move(before.model), *before.sym, w);
  const CompareData c = make_compare("base.mtide", b, view_of(after, w));
  ASSERT_TRUE(c.complete);
  EXPECT_EQ(c.window, w);
  EXPECT_EQ(c.model->heap().allocated_bytes, 100u);
  EXPECT_EQ(c.after->heap().allocated_bytes, 300u);
  for (Metric m : {Metric::Allocated, Metric::LiveAt}) {
    const unsigned mi = static_cast<unsigned>(m);
    ASSERT_TRUE(c.flames[kHeap][mi][0] && c.flames[kHeap][mi][1] && c.sites[kHeap][mi]) << metric_name(m);
    const FlameTree& t = *c.flames[kHeap][mi][0];
    EXPECT_EQ(t.before(t.nodes[0]), 100u) << metric_name(m);
    EXPECT_EQ(t.after(t.nodes[0]), 300u) << metric_name(m);
    ASSERT_EQ(c.sites[kHeap][mi]->size(), 1u) << "only leaf_a allocated in the range";
    EXPECT_EQ((*c.sites[kHeap][mi])[0].label, label(0x3000));
    EXPECT_EQ((*c.sites[kHeap][mi])[0].delta(), 200);
  }
  const unsigned L = static_cast<unsigned>(Metric::Leaked);
  ASSERT_TRUE(c.flames[kHeap][L][0]);
  EXPECT_EQ(c.flames[kHeap][L][0]->before(c.flames[kHeap][L][0]->nodes[0]), 100u);  // the baseline never frees
  // Not freed by the range's end: all three (two are freed later, after it).
  EXPECT_EQ(c.flames[kHeap][L][0]->after(c.flames[kHeap][L][0]->nodes[0]), 300u);
}

TEST(Compare, MetricsNotBuiltInTheViewAreLeftOut) {
  Loaded after = standard();
  Loaded before = load(baseline_bytes());
  const BaselineView b = make_baseline_view(std::move(before.model), *before.sym, {});
  ViewData v = view_of(after, {});
  const unsigned P = static_cast<unsigned>(Metric::Peak);
  v.trees[P] = {};
  const CompareData c = make_compare("base.mtide", b, v);
  EXPECT_FALSE(c.flames[kHeap][P][0]);
  EXPECT_FALSE(c.sites[kHeap][P]);
  EXPECT_TRUE(c.sites[kHeap][static_cast<unsigned>(Metric::Allocated)]);
}

TEST(Summary, ProcessTotalsAndLeaks) {
  Loaded l = standard();
  const SummaryData d = make_summary(*l.model, "/tmp/x.mtide");
  EXPECT_EQ(d.title, "synthetic (pid 4242)");
  auto find = [&](const std::string& label) -> const SummaryRow* {
    for (const auto& sec : d.sections)
      for (const auto& r : sec.rows)
        if (r.label == label) return &r;
    return nullptr;
  };
  ASSERT_TRUE(find("command"));
  EXPECT_EQ(find("command")->value, "synthetic --work");
  EXPECT_EQ(find("duration")->value, "40.0 ms");
  EXPECT_EQ(find("ended")->value, "exit status 0");
  EXPECT_EQ(find("allocations")->value, "5 (1.32 KiB)");
  EXPECT_EQ(find("peak heap")->value, "1.32 KiB in 5 blocks at 20.0 ms");
  EXPECT_EQ(find("not freed")->value, "150 B in 2 blocks");
  EXPECT_TRUE(find("not freed")->emphasis);
  EXPECT_EQ(find("peak RSS")->value, "8.00 KiB");
  EXPECT_TRUE(d.warnings.empty());
}

// A trace of a program with its own malloc (ProcessInfo's program_malloc) is said to be one.
TEST(Summary, AProgramWithItsOwnMallocIsAWarning) {
  Loaded l = load([] {
    test::Synthetic s;
    return test::standard_program(s).end(40 * test::kMs);
  }());
  l.model->process.program_malloc = "/opt/app/bin/server";
  const SummaryData d = make_summary(*l.model, "/tmp/x.mtide");
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_EQ(d.warnings[0],
            "the program's allocations were not recorded: it has a malloc of its own, in /opt/app/bin/server");
}

// A trace without an End record reads as killed, unless a recorder still writes it: then it is
// being recorded, and the summary says so without a warning's colour.
TEST(Summary, ATraceBeingWrittenIsRecordingNotKilled) {
  Loaded l = load([] {
    test::Synthetic s;
    return test::standard_program(s).close();
  }());
  auto row = [](const SummaryData& d, const std::string& label) -> const SummaryRow* {
    for (const auto& sec : d.sections)
      for (const auto& r : sec.rows)
        if (r.label == label) return &r;
    return nullptr;
  };
  const SummaryData cut = make_summary(*l.model, "/tmp/x.mtide");
  ASSERT_TRUE(row(cut, "ended"));
  EXPECT_EQ(row(cut, "ended")->value, "no end record (killed?)");
  EXPECT_TRUE(row(cut, "ended")->emphasis);
  const SummaryData live = make_summary(*l.model, "/tmp/x.mtide", /*recording=*/true);
  EXPECT_FALSE(row(live, "ended"));
  ASSERT_TRUE(row(live, "state"));
  EXPECT_EQ(row(live, "state")->value, "still recording (the recorder holds the file)");
  EXPECT_FALSE(row(live, "state")->emphasis);
}

// A sampled trace: the summary's badge and note, every heap figure marked as an estimate, no
// temporaries; the leaks table's rows carry their samples.
TEST(Summary, ASampledTraceSaysItsFiguresAreEstimates) {
  memtide::test::TraceBuilder::Options o;
  o.sample_interval = 4096;
  memtide::test::TraceBuilder b(o);
  b.stack(1, 1, 0, {0x1000});
  const uint64_t w = fmt::sample_weight(100, 4096);
  b.sampled_malloc(1, 10, 0x10000, 100, w, 1).sampled_malloc(1, 20, 0x20000, 100, w, 1).free(1, 30, 0x10000);
  Loaded l = load(b.end(40));
  const SummaryData d = make_summary(*l.model, "/tmp/s.mtide");
  EXPECT_EQ(d.sampling_badge, "sampled, 1 in ~4.00 KiB");
  ASSERT_FALSE(d.warnings.empty());
  EXPECT_EQ(d.warnings[0], d.sampling_note);
  EXPECT_NE(d.sampling_note.find("2 samples"), std::string::npos) << d.sampling_note;
  auto find = [&](const std::string& label) -> const SummaryRow* {
    for (const auto& sec : d.sections)
      for (const auto& r : sec.rows)
        if (r.label == label) return &r;
    return nullptr;
  };
  ASSERT_TRUE(find("allocations") && find("not freed") && find("temporary") && find("sampling"));
  EXPECT_EQ(find("allocations")->value.substr(0, 1), "~") << find("allocations")->value;
  EXPECT_EQ(find("not freed")->value.substr(0, 1), "~") << find("not freed")->value;
  EXPECT_EQ(find("temporary")->value, "not known in a sampled trace");
  const LeaksData leaks = make_leaks(*l.model, *l.sym);
  EXPECT_TRUE(leaks.sampled);
  ASSERT_EQ(leaks.rows.size(), 1u);
  EXPECT_EQ(leaks.rows[0].samples, 1u);
  EXPECT_EQ(leaks.rows[0].bytes, w);
}

}  // namespace
}  // namespace memtide::viewer
