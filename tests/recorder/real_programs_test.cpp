// Real programs from Debian under the real LD_PRELOAD: their output and exit status do not
// change, and memtide counts the same allocation calls as heaptrack, process by process
// (within 0.1%; heaptrack does not follow children, so g++'s cc1plus is run by hand).
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/recorder/test_support.h"
#include "tests/recorder/trace_replay.h"

namespace fs = std::filesystem;
using memtide::fmt::Api;
using memtide::test::manifest_traces;
using memtide::test::slurp;
using memtide::test::TempDir;

namespace {

struct Out {
  int status = -1;
  std::string out, err;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command line; stdin from `in` when given.
Out sh(const std::string& cmd, const fs::path& dir, const std::string& in = "") {
  const std::string full = "cd " + quote(dir.string()) + " && " + cmd + (in.empty() ? "" : " < " + quote(in)) +
                           " > " + quote((dir / "o.txt").string()) + " 2> " + quote((dir / "e.txt").string());
  Out o;
  const int st = std::system(full.c_str());
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  o.out = slurp(dir / "o.txt");
  o.err = slurp(dir / "e.txt");
  return o;
}

bool have(const char* tool) { return std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) == 0; }

// heaptrack's "calls to allocation functions: N" for a recording of `cmd`.
long heaptrack_calls(const std::string& cmd, const fs::path& dir, const std::string& in = "") {
  const fs::path base = dir / "ht";
  sh("heaptrack -o " + quote(base.string()) + " " + cmd, dir, in);
  fs::path file;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("ht", 0) == 0 && e.path().string().find(".zst") != std::string::npos)
      file = e.path();
  if (file.empty()) return -1;
  Out p = sh("heaptrack_print -f " + quote(file.string()) + " -p 0 -a 0 -T 0 -l 0 -n 0 -t 0", dir);
  std::smatch m;
  if (!std::regex_search(p.out, m, std::regex(R"(calls to allocation functions: (\d+))"))) return -1;
  return std::stol(m[1]);
}

// memtide's count of the calls heaptrack intercepts: every heap API but memalign and pvalloc
// (heaptrack does not hook those) and reallocarray (glibc implements it without calling realloc).
uint64_t heaptrack_comparable(const memtide::test::Replay& r) {
  uint64_t n = 0;
  for (unsigned a = 0; a < memtide::fmt::kApiCount; ++a) {
    const auto api = static_cast<Api>(a);
    if (!memtide::fmt::is_heap(api) || api == Api::Custom || api == Api::Memalign || api == Api::Pvalloc ||
        api == Api::Reallocarray)
      continue;
    n += r.allocs[a];
  }
  return n;
}

struct Traced {
  Out run;
  std::vector<std::string> traces;
};

Traced traced(const std::string& cmd, const fs::path& dir, const std::string& in = "") {
  const fs::path manifest = dir / "manifest";
  const std::string env = "LD_PRELOAD=" + quote(MT_PRELOAD) + " MEMTIDE_MANIFEST=" + quote(manifest.string()) +
                          " MEMTIDE_OUTPUT=" + quote((dir / "t.%p.mtide").string()) + " ";
  Traced t;
  t.run = sh(env + cmd, dir, in);
  t.traces = manifest_traces(manifest);
  return t;
}

// heaptrack's preload library links libstdc++, whose start-up allocates its exception
// emergency pool with one malloc; in a program that does not load libstdc++ itself, heaptrack
// counts that call and memtide (which needs no C++ runtime) does not see it happen.
long heaptrack_own_calls(const memtide::test::Replay& r) {
  for (const auto& m : r.module_paths)
    if (m.find("libstdc++") != std::string::npos) return 0;
  return 1;
}

void expect_close(uint64_t memtide, long heaptrack, const char* what) {
  ASSERT_GT(heaptrack, 0) << "heaptrack's count for " << what << " could not be read";
  const double diff = std::fabs(static_cast<double>(memtide) - static_cast<double>(heaptrack));
  std::printf("%s: memtide %llu allocation calls, heaptrack %ld (difference %.4f%%)\n", what,
              static_cast<unsigned long long>(memtide), heaptrack, 100.0 * diff / static_cast<double>(heaptrack));
  EXPECT_LE(diff, 0.001 * static_cast<double>(heaptrack)) << what;
}

}  // namespace

TEST(RealPrograms, Sqlite3) {
  if (!have("sqlite3") || !have("heaptrack")) GTEST_SKIP() << "sqlite3 or heaptrack missing";
  TempDir dir;
  {
    std::ofstream sql(dir.path() / "script.sql");
    sql << "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v INTEGER);\nBEGIN;\n";
    for (int i = 0; i < 20000; ++i) sql << "INSERT INTO t(name, v) VALUES('name" << i << "', " << (i * 7919) % 1000 << ");\n";
    sql << "COMMIT;\nCREATE INDEX ti ON t(name);\nSELECT count(*), sum(v) FROM t WHERE name LIKE 'name1%';\n";
  }
  const std::string in = (dir.path() / "script.sql").string();
  const Out plain = sh("sqlite3 :memory:", dir.path(), in);
  const Traced t = traced("sqlite3 :memory:", dir.path(), in);
  EXPECT_EQ(t.run.status, plain.status);
  EXPECT_EQ(t.run.out, plain.out);
  ASSERT_EQ(t.traces.size(), 1u);
  const auto r = memtide::test::replay_trace(t.traces[0]);
  ASSERT_TRUE(r.read_ok) << r.error;
  EXPECT_EQ(r.double_allocs, 0u);
  expect_close(heaptrack_comparable(r), heaptrack_calls("sqlite3 :memory:", dir.path(), in) - heaptrack_own_calls(r),
               "sqlite3");
  // The writer gave most records their short form (an address among the block's latest 32
  // allocated or freed ones): 90% in the benchmark's sqlite3 run.
  std::printf("sqlite3: %llu short and %llu full Alloc/Free records\n", static_cast<unsigned long long>(r.short_records),
              static_cast<unsigned long long>(r.full_records));
  EXPECT_GT(r.short_records, 2 * r.full_records);
}

TEST(RealPrograms, Python3) {
  if (!fs::exists("/usr/bin/python3") || !have("heaptrack")) GTEST_SKIP() << "python3 or heaptrack missing";
  TempDir dir;
  {
    std::ofstream py(dir.path() / "work.py");
    // Lists of more than 64 items are beyond pymalloc's small-object sizes: they use malloc.
    py << "d = {}\nfor i in range(100000):\n    d[str(i)] = list(range(i % 200))\n"
          "s = sum(len(v) for v in d.values())\nprint(len(d), s)\n";
  }
  const std::string cmd = "/usr/bin/python3 " + quote((dir.path() / "work.py").string());
  const Out plain = sh(cmd, dir.path());
  const Traced t = traced(cmd, dir.path());
  EXPECT_EQ(t.run.status, plain.status);
  EXPECT_EQ(t.run.out, plain.out);
  ASSERT_EQ(t.traces.size(), 1u);
  const auto r = memtide::test::replay_trace(t.traces[0]);
  ASSERT_TRUE(r.read_ok) << r.error;
  EXPECT_EQ(r.double_allocs, 0u);
  expect_close(heaptrack_comparable(r), heaptrack_calls(cmd, dir.path()) - heaptrack_own_calls(r), "python3");
}

TEST(RealPrograms, GxxCompile) {
  if (!have("g++") || !have("heaptrack")) GTEST_SKIP() << "g++ or heaptrack missing";
  TempDir dir;
  {
    std::ofstream cpp(dir.path() / "unit.cpp");
    cpp << "#include <map>\n#include <string>\n#include <vector>\n"
           "int main() { std::map<std::string, std::vector<int>> m; m[\"a\"].push_back(1); return (int)m.size() - 1; }\n";
  }
  const std::string cmd = "g++ -O1 -c unit.cpp -o unit.o";
  const Out plain = sh(cmd, dir.path());
  ASSERT_EQ(plain.status, 0) << plain.err;
  const std::string plain_obj = slurp(dir.path() / "unit.o");
  const Traced t = traced(cmd, dir.path());
  EXPECT_EQ(t.run.status, 0) << t.run.err;
  EXPECT_EQ(t.run.err, plain.err);
  EXPECT_EQ(slurp(dir.path() / "unit.o").size(), plain_obj.size()) << "the compiler's output changed";
  ASSERT_GE(t.traces.size(), 3u) << "g++, cc1plus and as, each in its own trace";

  // The driver: heaptrack records it alone.
  const auto driver = memtide::test::replay_trace(t.traces[0]);
  ASSERT_TRUE(driver.read_ok) << driver.error;
  expect_close(heaptrack_comparable(driver), heaptrack_calls(cmd, dir.path()) - heaptrack_own_calls(driver),
               "g++ driver");

  // The compiler proper, with the command line the driver used (from its trace).
  for (const auto& path : t.traces) {
    const auto r = memtide::test::replay_trace(path);
    if (r.argv.empty() || r.argv[0].find("cc1plus") == std::string::npos) continue;
    ASSERT_TRUE(r.read_ok) << r.error;
    EXPECT_EQ(r.double_allocs, 0u);
    std::string cc1;
    for (size_t i = 0; i < r.argv.size(); ++i) {
      std::string a = r.argv[i];
      if (i > 0 && r.argv[i - 1] == "-o") a = (dir.path() / "unit.s").string();  // its temp file is gone
      cc1 += quote(a) + " ";
    }
    expect_close(heaptrack_comparable(r), heaptrack_calls(cc1, dir.path()) - heaptrack_own_calls(r), "cc1plus");
    return;
  }
  ADD_FAILURE() << "no cc1plus trace among " << t.traces.size();
}


// The cached-rule unwinder and libunwind, both run on every stack of real programs (the
// trace keeps libunwind's): the same return addresses everywhere, and nearly every stack
// unwound without libunwind.
TEST(RealPrograms, FastUnwinderAgreesWithLibunwind) {
  TempDir dir;
  {
    std::ofstream sql(dir.path() / "script.sql");
    sql << "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT);\nBEGIN;\n";
    for (int i = 0; i < 5000; ++i) sql << "INSERT INTO t(name) VALUES('n" << i << "');\n";
    sql << "COMMIT;\nCREATE INDEX ti ON t(name);\nSELECT count(*) FROM t WHERE name LIKE 'n1%';\n";
    std::ofstream py(dir.path() / "work.py");
    py << "import json\nd = {str(i): list(range(i % 100)) for i in range(20000)}\nprint(len(json.dumps(d)))\n";
    std::ofstream cpp(dir.path() / "unit.cpp");
    cpp << "#include <map>\n#include <string>\n#include <vector>\n"
           "int main() { std::map<std::string, std::vector<int>> m; m[\"a\"].push_back(1); return (int)m.size() - 1; }\n";
  }
  struct Case {
    const char* tool;
    std::string cmd, in;
    int min_processes;
  };
  const Case cases[] = {
      {"sqlite3", "sqlite3 :memory:", (dir.path() / "script.sql").string(), 1},
      {"python3", "/usr/bin/python3 work.py", "", 1},
      {"g++", "g++ -O1 -c unit.cpp -o unit.o", "", 3},
  };
  for (const Case& c : cases) {
    if (!have(c.tool)) {
      std::printf("%s missing: skipped\n", c.tool);
      continue;
    }
    const Out plain = sh(c.cmd, dir.path(), c.in);
    const Traced t = traced("MEMTIDE_UNWIND=verify " + c.cmd, dir.path(), c.in);
    EXPECT_EQ(t.run.status, plain.status) << c.cmd << ": " << t.run.err;
    EXPECT_EQ(t.run.out, plain.out) << c.cmd;
    const memtide::test::VerifyCounts v = memtide::test::verify_counts(t.run.err);
    std::printf("%s: %d processes, %llu stacks, %llu by cached rules, %llu differ\n", c.tool, v.processes,
                static_cast<unsigned long long>(v.stacks), static_cast<unsigned long long>(v.fast),
                static_cast<unsigned long long>(v.differ));
    EXPECT_GE(v.processes, c.min_processes) << c.cmd << ": " << t.run.err;
    EXPECT_GT(v.stacks, 200u) << c.cmd;
    EXPECT_EQ(v.differ, 0u) << c.cmd << ": " << t.run.err;
    EXPECT_GE(static_cast<double>(v.fast), 0.99 * static_cast<double>(v.stacks)) << c.cmd;
  }
}
