// `memtide check` end to end: limits, suppressions and what it says of a trace cut short, on
// tests/cli/programs/leaky recorded under the real LD_PRELOAD.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/cli/e2e_traces.h"

namespace memtide::test {
namespace {

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
  // (leaky's one mismatched free allowed: it fails by default, below.)
  EXPECT_EQ(cli("check --max-mismatched-frees 1 --max-leaked-bytes 4692 " + leaky_trace()).status, 0);
  EXPECT_EQ(cli("check --max-mismatched-frees 1 --max-leaked-bytes 4691 " + leaky_trace()).status, 1);
  EXPECT_EQ(cli("check --max-mismatched-frees 1 --max-leaked-blocks 9 " + leaky_trace()).status, 0);
  EXPECT_EQ(cli("check --max-mismatched-frees 1 --max-leaked-blocks 8 " + leaky_trace()).status, 1);
  EXPECT_EQ(cli("check --max-peak-bytes 1 " + clean_trace()).status, 1);
}

// A block released by another family's call (leaky frees a new[] block with free()) fails the
// gate as a leak does, as each is an error of memcheck's: listed with its allocation's stack,
// in the text, the JSON and the JUnit report; --max-mismatched-frees allows some.
TEST(Check, MismatchedFreesFailTheGate) {
  const std::string junit = temp_dir() + "/mismatch.xml";
  const Proc r = cli("check --max-leaked-bytes 1TB --junit " + junit + " " + leaky_trace());
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAIL mismatched frees: 1 (limit 0)"), std::string::npos) << r.out;
  const std::size_t at = r.out.find("new[] block freed with free");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mismatch", at + 10), std::string::npos) << "the allocation's stack names leaky's mismatch()\n" << r.out;
  const json j = json::parse(cli("check --json --max-leaked-bytes 1TB " + leaky_trace()).out);
  EXPECT_EQ(j["mismatched_frees"], 1);
  ASSERT_EQ(j["mismatches"].size(), 1u) << j.dump(1);
  EXPECT_EQ(j["mismatches"][0]["free_api"], "free");
  std::ifstream in(junit);
  const std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(xml.find("mismatched frees 1 &gt; 0"), std::string::npos) << xml;
  EXPECT_EQ(cli("check --max-leaked-bytes 1TB --max-mismatched-frees 1 " + leaky_trace()).status, 0);
  EXPECT_EQ(cli("check " + clean_trace()).status, 0);
}

// A suggested suppression hides its own leak and no other: the stdio buffer's stack (libc's
// frames, then main) is named by libc's frame, not by `main`, which would hide every leak of
// the program; each line pasted alone hides exactly its stack.
TEST(Check, SuggestedSuppressionsHideOnlyTheirOwnLeak) {
  const Proc r = cli("check --json --gen-suppressions --no-builtin-suppressions --top 1000 --max-mismatched-frees 1 " +
                     leaky_trace());
  const json j = json::parse(r.out);
  ASSERT_GE(j["leaks"].size(), 4u) << r.out;
  bool stdio = false;
  for (const json& l : j["leaks"]) {
    const std::string line = l["suppression"].get<std::string>();
    EXPECT_NE(line, "leak:main");
    EXPECT_EQ(l["suppression_also_hides"], 0) << line;
    stdio |= line.find("IO_file_doallocate") != std::string::npos;
    const std::string supp = temp_dir() + "/one.supp";
    {
      std::ofstream f(supp);
      f << line << "\n";
    }
    const json one = json::parse(
        cli("check --json --no-builtin-suppressions --top 1000 --suppressions " + supp + " " + leaky_trace()).out);
    EXPECT_EQ(one["leaks"].size() + 1, j["leaks"].size()) << line;
  }
  EXPECT_TRUE(stdio) << "the stdout buffer's leak is named by libc's frame\n" << r.out;
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
  EXPECT_EQ(cli("check --max-mismatched-frees 1 --suppressions " + supp + " " + leaky_trace()).status, 0);
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

}  // namespace
}  // namespace memtide::test
