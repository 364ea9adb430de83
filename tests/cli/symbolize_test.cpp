// `memtide symbolize` end to end: names embedded in a copy, the symbol cache, and following a
// recording (`memtide run --symbolize`, `symbolize --follow`) while the program runs.
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

}  // namespace
}  // namespace memtide::test
