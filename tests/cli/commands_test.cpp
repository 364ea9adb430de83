// `memtide flamegraph`, `summary`, `diff` end to end, and the errors every command reports the
// same way, on tests/cli/programs/leaky recorded under the real LD_PRELOAD.
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

TEST(Flamegraph, FoldedOutputSumsToTheTotals) {
  const json j = report(leaky_trace());
  for (auto [metric, key] : {std::pair{"allocated", "total_allocated_bytes"}, std::pair{"leaked", "leaked_bytes"},
                             std::pair{"count", "total_allocations"}, std::pair{"allocations", "total_allocations"},
                             std::pair{"peak", "peak_bytes"},
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
  EXPECT_NE(bad.err.find("'nope' is not a metric; one of: allocated, allocations, leaked, live, peak, temporary"),
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

}  // namespace
}  // namespace memtide::test
