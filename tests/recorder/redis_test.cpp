// redis-server (Debian's), a real long-running worker, recorded as a user would: started under
// `memtide run --leak-scan` on a loopback port, driven by redis-benchmark, filled with a
// million keys (DEBUG POPULATE: some 3 M live blocks, densely packed), stopped with
// `redis-cli shutdown nosave`. Its output and exit status are those of a run without memtide,
// and every reader is done within a bound that a replay whose cost grows with the live set
// per event cannot meet (a report of this trace took 42 s that way, 3 to 4 s now).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/recorder/e2e_run.h"

namespace fs = std::filesystem;
using memtide::test::run;
using memtide::test::RunResult;
using memtide::test::slurp;
using memtide::test::TempDir;

namespace {

// The bound on each reader (report, check, flamegraph, a viewer screenshot), in seconds.
constexpr double kReaderBound = 30;

bool have(const char* tool) { return std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) == 0; }

// Starts argv in the background with stdout and stderr to files in `dir`.
pid_t spawn(const std::vector<std::string>& argv, const fs::path& dir, const std::string& name) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = open((dir / (name + ".out")).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open((dir / (name + ".err")).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  return pid;
}

int wait_status(pid_t pid, int timeout_s) {
  int status = 0;
  for (int i = 0; i < timeout_s * 100; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    usleep(10000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

// The server's log without its variable parts (pid, role, time), one line per message.
std::vector<std::string> messages(const std::string& log) {
  std::vector<std::string> v;
  const std::regex prefix(R"(^\d+:[A-Z] \d+ \w+ \d+ [\d:.]+ [*#.-] )");
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    line = std::regex_replace(line, prefix, "");
    if (line.find("Redis version=") != std::string::npos || line.find("pid=") != std::string::npos ||
        line.find("Server initialized") != std::string::npos || line.find("DB saved") != std::string::npos ||
        line.find("Running mode=") != std::string::npos || line.find("oO0OoO0OoO0Oo") != std::string::npos)
      continue;  // (these carry the pid, or vary with the build)
    v.push_back(line);
  }
  return v;
}

struct Session {
  int status = -1;
  std::string log;
  long keys = 0;
};

// One redis session: `prefix` (memtide run ... --, or nothing) redis-server on `port`.
Session redis_session(const std::vector<std::string>& prefix, int port, const fs::path& dir, const std::string& name) {
  std::vector<std::string> argv = prefix;
  for (const char* a : {"redis-server", "--port", "", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                        "--enable-debug-command", "local", "--loglevel", "notice"})
    argv.emplace_back(a);
  argv[prefix.size() + 2] = std::to_string(port);
  const pid_t server = spawn(argv, dir, name);
  const std::string p = std::to_string(port);
  bool up = false;
  for (int i = 0; i < 300 && !up; ++i) {
    up = run({"redis-cli", "-p", p, "ping"}, {}, dir, 10).out.find("PONG") != std::string::npos;
    if (!up) usleep(100000);
  }
  Session s;
  EXPECT_TRUE(up) << name << ": redis-server did not answer";
  if (up) {
    RunResult b = run({"redis-benchmark", "-p", p, "-q", "-n", "30000", "-t", "set,get,lpush,incr",
                       "-d", "64"},
                      {}, dir, 300);
    EXPECT_EQ(b.status, 0) << b.err;
    RunResult pop = run({"redis-cli", "-p", p, "debug", "populate", "1000000"}, {}, dir, 300);
    EXPECT_NE(pop.out.find("OK"), std::string::npos) << pop.out << pop.err;
    RunResult n = run({"redis-cli", "-p", p, "dbsize"}, {}, dir, 60);
    s.keys = std::atol(n.out.c_str());
    run({"redis-cli", "-p", p, "shutdown", "nosave"}, {}, dir, 60);
  }
  s.status = wait_status(server, 300);
  s.log = slurp(dir / (name + ".out")) + slurp(dir / (name + ".err"));
  return s;
}

double seconds_of(const std::vector<std::string>& argv, const fs::path& dir, RunResult& r) {
  const auto t0 = std::chrono::steady_clock::now();
  r = run(argv, {}, dir, 600);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(RealPrograms, RedisServerUnderLoad) {
  ASSERT_TRUE(have("redis-server") && have("redis-benchmark") && have("redis-cli"))
      << "redis-server and redis-tools are needed (scripts/setup installs them)";
  TempDir dir;
  const int port = 21000 + ::getpid() % 20000;
  const Session plain = redis_session({}, port, dir.path(), "plain");
  const fs::path trace = dir.path() / "redis.mtide";
  const Session traced =
      redis_session({MT_WRAPPER, "run", "-q", "--leak-scan", "-o", trace.string(), "--"}, port + 1, dir.path(), "traced");

  // Output and exit unchanged.
  EXPECT_EQ(plain.status, 0) << plain.log;
  EXPECT_EQ(traced.status, plain.status) << traced.log;
  EXPECT_EQ(traced.keys, plain.keys);
  EXPECT_GE(traced.keys, 1000000);
  EXPECT_EQ(messages(traced.log), messages(plain.log)) << "traced:\n" << traced.log << "\nplain:\n" << plain.log;

  // Every reader, within the bound.
  const std::string cli = (fs::path(MT_WRAPPER).parent_path() / "memtide-cli").string();
  RunResult report, json, check, flame;
  const double t_report = seconds_of({cli, "report", trace.string()}, dir.path(), report);
  ASSERT_EQ(report.status, 0) << report.err;
  const double t_json = seconds_of({cli, "report", "--json", trace.string()}, dir.path(), json);
  ASSERT_EQ(json.status, 0) << json.err;
  const double t_check = seconds_of({cli, "check", "--include-reachable", trace.string()}, dir.path(), check);
  EXPECT_EQ(check.status, 1) << "redis exits without freeing its keyspace\n" << check.err;
  const double t_flame =
      seconds_of({cli, "flamegraph", trace.string(), "-o", (dir.path() / "f.svg").string()}, dir.path(), flame);
  EXPECT_EQ(flame.status, 0) << flame.err;
  std::printf("redis trace %.1f MB: report %.2f s, report --json %.2f s, check %.2f s, flamegraph %.2f s\n",
              static_cast<double>(fs::file_size(trace)) / 1e6, t_report, t_json, t_check, t_flame);
  EXPECT_LT(t_report, kReaderBound);
  EXPECT_LT(t_json, kReaderBound);
  EXPECT_LT(t_check, kReaderBound);
  EXPECT_LT(t_flame, kReaderBound);

  // Named as started; the keyspace still reachable at exit (the leak scan follows redis's
  // pointers from its globals), so nothing of it is a definite leak.
  EXPECT_NE(report.out.find("program     redis-server ("), std::string::npos) << report.out.substr(0, 400);
  std::smatch m;
  const std::regex leaked(R"(leaked +([0-9.]+) MiB in ([0-9,]+) blocks)");
  ASSERT_TRUE(std::regex_search(report.out, m, leaked)) << report.out.substr(0, 800);
  std::string blocks = m[2];
  std::erase(blocks, ',');  // (thousands separators)
  EXPECT_GT(std::stol(blocks), 2000000) << "the million keys are live at exit";
  const std::regex scan(R"("leak_scan": \{[^}]*"definite_bytes": 0,[^}]*"reachable_blocks": (\d+))");
  ASSERT_TRUE(std::regex_search(json.out, m, scan)) << json.out.substr(0, 600);
  EXPECT_GT(std::stol(m[1]), 2000000);
  // Suggested suppressions name the leak, not redis's allocation wrapper.
  const std::regex suggestion(R"(suppress with: leak:(\S+))");
  int suggestions = 0;
  for (auto it = std::sregex_iterator(report.out.begin(), report.out.end(), suggestion); it != std::sregex_iterator();
       ++it) {
    ++suggestions;
    const std::string fn = (*it)[1];
    EXPECT_EQ(fn.find("alloc"), std::string::npos) << fn;
    EXPECT_NE(fn, "zmalloc");
  }
  EXPECT_GT(suggestions, 3);
  // The JSON says the same: the program as started, a suggestion per heap leak.
  EXPECT_NE(json.out.find("\"program\": \"redis-server\""), std::string::npos);
  EXPECT_NE(json.out.find("\"suppression\": \"leak:"), std::string::npos);
  EXPECT_EQ(json.out.find("\"suppression\": \"leak:zmalloc"), std::string::npos);

  // The viewer opens it and draws its leaks.
  if (!have("xvfb-run")) {
    ADD_FAILURE() << "xvfb-run is missing (install xvfb and xauth: scripts/setup)";
    return;
  }
  const fs::path png = dir.path() / "leaks.png";
  RunResult view;
  const double t_view = seconds_of(
      {"xvfb-run", "-a", "-n", std::to_string(100 + ::getpid() % 800), MT_VIEW, "--screenshot", png.string(), "--view",
       "leaks", trace.string()},
      dir.path(), view);
  std::printf("viewer screenshot of the leaks: %.2f s\n", t_view);
  EXPECT_EQ(view.status, 0) << view.err;
  ASSERT_TRUE(fs::exists(png));
  EXPECT_GT(fs::file_size(png), 10000u);
  EXPECT_LT(t_view, kReaderBound);
}

// The same server kept to 64 MiB (`--keep`): a million keys (DEBUG POPULATE), 3 M SETs over half a
// million more, then SETs of new keys until it holds 2.5 M, all pipelined. The set
// holds a checkpoint and the events after it; its leaks are the whole keyspace, most of it
// allocated before the kept range; the growth gate fails at 1 MiB/s on the keys' stacks and
// passes at 1 GiB/s.
TEST(RealPrograms, RedisServerKeptWithAMillionKeys) {
  ASSERT_TRUE(have("redis-server") && have("redis-benchmark") && have("redis-cli"))
      << "redis-server and redis-tools are needed (scripts/setup installs them)";
  TempDir dir;
  const int port = 21002 + ::getpid() % 20000;
  const std::string p = std::to_string(port);
  const fs::path trace = dir.path() / "redis.mtide";
  const pid_t server = spawn({MT_WRAPPER, "run", "-q", "--keep", "64MiB", "-o", trace.string(), "--", "redis-server",
                              "--port", p, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                              "--enable-debug-command", "local"},
                             dir.path(), "kept");
  bool up = false;
  for (int i = 0; i < 300 && !up; ++i) {
    up = run({"redis-cli", "-p", p, "ping"}, {}, dir.path(), 10).out.find("PONG") != std::string::npos;
    if (!up) usleep(100000);
  }
  ASSERT_TRUE(up) << slurp(dir.path() / "kept.err");
  EXPECT_NE(run({"redis-cli", "-p", p, "debug", "populate", "1000000"}, {}, dir.path(), 300).out.find("OK"),
            std::string::npos);
  // SETs over half a million keys (overwritten over and over: the set moves on, its checkpoints
  // stay within a third of it), then SETs of new keys, stopped while they go on: the keyspace
  // grows to the end, as a leak does.
  const RunResult over = run({"redis-benchmark", "-p", p, "-q", "-n", "3000000", "-t", "set", "-r", "500000", "-d", "64",
                              "-P", "16"},
                             {}, dir.path(), 600);
  EXPECT_EQ(over.status, 0) << over.err;
  const pid_t bench = spawn({"redis-benchmark", "-p", p, "-q", "-n", "100000000", "-t", "set", "-r", "100000000", "-d",
                             "64", "-P", "16"},
                            dir.path(), "bench");
  long keys = 0;
  for (int i = 0; i < 900 && keys < 2500000; ++i) {
    usleep(100000);
    keys = std::atol(run({"redis-cli", "-p", p, "dbsize"}, {}, dir.path(), 60).out.c_str());
  }
  EXPECT_GE(keys, 2500000) << "a million, half a million, and a million SETs of new keys";
  run({"redis-cli", "-p", p, "shutdown", "nosave"}, {}, dir.path(), 60);
  EXPECT_EQ(wait_status(server, 300), 0) << slurp(dir.path() / "kept.err");
  kill(bench, SIGTERM);
  wait_status(bench, 60);

  // The set moved on: its first segments are gone.
  unsigned first = ~0u, last = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    unsigned n = 0;
    if (std::sscanf(e.path().filename().c_str(), "redis.%u.mtide", &n) == 1) first = std::min(first, n), last = std::max(last, n);
  }
  ASSERT_GT(last, 0u);
  EXPECT_GT(first, 1u) << "segments " << first << "-" << last << ": the set must move on for the test to tell";
  const std::string cli = (fs::path(MT_WRAPPER).parent_path() / "memtide-cli").string();
  const RunResult json = run({cli, "report", "--json", trace.string()}, {}, dir.path(), 600);
  ASSERT_EQ(json.status, 0) << json.err;
  EXPECT_EQ(json.out.find("no checkpoint"), std::string::npos);
  std::smatch m;
  const std::regex before(R"("kept_range": \{[^}]*"leaked_before_blocks": (\d+))");
  ASSERT_TRUE(std::regex_search(json.out, m, before)) << json.out.substr(0, 1500);
  EXPECT_GT(std::stol(m[1]), 2000000) << "the keyspace allocated before the kept range, live at exit";

  const RunResult grows = run({cli, "check", "--max-growth", "1MiB/s", trace.string()}, {}, dir.path(), 600);
  EXPECT_EQ(grows.status, 1) << grows.out << grows.err;
  EXPECT_NE(grows.out.find("FAIL heap growth"), std::string::npos) << grows.out;
  EXPECT_TRUE(grows.out.find("_sdsnewlen") != std::string::npos || grows.out.find("dictAddRaw") != std::string::npos)
      << grows.out.substr(0, 3000);
  const RunResult passes = run({cli, "check", "--max-growth", "1GiB/s", trace.string()}, {}, dir.path(), 600);
  EXPECT_EQ(passes.status, 0) << passes.out << passes.err;
}

}  // namespace
