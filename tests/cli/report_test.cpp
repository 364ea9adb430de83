// `memtide report` end to end: tests/cli/programs/leaky and tests/programs/exact_workload run
// under the real LD_PRELOAD; the report's numbers are compared with what the programs are known
// to have done; the leak scan's classes (tests/cli/programs/reach) as the report gives them.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "formats/reader.h"
#include "tests/cli/e2e_traces.h"

namespace memtide::test {
namespace {

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

// A block of a thread's events cut out of a recording (the blocks around it intact, every
// checksum valid): the End record's counts are more than the trace holds, and every reader of
// the replay says so. The recording as it was says nothing of the kind.
TEST(Report, AnEventBlockCutOutOfTheFileIsSaid) {
  std::ifstream in(leaky_trace(), std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fmt::FileReader r;
  ASSERT_TRUE(r.open(leaky_trace()).ok());
  uint64_t from = 0, to = 0;
  for (fmt::BlockRef ref; r.skip(ref).ok();)
    if (ref.header.stream != 0 && !(ref.header.flags & (fmt::kBlockFlagStacks | fmt::kBlockFlagPrologue))) {
      from = ref.offset;
      to = ref.end_offset();
      break;
    }
  ASSERT_GT(to, from) << "the recording has no block of a thread's events";
  bytes.erase(bytes.begin() + static_cast<std::ptrdiff_t>(from), bytes.begin() + static_cast<std::ptrdiff_t>(to));
  const std::string cut = temp_dir() + "/leaky-cut.mtide";
  std::ofstream(cut, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));

  const std::string said = "events are missing";
  const json whole = report(leaky_trace()), partial = report(cut);
  for (const json& w : whole["warnings"]) EXPECT_EQ(w.get<std::string>().find(said), std::string::npos) << w;
  bool found = false;
  for (const json& w : partial["warnings"]) found |= w.get<std::string>().find(said) != std::string::npos;
  EXPECT_TRUE(found) << partial["warnings"].dump();
  const Proc c = cli("check " + cut);
  EXPECT_NE(c.err.find(said), std::string::npos) << c.err;
}

// A program that allocates through wrappers (tests/cli/programs/wrapped.c): zmalloc is on the
// built-in list, so its callers are the allocation sites; pool_take is the program's own name,
// a site until --alloc-fn names it. In the text (a line before the stack) and the JSON (the
// frame marked allocation_site), for report and check alike.
TEST(Report, TheAllocationSiteIsPastTheAllocationWrappers) {
  static const std::string trace = [] {
    const std::string p = temp_dir() + "/wrapped.mtide";
    const Proc r = record(p, MT_WRAPPED);
    EXPECT_EQ(r.status, 0) << r.err;
    return p;
  }();
  auto site_of = [](const json& stack) -> std::string {
    for (const json& f : stack)
      if (f.value("allocation_site", false)) return f["function"];
    return "";
  };
  auto leak_sites = [&](const json& j) {
    std::set<std::string> out;
    for (const json& l : j["leaks"]) out.insert(site_of(l["stack"]));
    return out;
  };
  EXPECT_EQ(leak_sites(report(trace)), (std::set<std::string>{"create_object", "pool_take"}));
  EXPECT_EQ(leak_sites(report(trace, "--alloc-fn '^pool_take$'")), (std::set<std::string>{"create_object", "load_config"}));
  for (const json& l : report(trace)["leaks"]) EXPECT_EQ(l["stack"][0]["function"], "zmalloc");

  const Proc text = cli("report --alloc-fn '^pool_take$' " + trace);
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("allocation site: #1  create_object ("), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("allocation site: #2  load_config ("), std::string::npos) << text.out;
  const Proc plain = cli("report " + trace);
  EXPECT_EQ(plain.out.find("allocation site: #2  load_config"), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find("allocation site: #1  pool_take ("), std::string::npos) << plain.out;
  const Proc gate = cli("check --alloc-fn '^pool_take$' " + trace);
  EXPECT_EQ(gate.status, 1) << gate.err;
  EXPECT_NE(gate.out.find("allocation site: #2  load_config ("), std::string::npos) << gate.out;
  // memtide run --check takes it too (its verdict on stderr; the blocks are held by a global).
  const Proc run = sh(std::string(MT_WRAPPER) + " run -q --check --include-reachable --alloc-fn '^pool_take$' -o " + temp_dir() +
                      "/wrapped-run.mtide -- " MT_WRAPPED);
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_NE(run.err.find("allocation site: #2  load_config ("), std::string::npos) << run.err;
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
  // (The verdict on stderr: stdout is the program's.)
  EXPECT_NE(ok.err.find("still reachable"), std::string::npos) << ok.err;
  EXPECT_EQ(ok.out.find("memtide check"), std::string::npos) << ok.out;
  EXPECT_EQ(cli("check --include-reachable " + t).status, 1);
  const Proc off = sh(std::string(MT_WRAPPER) + " run -q -o " + t + " --no-leak-scan --check -- " MT_REACH " reachable");
  EXPECT_EQ(off.status, 1) << off.out << off.err;
  EXPECT_NE(off.err.find("no leak scan"), std::string::npos) << off.err;
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
  EXPECT_NE(r.err.find("still reachable"), std::string::npos) << r.err;
  const json j = report(t);
  ASSERT_TRUE(j["leak_scan"].is_object());
  EXPECT_EQ(j["leak_scan"]["definite_bytes"], 0);
  EXPECT_EQ(j["leak_scan"]["indirect_bytes"], 0);
  EXPECT_GT(j["leak_scan"]["reachable_bytes"].get<uint64_t>(), 0u);
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
