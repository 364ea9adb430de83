// End to end: tests/analysis/programs/leaky and tests/programs/exact_workload run under the
// real LD_PRELOAD; memtide-cli report / check / flamegraph / summary / symbolize / diff read
// the traces. Numbers are compared with what the programs are known to have done.
#include <gtest/gtest.h>

#include <algorithm>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/analysis/e2e_util.h"

namespace memtide::test {
namespace {

using nlohmann::json;

// Traces recorded once for the whole suite.
const std::string& leaky_trace() {
  static const std::string t = [] {
    const std::string p = temp_dir() + "/leaky.mtide";
    const Proc r = record(p, MT_LEAKY);
    EXPECT_EQ(r.status, 0) << r.err;
    return p;
  }();
  return t;
}
const std::string& clean_trace() {
  static const std::string t = [] {
    const std::string p = temp_dir() + "/clean.mtide";
    const Proc r = record(p, std::string(MT_LEAKY) + " clean");
    EXPECT_EQ(r.status, 0) << r.err;
    return p;
  }();
  return t;
}

json report(const std::string& trace, const std::string& extra = "") {
  const Proc r = cli("report --json --top 1000 --frames 200 " + extra + " " + trace);
  EXPECT_EQ(r.status, 0) << r.err;
  return json::parse(r.out);
}

bool has_function(const json& stack, const std::string& fn, bool* inlined = nullptr) {
  for (const json& f : stack)
    if (f["function"].is_string() && f["function"].get<std::string>().find(fn) != std::string::npos) {
      if (inlined) *inlined = f.value("inlined", false);
      return true;
    }
  return false;
}

// Bytes and blocks of the items (leaks, peak_stacks, ...) whose stack passes through `fn`.
std::pair<uint64_t, uint64_t> by_function(const json& items, const std::string& fn) {
  uint64_t bytes = 0, count = 0;
  for (const json& it : items)
    if (has_function(it["stack"], fn)) {
      bytes += it["bytes"].get<uint64_t>();
      count += it["count"].get<uint64_t>();
    }
  return {bytes, count};
}

TEST(Report, LeaksByFunctionWithExactBytesAndBlocks) {
  const json j = report(leaky_trace());
  EXPECT_EQ(by_function(j["leaks"], "leak_a"), std::make_pair(uint64_t{500}, uint64_t{5}));
  EXPECT_EQ(by_function(j["leaks"], "leak_b"), std::make_pair(uint64_t{4000}, uint64_t{1}));
  EXPECT_EQ(by_function(j["leaks"], "leak_c"), std::make_pair(uint64_t{192}, uint64_t{3}));
  EXPECT_EQ(by_function(j["leaks"], "churn").first, 0u);
  EXPECT_TRUE(j["complete"].get<bool>());
  for (const char* k : {"total_allocations", "total_frees", "total_allocated_bytes", "peak_bytes", "peak_time_ns",
                        "leaked_bytes", "leaked_blocks", "duration_ns"})
    EXPECT_TRUE(j.contains(k)) << k;
}

TEST(Report, FramesHaveFunctionFileLineModuleAndInlinedFrames) {
  const json j = report(leaky_trace());
  bool found = false;
  for (const json& it : j["leaks"]) {
    if (!has_function(it["stack"], "leak_c")) continue;
    bool inlined = false;
    ASSERT_TRUE(has_function(it["stack"], "inlined_leak", &inlined)) << it["stack"].dump(1);
    EXPECT_TRUE(inlined);
    const json& site = it["stack"][0];
    EXPECT_NE(site["file"].get<std::string>().find("leaky.cpp"), std::string::npos);
    EXPECT_GT(site["line"].get<int>(), 0);
    EXPECT_NE(site["module"].get<std::string>().find("leaky"), std::string::npos);
    found = true;
  }
  EXPECT_TRUE(found);
}

// An address that no function of the debug information covers (the start-up code, `_start`
// from crt1.o) gets no file:line rather than the nearest line before it, which belongs to other
// code: the churn benchmark's `_start` read `_start (stl_vector.h:733)`.
TEST(Report, StartUpCodeHasNoBorrowedLine) {
  const std::string t = temp_dir() + "/churn.mtide";
  const Proc r = record(t, std::string(MT_CHURN) + " --iterations 1000");
  ASSERT_EQ(r.status, 0) << r.err;
  const Proc rep = sh("MEMTIDE_CACHE_DIR= " + std::string(MT_CLI) + " report " + t);
  ASSERT_EQ(rep.status, 0) << rep.err;
  ASSERT_NE(rep.out.find(" _start "), std::string::npos) << "the stacks reach _start\n" << rep.out;
  EXPECT_EQ(rep.out.find("_start ("), std::string::npos) << rep.out;
}

TEST(Report, TemporariesAndMismatchedFree) {
  const json j = report(leaky_trace());
  EXPECT_EQ(by_function(j["top_temporary"], "churn").second, 1000u);
  EXPECT_EQ(by_function(j["top_temporary"], "churn").first, 48000u);
  ASSERT_GE(j["mismatches"].size(), 1u);
  bool found = false;
  for (const json& m : j["mismatches"])
    if (has_function(m["stack"], "mismatch")) {
      EXPECT_EQ(m["alloc_api"], "new[]");
      EXPECT_EQ(m["free_api"], "free");
      EXPECT_EQ(m["count"], 1);
      EXPECT_EQ(m["bytes"], 32);
      found = true;
    }
  EXPECT_TRUE(found);
  const json c = report(clean_trace());
  EXPECT_EQ(c["mismatched_frees"], 0);
}

TEST(Report, TextReportShowsSectionsAndFunctions) {
  const Proc r = cli("report " + leaky_trace());
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* s : {"LEAKS", "PEAK", "ALLOCATIONS", "TEMPORARIES", "MISMATCHED FREES", "leak_a()", "leaky.cpp:"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
}

TEST(Report, WindowRestrictsToAllocationsMadeInIt) {
  const json all = report(leaky_trace());
  const json none = report(leaky_trace(), "--from 1000s");
  EXPECT_EQ(none["total_allocations"], 0);
  EXPECT_EQ(none["leaked_bytes"], 0);
  EXPECT_GT(all["total_allocations"].get<uint64_t>(), 1000u);
}

TEST(Report, LiveAtAChosenTime) {
  const json end = report(leaky_trace(), "--at 1000s");  // after the end: what leaked
  EXPECT_EQ(end["live_at"]["bytes"], end["leaked_bytes"]);
  EXPECT_EQ(end["live_at"]["blocks"], end["leaked_blocks"]);
  const json start = report(leaky_trace(), "--at 0");
  EXPECT_EQ(start["live_at"]["bytes"], 0);
  EXPECT_TRUE(report(leaky_trace())["live_at"].is_null());
  const Proc r = cli("flamegraph --metric live --at 1000s -o - " + leaky_trace());
  uint64_t sum = 0;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) sum += std::stoull(line.substr(line.rfind(' ') + 1));
  EXPECT_EQ(sum, end["leaked_bytes"].get<uint64_t>());
  EXPECT_EQ(cli("flamegraph --metric live -o - " + leaky_trace()).status, 2);  // needs --at
}

TEST(Check, FailsOnALeakingProgramAndPassesOnACleanOne) {
  const Proc bad = cli("check " + leaky_trace());
  EXPECT_EQ(bad.status, 1) << bad.out << bad.err;
  EXPECT_NE(bad.out.find("leak_b"), std::string::npos);
  EXPECT_NE(bad.out.find("FAILED"), std::string::npos);
  // Largest first: leak_b (4000 B) is listed before leak_a (500 B).
  EXPECT_LT(bad.out.find("leak_b"), bad.out.find("leak_a"));
  const Proc good = cli("check " + clean_trace());
  EXPECT_EQ(good.status, 0) << good.out << good.err;
}

TEST(Check, LimitsAreHonoured) {
  EXPECT_EQ(cli("check --max-leaked-bytes 4692 " + leaky_trace()).status, 0);
  EXPECT_EQ(cli("check --max-leaked-bytes 4691 " + leaky_trace()).status, 1);
  EXPECT_EQ(cli("check --max-leaked-blocks 9 " + leaky_trace()).status, 0);
  EXPECT_EQ(cli("check --max-leaked-blocks 8 " + leaky_trace()).status, 1);
  EXPECT_EQ(cli("check --max-peak-bytes 1 " + clean_trace()).status, 1);
}

// A broken peak limit shows what was live at the peak, by stack, largest first (as the report's
// peak section does), in the text, the JSON and the JUnit report.
TEST(Check, PeakBreachPrintsTheStacksLiveAtThePeak) {
  const json rep = report(leaky_trace());
  ASSERT_FALSE(rep["peak_stacks"].empty());
  const std::string junit = temp_dir() + "/peak.xml";
  const Proc r = cli("check --json --top 1000 --max-peak-bytes 1KiB --max-leaked-bytes 1TB --junit " + junit + " " +
                     leaky_trace());
  EXPECT_EQ(r.status, 1) << r.err;
  const json j = json::parse(r.out);
  ASSERT_TRUE(j.contains("peak_stacks")) << r.out;
  ASSERT_FALSE(j["peak_stacks"].empty());
  uint64_t sum = 0, last = UINT64_MAX;
  for (std::size_t i = 0; i < j["peak_stacks"].size(); ++i) {
    const json& s = j["peak_stacks"][i];
    EXPECT_LE(s["bytes"].get<uint64_t>(), last) << "largest first";
    last = s["bytes"].get<uint64_t>();
    sum += last;
    if (i < rep["peak_stacks"].size()) {
      EXPECT_EQ(s["stack_id"], rep["peak_stacks"][i]["stack_id"]);
    }
  }
  EXPECT_EQ(sum, j["peak_bytes"].get<uint64_t>());
  std::ifstream in(junit);
  const std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(xml.find("live at the peak"), std::string::npos) << xml;
  const Proc text = cli("check --max-peak-bytes 1KiB --max-leaked-bytes 1TB " + leaky_trace());
  EXPECT_EQ(text.status, 1);
  const std::size_t at = text.out.find("live at the peak");
  ASSERT_NE(at, std::string::npos) << text.out;
  EXPECT_NE(text.out.find("  1. ", at), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("#0 ", at), std::string::npos) << text.out;
  // Within the limit: no peak stacks.
  const json ok = json::parse(cli("check --json --max-peak-bytes 1TB --max-leaked-bytes 1TB " + leaky_trace()).out);
  ASSERT_TRUE(ok.contains("peak_stacks"));
  EXPECT_TRUE(ok["peak_stacks"].empty());
}

// A trace cut short (truncated, no End record) cannot be judged: a block not freed in it may
// have been freed after the cut. check says so and exits 2, unless --allow-incomplete; the
// readers that show what a trace holds read it up to the cut with a warning and exit 0.
TEST(Check, ATraceCutShortIsNotJudged) {
  const std::string corpus = std::string(MT_SOURCE_DIR) + "/tests/corpus/";
  const std::string cut = temp_dir() + "/leaky-cut.mtide";
  {
    const std::string whole = read_file(leaky_trace());
    std::ofstream(cut, std::ios::binary) << whole.substr(0, whole.size() * 2 / 3);
  }
  for (const std::string& t : {corpus + "header-only", corpus + "truncated-payload", cut}) {
    SCOPED_TRACE(t);
    const Proc c = cli("check " + t);
    EXPECT_EQ(c.status, 2) << c.out << c.err;
    EXPECT_NE(c.err.find("cannot judge the trace"), std::string::npos) << c.err;
    EXPECT_EQ(c.out.find("passed"), std::string::npos) << c.out;
    EXPECT_NE(cli("check --allow-incomplete --max-leaked-bytes 1TB " + t).status, 2);
    for (const char* reader : {"info", "report", "flamegraph -o - --metric count"}) {
      const Proc r = cli(std::string(reader) + " " + t);
      EXPECT_EQ(r.status, 0) << reader << "\n" << r.err;
      EXPECT_NE(r.err.find("warning"), std::string::npos) << reader << "\n" << r.err;
    }
  }
}

TEST(Check, SuppressionsHideWhatTheyMatchAndNothingElse) {
  const std::string supp = temp_dir() + "/supp.txt";
  std::ofstream(supp) << "# known\nleak:leak_a\nleak:never_matches_anything\n";
  const Proc r = cli("check --json --suppressions " + supp + " " + leaky_trace());
  EXPECT_EQ(r.status, 1) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["leaked_bytes"], 4000 + 192);
  EXPECT_EQ(j["leaked_blocks"], 4);
  bool a = false, never = false;
  for (const json& s : j["suppressions"]) {
    if (s["pattern"] == "leak:leak_a") {
      a = true;
      EXPECT_EQ(s["bytes"], 500);
      EXPECT_EQ(s["blocks"], 5);
      EXPECT_EQ(s["origin"], supp + ":2");
    }
    if (s["pattern"] == "leak:never_matches_anything") {
      never = true;
      EXPECT_EQ(s["stacks"], 0);
    }
  }
  EXPECT_TRUE(a && never);
  std::ofstream(supp) << "leak:leak_a\nleak:leak_b\nleak:inlined_leak\n";
  EXPECT_EQ(cli("check --suppressions " + supp + " " + leaky_trace()).status, 0);
}

TEST(Check, BuiltinSuppressionsCanBeTurnedOff) {
  const Proc r = cli("check --json --no-builtin-suppressions " + clean_trace());
  const json j = json::parse(r.out);
  // What the built-ins hid in the default run is now reported (libstdc++'s start-up pool, the
  // stdout buffer of printf).
  const json def = json::parse(cli("check --json " + clean_trace()).out);
  EXPECT_EQ(def["leaked_bytes"], 0);
  EXPECT_GT(def["suppressed_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["leaked_bytes"], def["suppressed_bytes"]);
  EXPECT_EQ(r.status, 1);
}

// The leak scan at exit (recorder/leak_scan.cpp, analysis/reach.h) on tests/analysis/programs/reach.
const std::string& reach_trace() {
  static const std::string t = [] {
    const std::string p = temp_dir() + "/reach.mtide";
    const Proc r = record(p, "MEMTIDE_LEAK_SCAN=1 " MT_REACH);
    EXPECT_EQ(r.status, 0) << r.err;
    return p;
  }();
  return t;
}

// Bytes and blocks of one class (definite, indirect, reachable) of the leaks through `fn`.
std::pair<uint64_t, uint64_t> leak_class(const json& leaks, const std::string& fn, const std::string& cls) {
  uint64_t bytes = 0, count = 0;
  for (const json& it : leaks)
    if (has_function(it["stack"], fn)) {
      bytes += it.at(cls + "_bytes").get<uint64_t>();
      count += it.at(cls + "_count").get<uint64_t>();
    }
  return {bytes, count};
}

TEST(LeakScan, ClassifiesDefiniteIndirectAndStillReachable) {
  const json j = report(reach_trace());
  ASSERT_TRUE(j["leak_scan"].is_object()) << j.dump(1);
  const json& l = j["leaks"];
  using P = std::pair<uint64_t, uint64_t>;
  // Pointer dropped: definite. A lost pair of pointers: the pair definite, what it held indirect.
  EXPECT_EQ(leak_class(l, "lost()", "definite"), P(500, 1));
  EXPECT_EQ(leak_class(l, "lost_pair", "definite"), P(16, 1));
  EXPECT_EQ(leak_class(l, "pair_child", "indirect"), P(48, 2));
  EXPECT_EQ(leak_class(l, "pair_child", "definite"), P(0, 0));
  // Held by a global, through a list from a global, by the main thread's thread_local, by a
  // local of a thread still running at exit: still reachable.
  EXPECT_EQ(leak_class(l, "held_by_global", "reachable"), P(200, 1));
  EXPECT_EQ(leak_class(l, "held_in_list", "reachable"), P(192, 3));
  EXPECT_EQ(leak_class(l, "held_by_tls", "reachable"), P(300, 1));
  EXPECT_EQ(leak_class(l, "held_by_thread_alloc", "reachable"), P(400, 1));
  for (const char* fn : {"held_by_global", "held_in_list", "held_by_tls", "held_by_thread_alloc"})
    EXPECT_EQ(leak_class(l, fn, "definite").first + leak_class(l, fn, "indirect").first, 0u) << fn;
  // The program's own definite and indirect leaks are all there is (glibc's stdout buffer and
  // the thread's TLS are reachable).
  EXPECT_EQ(j["leak_scan"]["definite_bytes"], 516);
  EXPECT_EQ(j["leak_scan"]["definite_blocks"], 2);
  EXPECT_EQ(j["leak_scan"]["indirect_bytes"], 48);
  EXPECT_EQ(j["leak_scan"]["indirect_blocks"], 2);
  EXPECT_EQ(j["leaked_bytes"].get<uint64_t>(),
            516 + 48 + j["leak_scan"]["reachable_bytes"].get<uint64_t>());
  EXPECT_GT(j["leak_scan"]["pointers"].get<uint64_t>(), 0u);
  // Without the scan, nothing is classified.
  EXPECT_TRUE(report(leaky_trace())["leak_scan"].is_null());
}

TEST(LeakScan, CheckCountsOnlyUnreachableBlocks) {
  const Proc bad = cli("check " + reach_trace());
  EXPECT_EQ(bad.status, 1) << bad.out << bad.err;
  EXPECT_NE(bad.out.find("564 B leaked in 4 blocks"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("lost()"), std::string::npos);
  EXPECT_NE(bad.out.find("(indirect)"), std::string::npos);
  EXPECT_EQ(bad.out.find("held_by_global"), std::string::npos) << bad.out;
  EXPECT_EQ(cli("check --max-leaked-bytes 564 " + reach_trace()).status, 0);
  EXPECT_EQ(cli("check --max-leaked-bytes 563 " + reach_trace()).status, 1);
  // Suppressions see only what is counted: hiding lost_pair hides the pair and its children.
  const std::string supp = temp_dir() + "/reach.supp";
  {
    std::ofstream f(supp);
    f << "leak:lost_pair\n";
  }
  const json sj = json::parse(cli("check --json --suppressions " + supp + " " + reach_trace()).out);
  EXPECT_EQ(sj["leaked_bytes"], 500);
  EXPECT_EQ(sj["suppressed_bytes"], 64);
  EXPECT_EQ(sj["leaks_counted"], "unreachable");

  // memtide run --check scans by itself: a program whose blocks are all still reachable passes,
  // unless reachable blocks are counted too or the scan is turned off.
  const std::string t = temp_dir() + "/reach-ok.mtide";
  const Proc ok = sh(std::string(MT_WRAPPER) + " run -q -o " + t + " --check -- " MT_REACH " reachable");
  EXPECT_EQ(ok.status, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("still reachable"), std::string::npos) << ok.out;
  EXPECT_EQ(cli("check --include-reachable " + t).status, 1);
  const Proc off = sh(std::string(MT_WRAPPER) + " run -q -o " + t + " --no-leak-scan --check -- " MT_REACH " reachable");
  EXPECT_EQ(off.status, 1) << off.out << off.err;
  EXPECT_NE(off.out.find("no leak scan"), std::string::npos) << off.out;
  const Proc leaking = sh(std::string(MT_WRAPPER) + " run -q -o " + t + " --check -- " MT_REACH);
  EXPECT_EQ(leaking.status, 1) << leaking.out << leaking.err;
  // The run's summary line splits what was not freed.
  const Proc summary = sh(std::string(MT_WRAPPER) + " run -o " + t + " --leak-scan -- " MT_REACH);
  EXPECT_EQ(summary.status, 0) << summary.err;
  EXPECT_NE(summary.err.find("not freed (564 B unreachable, "), std::string::npos) << summary.err;
}

// valgrind's memcheck as the oracle: the same program's definite and indirect leaks, in bytes
// and blocks, from its "LEAK SUMMARY".
TEST(LeakScan, AgreesWithValgrindOnDefiniteAndIndirectLeaks) {
  if (sh("command -v valgrind").status != 0) GTEST_SKIP() << "no valgrind";
  const Proc v = sh("valgrind --leak-check=full " MT_REACH);
  ASSERT_EQ(v.status, 0) << v.err;
  auto summary = [&](const std::string& what) -> std::pair<uint64_t, uint64_t> {
    const std::size_t at = v.err.find(what + ": ");
    if (at == std::string::npos) return {UINT64_MAX, UINT64_MAX};
    std::string bytes, blocks;
    std::istringstream in(v.err.substr(at + what.size() + 2));
    std::string word;
    in >> bytes >> word >> word >> blocks;  // "516 bytes in 2 blocks"
    bytes.erase(std::remove(bytes.begin(), bytes.end(), ','), bytes.end());
    blocks.erase(std::remove(blocks.begin(), blocks.end(), ','), blocks.end());
    return {std::stoull(bytes), std::stoull(blocks)};
  };
  const auto definite = summary("definitely lost"), indirect = summary("indirectly lost");
  ASSERT_NE(definite.first, UINT64_MAX) << v.err;
  const json j = report(reach_trace());
  EXPECT_EQ(j["leak_scan"]["definite_bytes"].get<uint64_t>(), definite.first);
  EXPECT_EQ(j["leak_scan"]["definite_blocks"].get<uint64_t>(), definite.second);
  EXPECT_EQ(j["leak_scan"]["indirect_bytes"].get<uint64_t>(), indirect.first);
  EXPECT_EQ(j["leak_scan"]["indirect_blocks"].get<uint64_t>(), indirect.second);
}

// A real interpreter: valgrind's memcheck finds no definite or indirect leak in this run of
// Debian's python3 (most of its objects live in arenas it maps itself, which the kernel may
// merge with chunks glibc mapped), and neither does the gate.
TEST(LeakScan, PythonHasNoUnreachableBlocksAtExit) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  const std::string t = temp_dir() + "/py.mtide";
  const Proc r = sh(std::string(MT_WRAPPER) + " run -q -o " + t +
                    " --check -- /usr/bin/python3 -c 'import json; d = {i: str(i) for i in range(100000)}; "
                    "print(len(json.dumps(d)))'");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("still reachable"), std::string::npos) << r.out;
  const json j = report(t);
  ASSERT_TRUE(j["leak_scan"].is_object());
  EXPECT_EQ(j["leak_scan"]["definite_bytes"], 0);
  EXPECT_EQ(j["leak_scan"]["indirect_bytes"], 0);
  EXPECT_GT(j["leak_scan"]["reachable_bytes"].get<uint64_t>(), 0u);
}

TEST(Flamegraph, FoldedOutputSumsToTheTotals) {
  const json j = report(leaky_trace());
  for (auto [metric, key] : {std::pair{"allocated", "total_allocated_bytes"}, std::pair{"leaked", "leaked_bytes"},
                             std::pair{"count", "total_allocations"}, std::pair{"peak", "peak_bytes"},
                             std::pair{"temporary", "temporary_allocations"}}) {
    const Proc r = cli(std::string("flamegraph --metric ") + metric + " -o - " + leaky_trace());
    ASSERT_EQ(r.status, 0) << r.err;
    uint64_t sum = 0;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      const auto sp = line.rfind(' ');
      ASSERT_NE(sp, std::string::npos) << line;
      sum += std::stoull(line.substr(sp + 1));
    }
    EXPECT_EQ(sum, j[key].get<uint64_t>()) << metric;
  }
}

TEST(Flamegraph, OutputTypesAndErrors) {
  const std::string svg = temp_dir() + "/f.svg", folded = temp_dir() + "/f.folded";
  EXPECT_EQ(cli("flamegraph -o " + svg + " " + leaky_trace()).status, 0);
  EXPECT_NE(read_file(svg).find("<svg"), std::string::npos);
  EXPECT_EQ(cli("flamegraph --metric leaked -o " + folded + " " + leaky_trace()).status, 0);
  EXPECT_NE(read_file(folded).find("leak_b"), std::string::npos);
  EXPECT_EQ(cli("flamegraph -o out.png " + leaky_trace()).status, 2);
  const Proc bad = cli("flamegraph --metric nope -o " + svg + " " + leaky_trace());
  EXPECT_EQ(bad.status, 2);
  // The error names the choices, in readable text (an enum's mapping once printed NUL bytes).
  EXPECT_EQ(bad.err.find('\0'), std::string::npos);
  EXPECT_NE(bad.err.find("'nope' is not a metric; one of: allocated, count, leaked, live, peak, temporary"),
            std::string::npos)
      << bad.err;
  // Metric names ignore case.
  const Proc upper = cli("flamegraph --metric LEAKED -o - " + leaky_trace());
  EXPECT_EQ(upper.status, 0) << upper.err;
  EXPECT_EQ(upper.out, cli("flamegraph --metric leaked -o - " + leaky_trace()).out);
}

TEST(Errors, UsageAndFileErrorsExitTwoWithOneLine) {
  for (const char* c : {"report", "check", "flamegraph -o x.svg", "diff /dev/null", "symbolize"}) {
    const Proc r = cli(std::string(c) + " /nonexistent/trace.mtide");
    EXPECT_EQ(r.status, 2) << c;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c << ": " << r.err;
  }
  EXPECT_EQ(cli("report --bogus " + leaky_trace()).status, 2);
  EXPECT_EQ(cli("report --from yesterday " + leaky_trace()).status, 2);
  EXPECT_EQ(cli("check --max-leaked-bytes lots " + leaky_trace()).status, 2);
  EXPECT_EQ(cli("report /etc/hostname").status, 2);
  // An empty window is a usage error.
  const Proc window = cli("report --from 2s --to 1s " + leaky_trace());
  EXPECT_EQ(window.status, 2);
  EXPECT_NE(window.err.find("--from 2s comes after --to 1s"), std::string::npos) << window.err;
  EXPECT_EQ(cli("flamegraph --from 3 --to 2 -o - " + leaky_trace()).status, 2);
  EXPECT_EQ(cli("report --from 1s --to 1s " + leaky_trace()).status, 0);
  // Output that cannot be written (a full disk) is an error, however the command writes it,
  // and the message says why.
  for (const char* c : {"report", "report --json", "check", "info", "flamegraph -o -"}) {
    const Proc full = sh("(" + std::string(MT_CLI) + " " + c + " " + leaky_trace() + " >/dev/full) 2>&1");
    EXPECT_EQ(full.status, 2) << c;
    EXPECT_NE(full.out.find("cannot write the output: No space left on device"), std::string::npos) << c << ": " << full.out;
    EXPECT_EQ(std::count(full.out.begin(), full.out.end(), '\n'), 1) << c << ": " << full.out;
  }
  const Proc junit = cli("check --junit /dev/full " + leaky_trace());
  EXPECT_EQ(junit.status, 2);
  EXPECT_NE(junit.err.find("/dev/full: cannot write the JUnit report: No space left on device"), std::string::npos) << junit.err;
  const Proc svg = cli("flamegraph -o " + temp_dir() + "/no/such/dir/f.svg " + leaky_trace());
  EXPECT_EQ(svg.status, 2);
  EXPECT_NE(svg.err.find("cannot write the output file: No such file or directory"), std::string::npos) << svg.err;
  for (const char* c : {"report", "check", "flamegraph", "diff", "summary", "symbolize"}) {
    const Proc h = cli(std::string(c) + " --help");
    EXPECT_EQ(h.status, 0) << c;
    EXPECT_NE(h.out.find("Usage"), std::string::npos) << c;
  }
}

TEST(Truncation, TruncatedTraceIsAnalysedUpToTheCutWithAWarning) {
  const std::string cut = temp_dir() + "/cut.mtide";
  std::string bytes = read_file(leaky_trace());
  bytes.resize(bytes.size() - 10);
  std::ofstream(cut, std::ios::binary) << bytes;
  const Proc r = cli("report --json " + cut);
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.err.find("warning"), std::string::npos);
  const json j = json::parse(r.out);
  EXPECT_TRUE(j["truncated"].get<bool>());
}

TEST(Summary, OneLinePerTraceRootFirst) {
  const std::string manifest = temp_dir() + "/manifest";
  std::ofstream(manifest) << "100\t1\t" << leaky_trace() << "\n101\t100\t" << clean_trace() << "\n";
  const Proc r = cli("summary --manifest " + manifest);
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = report(leaky_trace());
  const auto first = r.out.find(leaky_trace()), second = r.out.find(clean_trace());
  EXPECT_LT(first, second);
  std::string count = std::to_string(j["total_allocations"].get<uint64_t>());
  for (int i = static_cast<int>(count.size()) - 3; i > 0; i -= 3) count.insert(static_cast<std::size_t>(i), ",");
  EXPECT_NE(r.out.find("  " + count + " allocations, peak heap "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" blocks not freed"), std::string::npos) << r.out;
}

TEST(Symbolize, ACopyKeepsItsNamesWithoutTheBinary) {
  const std::string dir = temp_dir() + "/sym";
  ASSERT_EQ(sh("mkdir -p " + dir + " && cp " MT_LEAKY " " + dir + "/leaky_copy").status, 0);
  const std::string trace = dir + "/t.mtide";
  ASSERT_EQ(record(trace, dir + "/leaky_copy").status, 0);
  const Proc s = cli("symbolize " + trace);
  ASSERT_EQ(s.status, 0) << s.err;
  ASSERT_EQ(sh("rm " + dir + "/leaky_copy").status, 0);  // the binary is gone
  const json j = report(trace);
  EXPECT_EQ(by_function(j["leaks"], "leak_a"), std::make_pair(uint64_t{500}, uint64_t{5}));
  // Without the embedded names the same trace shows module+offset and a warning.
  const std::string raw = dir + "/raw.mtide";
  ASSERT_EQ(sh("cp " MT_LEAKY " " + dir + "/leaky_copy").status, 0);
  ASSERT_EQ(record(raw, dir + "/leaky_copy").status, 0);
  ASSERT_EQ(sh("rm " + dir + "/leaky_copy").status, 0);
  const Proc r = cli("report --json --top 1000 " + raw);
  EXPECT_EQ(by_function(json::parse(r.out)["leaks"], "leak_a").first, 0u);
  EXPECT_NE(r.err.find("missing"), std::string::npos) << r.err;
}

// The names found for a module are kept on disk (cli/symbol_cache.h): a second trace of the
// same program takes them from there and reads the same, and a module whose file changed
// (here: a new modification time) is looked up in its file again.
TEST(Symbolize, TheSymbolCacheGivesTheSameNames) {
  const std::string dir = temp_dir() + "/symcache";
  ASSERT_EQ(sh("rm -rf " + dir + " && mkdir -p " + dir + " && cp " MT_LEAKY " " + dir + "/leaky_copy").status, 0);
  const std::string env = "MEMTIDE_CACHE_DIR=" + dir + "/cache ";
  auto from_cache = [](const std::string& out) -> uint64_t {
    const auto at = out.find(" from the symbol cache)");
    if (at == std::string::npos) return 0;
    return std::stoull(out.substr(out.rfind('(', at) + 1));
  };
  std::vector<std::string> traces;
  std::vector<uint64_t> cached;
  for (int i = 0; i < 3; ++i) {
    if (i == 2) {
      ASSERT_EQ(sh("touch -d '2001-01-01' " + dir + "/leaky_copy").status, 0);
    }
    const std::string t = dir + "/t" + std::to_string(i) + ".mtide";
    ASSERT_EQ(record(t, dir + "/leaky_copy").status, 0);
    const Proc s = sh(env + MT_CLI " symbolize " + t);
    ASSERT_EQ(s.status, 0) << s.err;
    cached.push_back(from_cache(s.out));
    traces.push_back(t);
  }
  EXPECT_EQ(cached[0], 0u) << "an empty cache named addresses";
  EXPECT_GT(cached[1], 0u) << "the second trace did not use the cache";
  EXPECT_LT(cached[2], cached[1]) << "the changed binary's entries were taken from the cache";
  ASSERT_EQ(sh("rm " + dir + "/leaky_copy").status, 0);  // every name is now in the traces
  for (const std::string& t : traces) {
    const json j = report(t);
    EXPECT_EQ(by_function(j["leaks"], "leak_a"), std::make_pair(uint64_t{500}, uint64_t{5})) << t;
    EXPECT_EQ(by_function(j["leaks"], "leak_b"), std::make_pair(uint64_t{4000}, uint64_t{1})) << t;
  }
  auto stacks = [](const json& j) {
    std::string all;
    for (const json& leak : j["leaks"]) all += leak["stack"].dump() + "\n";
    return all;
  };
  const std::string a = stacks(report(traces[0])), b = stacks(report(traces[1]));
  EXPECT_NE(a.find("leak_a"), std::string::npos);
  EXPECT_EQ(a, b) << "the cached names differ from the file's";
  // A cache file that is not one is ignored.
  ASSERT_EQ(sh("for f in " + dir + "/cache/symbols/*; do echo garbage > $f; done").status, 0);
  ASSERT_EQ(sh("cp " MT_LEAKY " " + dir + "/leaky_copy").status, 0);
  const std::string t = dir + "/t3.mtide";
  ASSERT_EQ(record(t, dir + "/leaky_copy").status, 0);
  const Proc s = sh(env + MT_CLI " symbolize " + t);
  ASSERT_EQ(s.status, 0) << s.err;
  EXPECT_EQ(from_cache(s.out), 0u) << s.out;
  EXPECT_EQ(by_function(report(t)["leaks"], "leak_a"), std::make_pair(uint64_t{500}, uint64_t{5}));
}

// `memtide run` names the stacks' addresses while the program runs and appends the names when
// it ends: the trace reads the same once the binary is gone. --no-symbolize leaves it raw.
TEST(Symbolize, RunEmbedsTheNamesAsItRecords) {
  const std::string dir = temp_dir() + "/runsym";
  ASSERT_EQ(sh("mkdir -p " + dir + " && cp " MT_LEAKY " " + dir + "/leaky_copy").status, 0);
  const std::string named = dir + "/named.mtide", raw = dir + "/raw.mtide";
  Proc r = sh(std::string(MT_WRAPPER) + " run -q -o " + named + " -- " + dir + "/leaky_copy");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  r = sh(std::string(MT_WRAPPER) + " run -q --no-symbolize -o " + raw + " -- " + dir + "/leaky_copy");
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(sh("rm " + dir + "/leaky_copy").status, 0);
  const json j = report(named);
  EXPECT_EQ(by_function(j["leaks"], "leak_a"), std::make_pair(uint64_t{500}, uint64_t{5}));
  EXPECT_EQ(by_function(j["leaks"], "leak_b"), std::make_pair(uint64_t{4000}, uint64_t{1}));
  EXPECT_GT(json::parse(cli("info --json " + named).out)["records"]["symbols"].get<uint64_t>(), 0u);
  const Proc p = cli("report --json --top 1000 " + raw);
  EXPECT_EQ(by_function(json::parse(p.out)["leaks"], "leak_a").first, 0u);
  EXPECT_NE(p.err.find("missing"), std::string::npos) << p.err;
}

// Names that cannot be appended (the file may not grow: a full disk) leave the trace as it was,
// readable to its end without a warning.
TEST(Symbolize, AFailedAppendLeavesTheTraceAsItWas) {
  // python3's trace: about a thousand addresses, names of many KiB to append.
  const std::string trace = temp_dir() + "/nospace.mtide", copy = temp_dir() + "/nospace_copy.mtide";
  ASSERT_EQ(record(trace, "python3 -c pass").status, 0);
  const std::string before = read_file(trace);
  ASSERT_EQ(cli("symbolize -o " + copy + " " + trace).status, 0);
  const std::size_t names = read_file(copy).size() - before.size();
  ASSERT_GT(names, 1024u);
  // The file may grow by less than a KiB: the names' block is cut short.
  const std::string limit = std::to_string(before.size() / 1024 + 1);
  const Proc s = sh("bash -c \"trap '' XFSZ; ulimit -f " + limit + "; " + MT_CLI + " symbolize " + trace + "\"");
  EXPECT_EQ(s.status, 2);
  EXPECT_NE(s.err.find("cannot append the names"), std::string::npos) << s.err;
  EXPECT_NE(s.err.find("left as it was"), std::string::npos) << s.err;
  EXPECT_EQ(read_file(trace), before);
  const Proc r = cli("report " + trace);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.err.find("truncated"), std::string::npos) << r.err;
}

// The same for a program that runs a while: the follower reads the trace as it grows.
TEST(Symbolize, RunFollowsALongerProgram) {
  const std::string dir = temp_dir() + "/runsym2";
  ASSERT_EQ(sh("mkdir -p " + dir + " && cp " MT_WORKER " " + dir + "/worker_copy").status, 0);
  const std::string trace = dir + "/w.mtide";
  const Proc r = sh(std::string(MT_WRAPPER) + " run -q -o " + trace + " -- " + dir + "/worker_copy --seconds 1");
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(sh("rm " + dir + "/worker_copy").status, 0);
  const Proc p = cli("report --json --top 1000 " + trace);
  ASSERT_EQ(p.status, 0) << p.err;
  // No module was needed (the binary is gone). Other warnings are not this test's business: on
  // a loaded machine a thread preempted between reading the clock and committing its record
  // can be overtaken by a watermark ("merged out of time order").
  EXPECT_EQ(p.err.find("missing"), std::string::npos) << p.err;
  EXPECT_EQ(p.err.find("module+"), std::string::npos) << p.err;
  const json j = json::parse(p.out);
  const auto [bytes, count] = by_function(j["leaks"], "write_audit_line");
  EXPECT_GT(count, 0u);
  EXPECT_EQ(bytes, 128 * count);
}

// `memtide symbolize --follow TRACE` (no manifest) beside a program that runs 1 s and mostly
// waits: it names the stacks as the program records them, appends the names once the recorder
// lets go, and ends soon after the program (its pauses grow while no new address comes, up
// to 160 ms).
TEST(Symbolize, FollowingOneTraceNamesItAndEndsWithTheProgram) {
  const std::string dir = temp_dir() + "/runsym4";
  ASSERT_EQ(sh("mkdir -p " + dir + " && cp " MT_WORKER " " + dir + "/worker_copy").status, 0);
  const std::string trace = dir + "/w.mtide";
  const Proc r = sh("MEMTIDE_OUTPUT=" + trace + " LD_PRELOAD=" MT_PRELOAD " " + dir +
                    "/worker_copy --seconds 1 >/dev/null & sleep 0.3; start=$(date +%s%N); " MT_CLI
                    " symbolize --follow " + trace + "; s=$?; wait; echo \"status $s ms $(( ($(date +%s%N) - start) / 1000000 ))\"");
  int status = -1;
  long ms = 0;
  ASSERT_NE(r.out.find("status "), std::string::npos) << r.out << r.err;
  ASSERT_EQ(std::sscanf(r.out.c_str() + r.out.find("status "), "status %d ms %ld", &status, &ms), 2) << r.out;
  EXPECT_EQ(status, 0) << r.err;
  EXPECT_NE(r.out.find("addresses named"), std::string::npos) << r.out;
  EXPECT_LT(ms, 3000) << "the follower did not end with the program";
  ASSERT_EQ(sh("rm " + dir + "/worker_copy").status, 0);
  const Proc p = cli("report --json --top 1000 " + trace);
  ASSERT_EQ(p.status, 0) << p.err;
  const json j = json::parse(p.out);
  const auto [bytes, count] = by_function(j["leaks"], "write_audit_line");
  EXPECT_GT(count, 0u);
}

// A program's children are followed side by side with it: a child's trace gets its names as
// soon as the child ends, while the program that started it still runs and records (here a
// shell that then waits, in a process it does not trace, for the child's names to appear),
// not only once the whole run is over.
TEST(Symbolize, RunNamesAChildsTraceWhileItsParentRuns) {
  const std::string dir = temp_dir() + "/runsym3";
  ASSERT_EQ(sh("rm -rf " + dir + " && mkdir -p " + dir + " && cp " MT_LEAKY " " + dir + "/leaky_copy").status, 0);
  std::ofstream(dir + "/wait_named.py") << "import glob, json, subprocess, sys, time\n"
                                           "for _ in range(400):\n"
                                           "    for f in glob.glob(sys.argv[1] + '/p.*.mtide'):\n"
                                           "        p = subprocess.run(['" MT_CLI "', 'info', '--json', f], capture_output=True)\n"
                                           "        if p.returncode != 0: continue\n"
                                           "        j = json.loads(p.stdout)\n"
                                           "        if j['process']['exe'].endswith('/leaky_copy') and j['records']['symbols'] > 0:\n"
                                           "            print('named')\n"
                                           "            sys.exit(0)\n"
                                           "    time.sleep(0.05)\n"
                                           "print('unnamed')\n";
  std::ofstream(dir + "/parent.sh") << dir << "/leaky_copy\n"
                                    << "env -u LD_PRELOAD python3 " << dir << "/wait_named.py " << dir << " > " << dir
                                    << "/flag\n";
  const Proc r = sh(std::string(MT_WRAPPER) + " run -q -o " + dir + "/p.mtide -- bash " + dir + "/parent.sh");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_file(dir + "/flag"), "named\n") << r.err;
  // Every trace of the run has its names once it is over.
  const Proc n = sh("for f in " + dir + "/p*.mtide; do " MT_CLI " info --json $f | grep -c '\"symbols\": [1-9]'; done");
  EXPECT_EQ(n.status, 0) << n.out;
  std::istringstream counts(n.out);
  int traces = 0;
  for (std::string line; std::getline(counts, line); ++traces) EXPECT_EQ(line, "1") << n.out;  // one "symbols": N > 0
  EXPECT_GE(traces, 3) << n.out;
}

TEST(Diff, StacksMatchedByFunctionAcrossRuns) {
  const Proc r = cli("diff --json " + clean_trace() + " " + leaky_trace());
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out);
  uint64_t grown = 0;
  for (const json& c : j["leaked_changes"])
    if (has_function(c["stack"], "leak_b")) grown += c["delta_bytes"].get<uint64_t>();
  EXPECT_EQ(grown, 4000u);
  // The same program twice: the churn stacks match, so no allocation change is listed for it.
  const Proc same = cli("diff --json " + leaky_trace() + " " + leaky_trace());
  EXPECT_TRUE(json::parse(same.out)["allocated_changes"].empty());
}

// tests/programs/exact_workload counts every call it makes and writes the tally; "full run
// minus baseline run" (same threads and I/O, none of the counted work) is what it did.
class ExactWorkload : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string d = temp_dir();
    Proc r = record(d + "/exact.mtide", std::string(MT_EXACT) + " --out " + d + "/tally.json");
    ASSERT_EQ(r.status, 0) << r.err;
    r = record(d + "/base.mtide", std::string(MT_EXACT) + " --baseline --out " + d + "/base.json");
    ASSERT_EQ(r.status, 0) << r.err;
    tally_ = json::parse(read_file(d + "/tally.json"));
    full_ = report(d + "/exact.mtide");
    base_ = report(d + "/base.mtide");
  }
  static uint64_t api(const json& j, const std::string& name, const char* field) {
    return j["apis"].contains(name) ? j["apis"][name][field].get<uint64_t>() : 0;
  }
  static inline json tally_, full_, base_;
};

TEST_F(ExactWorkload, CountsAndBytesPerApiEqualWhatTheProgramDid) {
  for (const auto& [name, t] : tally_["apis"].items()) {
    EXPECT_EQ(api(full_, name, "allocations") - api(base_, name, "allocations"), t["allocs"].get<uint64_t>()) << name;
    EXPECT_EQ(api(full_, name, "frees") - api(base_, name, "frees"), t["frees"].get<uint64_t>()) << name;
    EXPECT_EQ(api(full_, name, "allocated_bytes") - api(base_, name, "allocated_bytes"), t["bytes"].get<uint64_t>())
        << name;
  }
  EXPECT_EQ(full_["total_allocations"].get<uint64_t>() - base_["total_allocations"].get<uint64_t>(),
            tally_["heap_allocs"].get<uint64_t>());
  EXPECT_EQ(full_["total_frees"].get<uint64_t>() - base_["total_frees"].get<uint64_t>(),
            tally_["heap_frees"].get<uint64_t>());
  EXPECT_EQ(full_["mismatched_frees"], 0);
}

TEST_F(ExactWorkload, LeaksByFunctionWithExactBytesAndBlocks) {
  for (const char* fn : {"leak_small", "leak_big"}) {
    const json& t = tally_["leaks"][fn];
    EXPECT_EQ(by_function(full_["leaks"], fn), std::make_pair(t["bytes"].get<uint64_t>(), t["blocks"].get<uint64_t>()))
        << fn;
  }
  // Every mapping was unmapped (one of them in two halves); every custom block freed.
  EXPECT_EQ(full_["mmap"]["leaked_bytes"].get<uint64_t>(), base_["mmap"]["leaked_bytes"].get<uint64_t>());
  EXPECT_EQ(full_["custom"]["leaked_blocks"], 0);
}

TEST_F(ExactWorkload, PeakIsTheBigBlockPlusWhatTheWorkersHeld) {
  // Live at the peak from the counted work: the 64 MiB block (from main) and each worker's
  // held block and mailbox.
  uint64_t big = 0, workers = 0;
  for (const json& it : full_["peak_stacks"]) {
    if (it["bytes"] == 64u << 20 && has_function(it["stack"], "main")) big += it["bytes"].get<uint64_t>();
    if (has_function(it["stack"], "worker")) workers += it["bytes"].get<uint64_t>();
  }
  EXPECT_EQ(big + workers, tally_["peak_own"].get<uint64_t>());
  EXPECT_GE(full_["peak_bytes"].get<uint64_t>(), tally_["peak_own"].get<uint64_t>());
  EXPECT_LT(full_["peak_bytes"].get<uint64_t>() - tally_["peak_own"].get<uint64_t>(), 1u << 20);
  // The peak is reached when main allocates the big block, just before its "peak" marker.
  uint64_t start = 0, peak = 0;
  for (const json& mk : full_["markers"]) {
    if (mk["label"] == "start") start = mk["time_ns"].get<uint64_t>();
    if (mk["label"] == "peak") peak = mk["time_ns"].get<uint64_t>();
  }
  ASSERT_GT(peak, 0u);
  EXPECT_GT(full_["peak_time_ns"].get<uint64_t>(), start);
  EXPECT_LE(full_["peak_time_ns"].get<uint64_t>(), peak);
}

}  // namespace
}  // namespace memtide::test
