// Suppressions honoured by `memtide report` as by `memtide check`: tests/cli/programs/leaky run
// under `memtide run`, one suppressions file, and the two commands' leaks, suppressed bytes and
// per-suppression counts compared (check counting every block not freed, as the report lists
// them: --include-reachable).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/cli/e2e_traces.h"

namespace memtide::test {
namespace {

const std::string& run_trace() {
  static const std::string t = [] {
    const std::string p = temp_dir() + "/leaky-run.mtide";
    const Proc r = sh(std::string(MT_WRAPPER) + " run -q -o " + p + " -- " MT_LEAKY);
    EXPECT_EQ(r.status, 0) << r.err;
    return p;
  }();
  return t;
}

std::string supp_file(const std::string& name, const std::string& text) {
  const std::string p = temp_dir() + "/" + name;
  std::ofstream(p) << text;
  return p;
}

std::set<uint64_t> stack_ids(const json& items) {
  std::set<uint64_t> s;
  for (const json& it : items) s.insert(it["stack_id"].get<uint64_t>());
  return s;
}

TEST(Suppressions, ReportAndCheckAgree) {
  const std::string supp = supp_file("agree.supp", "# known\nleak:leak_a\nleak:never_matches_anything\n");
  const json rep = report(run_trace(), "--suppressions " + supp);
  const Proc c = cli("check --json --top 1000 --include-reachable --suppressions " + supp + " " + run_trace());
  ASSERT_EQ(c.status, 1) << c.err;
  const json chk = json::parse(c.out);

  // leak_a's 5 x 100 B are out of the report's list; leak_b's and leak_c's are in it.
  EXPECT_EQ(by_function(rep["leaks"], "leak_a"), std::make_pair(uint64_t{0}, uint64_t{0}));
  EXPECT_EQ(by_function(rep["leaks"], "leak_b"), std::make_pair(uint64_t{4000}, uint64_t{1}));
  EXPECT_EQ(by_function(rep["leaks"], "leak_c"), std::make_pair(uint64_t{192}, uint64_t{3}));
  // The same stacks listed, the same bytes counted and set apart.
  EXPECT_EQ(stack_ids(rep["leaks"]), stack_ids(chk["leaks"]));
  uint64_t listed = 0;
  for (const json& it : rep["leaks"]) listed += it["bytes"].get<uint64_t>();
  EXPECT_EQ(listed, chk["leaked_bytes"].get<uint64_t>());
  const json& sup = rep["suppressed_leaks"];
  ASSERT_TRUE(sup.is_object()) << rep.dump(1);
  EXPECT_EQ(sup["bytes"], chk["suppressed_bytes"]);
  EXPECT_EQ(sup["blocks"], chk["suppressed_blocks"]);
  EXPECT_GE(sup["bytes"].get<uint64_t>(), 500u);
  EXPECT_EQ(sup["suppressions"], chk["suppressions"]) << "each suppression's origin and counts";
  bool a = false;
  for (const json& s : sup["suppressions"])
    if (s["pattern"] == "leak:leak_a") {
      a = true;
      EXPECT_EQ(s["origin"], supp + ":2");
      EXPECT_EQ(s["stacks"], 1);
      EXPECT_EQ(s["blocks"], 5);
      EXPECT_EQ(s["bytes"], 500);
    }
  EXPECT_TRUE(a);
  // The totals stay those of the trace: every block not freed.
  EXPECT_EQ(rep["leaked_bytes"], report(run_trace())["leaked_bytes"]);
}

TEST(Suppressions, ReportTextCountsTheSuppressedLeaksApart) {
  const std::string supp = supp_file("text.supp", "leak:leak_a\nleak:unused_pattern\n");
  const Proc r = cli("report --no-builtin-suppressions --suppressions " + supp + " " + run_trace());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("5 leaks (500 B) suppressed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SUPPRESSED LEAKS: 5 leaks (500 B) suppressed, from 1 stack"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("leak:leak_a (" + supp + ":1): 1 stack, 5 blocks, 500 B"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unused: leak:unused_pattern (" + supp + ":2)"), std::string::npos) << r.out;
  // leak_a is in no listed leak's stack (its suggested suppression line included).
  const std::string leaks = r.out.substr(r.out.find("LEAKS (not freed"), r.out.find("SUPPRESSED LEAKS") - r.out.find("LEAKS (not freed"));
  EXPECT_EQ(leaks.find("leak_a"), std::string::npos) << leaks;
  EXPECT_NE(leaks.find("leak_b"), std::string::npos) << leaks;
}

// The report applies the built-in suppressions as check does, so both list the same leaks;
// --no-builtin-suppressions lists every leak.
TEST(Suppressions, TheReportAppliesTheBuiltInOnesAsCheckDoes) {
  const json rep = report(run_trace());
  ASSERT_TRUE(rep["suppressed_leaks"].is_object()) << rep.dump(1).substr(0, 2000);
  EXPECT_GT(rep["suppressed_leaks"]["bytes"].get<uint64_t>(), 0u) << "libstdc++'s emergency pool, a one-time block";
  EXPECT_EQ(by_function(rep["leaks"], "leak_a"), std::make_pair(uint64_t{500}, uint64_t{5}));
  const json chk = json::parse(cli("check --json --top 1000 " + run_trace()).out);
  EXPECT_EQ(rep["suppressed_leaks"]["bytes"], chk["suppressed_bytes"]);
  std::set<uint64_t> listed, judged;
  for (const json& l : rep["leaks"]) listed.insert(l["stack_id"].get<uint64_t>());
  for (const json& l : chk["leaks"]) judged.insert(l["stack_id"].get<uint64_t>());
  EXPECT_EQ(listed, judged);
  const Proc all = cli("report --json --top 1000 --no-builtin-suppressions " + run_trace());
  ASSERT_EQ(all.status, 0) << all.err;
  const json every = json::parse(all.out);
  EXPECT_TRUE(every["suppressed_leaks"].is_null());
  EXPECT_GT(every["leaks"].size(), rep["leaks"].size());
}

TEST(Suppressions, ReportTakesThemFromMemtideCheckOptions) {
  const std::string supp = supp_file("env.supp", "leak:leak_b\n");
  const Proc r = sh("MEMTIDE_CHECK_OPTIONS='error-exitcode=23 suppressions=" + supp + " no-builtin-suppressions' " +
                    MT_CLI + " report --json --top 1000 " + run_trace());
  ASSERT_EQ(r.status, 0) << r.err;
  const json rep = json::parse(r.out);
  EXPECT_EQ(rep["suppressed_leaks"]["bytes"], 4000);
  EXPECT_EQ(by_function(rep["leaks"], "leak_b"), std::make_pair(uint64_t{0}, uint64_t{0}));
  // The command line's add to them.
  const std::string more = supp_file("more.supp", "leak:leak_a\n");
  const Proc both = sh("MEMTIDE_CHECK_OPTIONS='suppressions=" + supp + " no-builtin-suppressions' " + MT_CLI +
                       " report --json --suppressions " + more + " " + run_trace());
  ASSERT_EQ(both.status, 0) << both.err;
  EXPECT_EQ(json::parse(both.out)["suppressed_leaks"]["bytes"], 4500);
}

TEST(Suppressions, ABadFileIsAnErrorOfOneLine) {
  const std::string bad = supp_file("bad.supp", "leak:ok\nthis is not a suppression\n");
  const Proc r = cli("report --suppressions " + bad + " " + run_trace());
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find(bad + ":2"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  const Proc missing = cli("report --suppressions " + temp_dir() + "/no-such.supp " + run_trace());
  EXPECT_EQ(missing.status, 2);
}

}  // namespace
}  // namespace memtide::test
