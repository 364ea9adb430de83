// End-to-end tests: real programs run under the real LD_PRELOAD; their traces are read back
// with the real reader and merger (trace_replay.h) and compared with what the programs did.
#include <fcntl.h>
#include <signal.h>
#include <linux/membarrier.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "recorder/options.h"
#include "tests/recorder/e2e_run.h"
#include "tests/recorder/test_support.h"
#include "tests/recorder/trace_replay.h"

namespace fs = std::filesystem;
using memtide::fmt::Api;
using memtide::test::manifest_traces;
using memtide::test::slurp;
using memtide::test::TempDir;
using memtide::test::verify_counts;
using memtide::test::VerifyCounts;
using memtide::test::Replay;
using memtide::test::replay_trace;
using memtide::test::expect_consistent;
using memtide::test::live;
using memtide::test::membarrier_available;
using memtide::test::run;
using memtide::test::RunResult;
using memtide::test::traced;

namespace {

nlohmann::json run_exact(const fs::path& dir, bool baseline, Replay& replay, bool pvalloc = true) {
  std::vector<std::string> argv{MT_EXACT, "--out", (dir / "tally.json").string()};
  if (baseline) argv.push_back("--baseline");
  if (!pvalloc) argv.push_back("--no-pvalloc");
  RunResult r;
  auto traces = traced(argv, dir, &r);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(traces.size(), 1u);
  if (traces.empty()) return {};
  replay = replay_trace(traces[0]);
  EXPECT_TRUE(replay.read_ok) << replay.error;
  return nlohmann::json::parse(slurp(dir / "tally.json"));
}

// Runs argv under the preload with `env` and checks what every run of the chunk-boundary test
// must give: the exit status, one trace, read whole, consistent, with its End record. The
// trace (empty, and a failure, when there was not exactly one).
Replay whole_trace(const std::vector<std::string>& argv, const fs::path& dir,
                   std::vector<std::pair<std::string, std::string>> env, int status) {
  RunResult r;
  auto traces = traced(argv, dir, &r, std::move(env));
  EXPECT_EQ(r.status, status) << r.err;
  if (traces.size() != 1) {
    ADD_FAILURE() << traces.size() << " traces instead of one";
    return {};
  }
  Replay t = replay_trace(traces[0]);
  EXPECT_TRUE(t.read_ok) << t.error;
  expect_consistent(t);
  EXPECT_TRUE(t.ended);
  return t;
}

const std::vector<std::pair<std::string, Api>> kTallyApis = {
    {"malloc", Api::Malloc},        {"calloc", Api::Calloc},
    {"realloc", Api::Realloc},      {"reallocarray", Api::Reallocarray},
    {"posix_memalign", Api::PosixMemalign}, {"aligned_alloc", Api::AlignedAlloc},
    {"memalign", Api::Memalign},    {"valloc", Api::Valloc},
    {"pvalloc", Api::Pvalloc},      {"free", Api::Free},
    {"new", Api::New},              {"new[]", Api::NewArray},
    {"new(align)", Api::NewAligned}, {"new[](align)", Api::NewArrayAligned},
    {"delete", Api::Delete},        {"delete[]", Api::DeleteArray},
    {"delete(align)", Api::DeleteAligned}, {"delete[](align)", Api::DeleteArrayAligned},
    {"mmap", Api::Mmap},            {"munmap", Api::Munmap},
    {"custom", Api::Custom}};

}  // namespace

// Every API, 8 threads, cross-thread frees: the trace minus the baseline run's trace equals
// the program's own tally, call by call and byte by byte; the leaks and the peak are exact.
TEST(ExactWorkload, CountsPerApiEqualWhatTheProgramDid) {
  TempDir full_dir, base_dir;
  Replay full, base;
  const nlohmann::json tally = run_exact(full_dir.path(), false, full);
  run_exact(base_dir.path(), true, base);
  expect_consistent(full);
  expect_consistent(base);
  for (const auto& [name, api] : kTallyApis) {
    const auto i = static_cast<unsigned>(api);
    EXPECT_EQ(full.allocs[i] - base.allocs[i], tally["apis"][name]["allocs"].get<uint64_t>()) << name << " allocations";
    EXPECT_EQ(full.frees[i] - base.frees[i], tally["apis"][name]["frees"].get<uint64_t>()) << name << " frees";
    EXPECT_EQ(full.bytes[i] - base.bytes[i], tally["apis"][name]["bytes"].get<uint64_t>()) << name << " bytes";
  }
  EXPECT_EQ(full.heap_allocs - base.heap_allocs, tally["heap_allocs"].get<uint64_t>());
  EXPECT_EQ(full.heap_frees - base.heap_frees, tally["heap_frees"].get<uint64_t>());
  // Leaks: leak_small's 1013-byte blocks and leak_big's 10007-byte block, exactly.
  EXPECT_EQ(live(full, 1013) - live(base, 1013), tally["leaks"]["leak_small"]["blocks"].get<uint64_t>());
  EXPECT_EQ(live(full, 10007) - live(base, 10007), tally["leaks"]["leak_big"]["blocks"].get<uint64_t>());
  // The peak: the 64 MiB block plus every worker's held blocks, plus the little the runtime
  // itself holds (bounded by the baseline run's own peak).
  const uint64_t peak_own = tally["peak_own"].get<uint64_t>();
  EXPECT_GE(full.peak_bytes, peak_own);
  EXPECT_LE(full.peak_bytes, peak_own + base.peak_bytes);
  ASSERT_TRUE(full.marker_times.count("peak") && full.marker_times.count("after-peak"));
  EXPECT_LE(full.peak_time, full.marker_times["peak"]);
  EXPECT_GE(full.peak_time, full.marker_times["start"]);
  // Threads and their names.
  EXPECT_GE(full.threads, 9u);
  for (int t = 0; t < 8; ++t)
    EXPECT_NE(std::find(full.thread_name_list.begin(), full.thread_name_list.end(), "worker-" + std::to_string(t)),
              full.thread_name_list.end());
  EXPECT_TRUE(full.ended);
  EXPECT_EQ(full.end_reason, memtide::fmt::EndReason::Exit);
  EXPECT_GT(full.counters, 0u);
}

// The same program under valgrind: memtide counts exactly the allocations valgrind counts.
TEST(ExactWorkload, AllocationCountMatchesValgrind) {
  if (system("command -v valgrind >/dev/null 2>&1") != 0) GTEST_SKIP() << "valgrind is not installed";
  TempDir dir, vdir;
  Replay r;
  run_exact(dir.path(), false, r, /*pvalloc=*/false);  // valgrind aborts on pvalloc
  RunResult v = run({"valgrind", "--run-libc-freeres=no", "--run-cxx-freeres=no", MT_EXACT, "--no-pvalloc", "--out",
                     (vdir.path() / "tally.json").string()},
                    {},
                    vdir.path(), 600);
  ASSERT_EQ(v.status, 0) << v.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(v.err, m, std::regex(R"(total heap usage: ([\d,]+) allocs, ([\d,]+) frees)")));
  auto num = [](std::string s) {
    s.erase(std::remove(s.begin(), s.end(), ','), s.end());
    return std::stoull(s);
  };
  const uint64_t v_allocs = num(m[1]), v_frees = num(m[2]);
  // valgrind counts realloc(p, n) as one allocation and one free, like memtide; it does not
  // count memtide_alloc pool blocks or mmap.
  std::printf("valgrind: %llu allocs, %llu frees; memtide: %llu allocs, %llu frees\n",
              static_cast<unsigned long long>(v_allocs), static_cast<unsigned long long>(v_frees),
              static_cast<unsigned long long>(r.heap_allocs), static_cast<unsigned long long>(r.heap_frees));
  EXPECT_EQ(r.heap_allocs, v_allocs);
  EXPECT_EQ(r.heap_frees, v_frees);
}

// The event clock is the TSC, calibrated against CLOCK_MONOTONIC in two steps (after a few
// ms, then after 100 ms, going on from where the first step is). Markers made over 200 ms, each
// between two readings of CLOCK_MONOTONIC by the program: every trace time lies between its
// readings, give or take what the first step's error can add up to (allowed: 50 us), and the
// markers' times increase.
TEST(Clock, EventTimesFollowClockMonotonicAcrossTheCalibration) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "clock", "200"}, dir.path(), &r);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(traces.size(), 1u);
  const Replay rep = replay_trace(traces[0]);
  ASSERT_TRUE(rep.read_ok) << rep.error;
  constexpr int64_t kSlack = 50000;
  std::istringstream lines(r.out);
  std::string label;
  unsigned long long before = 0, after = 0;
  uint64_t prev = 0;
  int n = 0;
  while (lines >> label >> before >> after) {
    auto it = rep.marker_times.find(label);
    ASSERT_NE(it, rep.marker_times.end()) << label;
    const auto t = static_cast<int64_t>(it->second);
    EXPECT_GE(t, static_cast<int64_t>(before) - kSlack) << label << ": " << t << " not in [" << before << ", " << after << "]";
    EXPECT_LE(t, static_cast<int64_t>(after) + kSlack) << label << ": " << t << " not in [" << before << ", " << after << "]";
    EXPECT_GT(it->second, prev) << label;
    prev = it->second;
    ++n;
  }
  EXPECT_EQ(n, 200);
}

// While one thread records, most of its events take the time of the record before them
// (event_time in recorder/internal.h), never older than the writer's last clock tick (every
// 10 ms). 40 bursts of 20 allocations, 40 ms apart, with the writer's flushes and counters
// turned down so that only that tick can tell the thread that time passed: no allocation may
// carry the time of the burst before it (40 ms older), none is later than its burst's end,
// and none is earlier than its start by more than a tick (plus 2 ms for scheduling).
TEST(Clock, ReusedEventTimesStayWithinTheirBurst) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "bursts", "40", "40"}, dir.path(), &r,
                       {{"MEMTIDE_FLUSH_INTERVAL_MS", "500"}, {"MEMTIDE_COUNTER_INTERVAL_MS", "0"}});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(traces.size(), 1u);
  const Replay rep = replay_trace(traces[0]);
  ASSERT_TRUE(rep.read_ok) << rep.error;
  expect_consistent(rep);
  constexpr int64_t kSlack = 50000, kTick = 12000000;
  std::istringstream lines(r.out);
  std::string label;
  unsigned long long before = 0, after = 0;
  int bursts = 0, shared_times = 0;
  while (lines >> label >> before >> after) {
    const uint64_t size = 5000 + std::stoull(label.substr(1));
    auto it = rep.alloc_times.find(size);
    ASSERT_NE(it, rep.alloc_times.end()) << label;
    ASSERT_EQ(it->second.size(), 20u) << label;
    for (const uint64_t t : it->second) {
      EXPECT_GE(static_cast<int64_t>(t), static_cast<int64_t>(before) - kTick) << label << ": " << t << " not in [" << before << ", " << after << "]";
      EXPECT_LE(static_cast<int64_t>(t), static_cast<int64_t>(after) + kSlack) << label << ": " << t << " not in [" << before << ", " << after << "]";
    }
    std::vector<uint64_t> distinct = it->second;
    std::sort(distinct.begin(), distinct.end());
    if (std::unique(distinct.begin(), distinct.end()) != distinct.end()) ++shared_times;
    ++bursts;
  }
  EXPECT_EQ(bursts, 40);
  EXPECT_GT(shared_times, bursts / 2) << "every allocation read the clock: the test proves nothing";
}

// One thread allocating without pause while the writer flushes every 10 ms: the times its
// events reuse never fall behind a watermark written before them.
TEST(Ordering, OneThreadsReusedTimesAreNotOvertakenByWatermarks) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "spin"}, dir.path(), &r, {{"MEMTIDE_FLUSH_INTERVAL_MS", "10"}}, /*kill_after_ms=*/1000);
  EXPECT_EQ(r.status, 128 + SIGKILL);
  ASSERT_EQ(traces.size(), 1u);
  const Replay rep = replay_trace(traces[0]);
  EXPECT_GT(rep.allocs[static_cast<unsigned>(Api::Malloc)], 100000u);
  EXPECT_EQ(rep.double_allocs, 0u);
  EXPECT_EQ(rep.unknown_frees, 0u);
  EXPECT_EQ(rep.out_of_order, 0u) << "a record reached the file after a watermark that vouched for its time";
  EXPECT_EQ(rep.exact_watermarks, membarrier_available());
}

// One thread frees, the other gets the same address back, 300,000 times: the replay never
// sees an address allocated twice or freed twice.
TEST(Ordering, CrossThreadAddressReuseReplaysExactly) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_PINGPONG, "300000"}, dir.path(), &r);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(traces.size(), 1u);
  long rounds = 0, reused = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "rounds %ld reused %ld", &rounds, &reused), 2);
  EXPECT_GT(reused, rounds / 2) << "the allocator did not reuse the address; the test proves nothing";
  const Replay rep = replay_trace(traces[0]);
  ASSERT_TRUE(rep.read_ok) << rep.error;
  expect_consistent(rep);
  EXPECT_GE(rep.allocs[static_cast<unsigned>(Api::Malloc)], 300000u);
  EXPECT_GE(rep.frees[static_cast<unsigned>(Api::Free)], 300000u);
}

// A thread interrupted between reading the clock for a record and committing it (a signal
// handler that runs for 3 ms), 200 times, while another thread allocates and the writer flushes
// every 10 ms. With exact watermarks the merge releases everything before a watermark as soon
// as it reads it: a watermark that vouched for such a record before it was written shows as
// records merged out of order.
TEST(Ordering, ARecordDelayedAfterItsClockReadIsNotOvertakenByWatermarks) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_SIGNAL_STORM, "200"}, dir.path(), &r, {{"MEMTIDE_FLUSH_INTERVAL_MS", "10"}});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(traces.size(), 1u);
  long signals = 0, handled = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "signals %ld handled %ld", &signals, &handled), 2) << r.out;
  EXPECT_GT(handled, signals / 2) << "the signals did not interrupt the thread; the test proves nothing";
  const Replay rep = replay_trace(traces[0]);
  ASSERT_TRUE(rep.read_ok) << rep.error;
  expect_consistent(rep);
}

TEST(Lifecycle, ForkChildGetsItsOwnTraceAndExecIsFollowed) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "fork"}, dir.path(), &r);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(traces.size(), 3u) << "parent, forked child, exec'd image";
  const Replay parent = replay_trace(traces[0]);
  ASSERT_TRUE(parent.read_ok) << parent.error;
  EXPECT_TRUE(parent.ended);
  EXPECT_EQ(parent.end_reason, memtide::fmt::EndReason::Exec);
  EXPECT_EQ(parent.bytes[static_cast<unsigned>(Api::Malloc)] >= 2 * 5555, true);
  // The child and the exec'd image, in whatever order they were created.
  int child_seen = 0, exec_seen = 0;
  for (size_t i = 1; i < traces.size(); ++i) {
    const Replay t = replay_trace(traces[i]);
    ASSERT_TRUE(t.read_ok) << t.error;
    EXPECT_TRUE(t.ended);
    EXPECT_EQ(t.double_allocs, 0u);
    if (live(t, 7777) == 3) {
      ++child_seen;
      EXPECT_EQ(live(t, 5555), 0u) << "the parent's allocations were repeated in the child's trace";
      EXPECT_EQ(t.unknown_frees, 1u) << "the child frees one block the parent made";
      EXPECT_EQ(t.ppid, parent.pid);
    } else if (live(t, 8888) == 2) {
      ++exec_seen;
      EXPECT_EQ(t.pid, parent.pid) << "exec keeps the pid";
      EXPECT_TRUE(t.argv.size() == 2 && t.argv[1] == "exec-image");
    }
  }
  EXPECT_EQ(child_seen, 1);
  EXPECT_EQ(exec_seen, 1);
}

TEST(Lifecycle, NoFollowLeavesExecdProgramsUntraced) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "fork"}, dir.path(), &r, {{"MEMTIDE_FOLLOW", "0"}});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(traces.size(), 2u) << "parent and forked child only";
}

// Not followed means not touched: the program and what it starts see the environment they
// would see untraced, without the recorder's variables and with only the other LD_PRELOAD
// entries; the program's own trace is written all the same (and named in the manifest).
TEST(Lifecycle, NoFollowLeavesNoTraceInTheEnvironment) {
  TempDir dir;
  const fs::path manifest = dir.path() / "manifest";
  RunResult r = run({"sh", "-c", "env; echo ---; exec env"},
                    {{"LD_PRELOAD", std::string(MT_PRELOAD) + ":" + MT_DLTARGET},
                     {"MEMTIDE_FOLLOW", "0"},
                     {"MEMTIDE_MANIFEST", manifest.string()},
                     {"MEMTIDE_OUTPUT", (dir.path() / "sh.mtide").string()}},
                    dir.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("MEMTIDE_"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("libmemtide"), std::string::npos) << r.out;
  const std::string other = std::string("LD_PRELOAD=") + MT_DLTARGET + "\n";
  const size_t first = r.out.find(other);
  EXPECT_NE(first, std::string::npos) << r.out;
  EXPECT_NE(r.out.find(other, first + 1), std::string::npos) << "the exec'd program's environment too\n" << r.out;
  const auto traces = manifest_traces(manifest);
  ASSERT_EQ(traces.size(), 1u);
  EXPECT_EQ(traces[0], (dir.path() / "sh.mtide").string());
  const Replay t = replay_trace(traces[0]);
  EXPECT_TRUE(t.read_ok) << t.error;
  EXPECT_TRUE(t.ended);
}

// A thread's first allocation comes from glibc inside the program's own pthread_getattr_np
// (as with every thread of a JVM), which holds the thread's lock while it allocates: the
// recorder, setting up the thread, must not ask for the stack the same way (it waited for
// that lock for ever: java -version hung).
TEST(Lifecycle, AThreadWhoseFirstAllocationIsInsidePthreadGetattrNp) {
  TempDir dir;
  RunResult r = run({MT_LIFECYCLE, "getattr", "8"},
                    {{"LD_PRELOAD", MT_PRELOAD}, {"MEMTIDE_OUTPUT", (dir.path() / "g.mtide").string()}}, dir.path(),
                    /*timeout_s=*/30);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("getattr done"), std::string::npos);
  const Replay t = replay_trace((dir.path() / "g.mtide").string());
  ASSERT_TRUE(t.read_ok) << t.error;
  expect_consistent(t);
  EXPECT_TRUE(t.ended);
  EXPECT_EQ(live(t, 5151), 8u);
  EXPECT_GE(t.threads, 9u);
}

TEST(Lifecycle, ThousandShortLivedThreads) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "threads", "1000"}, dir.path(), &r);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(traces.size(), 1u);
  const Replay t = replay_trace(traces[0]);
  ASSERT_TRUE(t.read_ok) << t.error;
  expect_consistent(t);
  EXPECT_GE(t.threads, 1001u);
  EXPECT_EQ(live(t, 4321), 1000u);
  EXPECT_EQ(live(t, 100), 0u);
}

// What the recorder keeps per thread stays small: 200 threads alive at once, each having made
// 2000 allocations (enough walks for a table of kept stacks). With a table from the recorder's
// heap for each (touched whole) the traced process had about 1.2 MB more resident per thread;
// now about 0.2 MB.
TEST(Lifecycle, ResidentMemoryPerThreadStaysSmall) {
  TempDir dir;
  const int n = 200;
  const RunResult plain = run({MT_LIFECYCLE, "resident", std::to_string(n)}, {}, dir.path());
  ASSERT_EQ(plain.status, 0) << plain.err;
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "resident", std::to_string(n)}, dir.path(), &r);
  ASSERT_EQ(r.status, 0) << r.err;
  long untraced_kb = 0, traced_kb = 0;
  ASSERT_EQ(std::sscanf(plain.out.c_str(), "rss_kb %ld", &untraced_kb), 1) << plain.out;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "rss_kb %ld", &traced_kb), 1) << r.out;
  EXPECT_LT(traced_kb - untraced_kb, n * 512L) << "untraced " << untraced_kb << " kB, traced " << traced_kb << " kB";
  ASSERT_EQ(traces.size(), 1u);
  const Replay t = replay_trace(traces[0]);
  ASSERT_TRUE(t.read_ok) << t.error;
  expect_consistent(t);
  EXPECT_GE(t.allocs[static_cast<unsigned>(Api::Malloc)], n * 2000u);
}

// The recorder never asks glibc for its heap statistics: mallinfo and mallinfo2 walk every free
// chunk of an arena with its lock held, stalling the program's allocations for as long (250 ms
// a call with 2 M free chunks; a Python program running on malloc, asked every 100 ms, made
// almost no progress). The program defines both, so any call of them in the process is counted.
TEST(Lifecycle, TheProgramsHeapIsNeverWalkedUnderItsLock) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "free-chunks", "300000"}, dir.path(), &r);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "mallinfo calls 0\n");
  ASSERT_EQ(traces.size(), 1u);
  const Replay t = replay_trace(traces[0]);
  ASSERT_TRUE(t.read_ok) << t.error;
  expect_consistent(t);
  EXPECT_GT(t.counters, 0u) << "the process counters are still sampled";
  EXPECT_GE(t.allocs[static_cast<unsigned>(Api::Malloc)], 800000u);
}

// A program that sleeps does not grow its trace by a record per interval: the counters are
// written when they change (with the last unchanged reading before the change, so the series
// steps where the memory grew), once a second, and at the end; a flush pass that would find
// nothing new writes no watermark. Before: 100 Counters and 50 watermarks a second.
TEST(Lifecycle, AnIdleProgramsTraceGrowsOnlyWhenSomethingChanges) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "idle-touch", "1500"}, dir.path(), &r);
  ASSERT_EQ(r.status, 0) << r.err;
  unsigned long long before = 0, after = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "touch %llu %llu", &before, &after), 2) << r.out;
  ASSERT_EQ(traces.size(), 1u);
  const Replay t = replay_trace(traces[0]);
  ASSERT_TRUE(t.read_ok) << t.error;
  expect_consistent(t);
  // 3 s of sleep: a heartbeat a second, the first and last samples, the memory's growth.
  EXPECT_LE(t.counters, 24u);
  EXPECT_LE(t.watermarks, 30u);
  ASSERT_GE(t.rss_series.size(), 4u);
  uint64_t low = UINT64_MAX, high = 0;
  for (const auto& [time, rss] : t.rss_series) {
    low = std::min(low, rss);
    high = std::max(high, rss);
  }
  ASSERT_GE(high, low + (60u << 20)) << "the 64 MiB written do not show in the resident size";
  // The last reading before the growth and the first after it: at most a few intervals apart
  // (not a heartbeat apart), around the time the program wrote to the block.
  size_t up = 0;
  while (up < t.rss_series.size() && t.rss_series[up].second < low + (8u << 20)) ++up;
  ASSERT_GT(up, 0u);
  ASSERT_LT(up, t.rss_series.size());
  const uint64_t last_low = t.rss_series[up - 1].first, first_high = t.rss_series[up].first;
  EXPECT_LE(first_high - last_low, 200000000u) << "the series ramps from an old reading";
  EXPECT_GE(first_high, before);
  EXPECT_LE(last_low, after);
  // The series reaches the end of the run (the last sleep of 1.5 s).
  EXPECT_GE(t.rss_series.back().first, after + 1000000000u);
  EXPECT_GE(t.rss_series.back().second, low + (60u << 20));
}

// An idle program does not wake the writer a hundred times a second (149 wakes in a second of
// sleep before: counters every 10 ms, clock ticks, flush checks), and the events of its next
// burst are timed when they happened: while the writer idles no event reuses an older time.
TEST(Lifecycle, AnIdleProgramSeldomWakesTheWriterAndIsTimedWhenItResumes) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "idle-resume", "1000"}, dir.path(), &r);
  ASSERT_EQ(r.status, 0) << r.err;
  unsigned long long wakes = 0, before = 0, after = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "wakes %llu burst %llu %llu", &wakes, &before, &after), 3) << r.out;
  EXPECT_LE(wakes, 60u);
  ASSERT_EQ(traces.size(), 1u);
  const Replay t = replay_trace(traces[0]);
  ASSERT_TRUE(t.read_ok) << t.error;
  expect_consistent(t);
  EXPECT_GE(t.allocs[static_cast<unsigned>(Api::Malloc)], 51u);
  const auto it = t.alloc_times.find(4242);
  ASSERT_NE(it, t.alloc_times.end());
  ASSERT_EQ(it->second.size(), 50u);
  // The recorder's clock (the TSC, scaled) and CLOCK_MONOTONIC may differ by a few microseconds
  // (as in Clock.ReusedEventTimesStayWithinTheirBurst); a reused time would be 5 ms old.
  constexpr int64_t kSlack = 50000;
  for (const uint64_t time : it->second) {
    EXPECT_GE(static_cast<int64_t>(time), static_cast<int64_t>(before) - kSlack);
    EXPECT_LE(static_cast<int64_t>(time), static_cast<int64_t>(after) + kSlack);
  }
}

TEST(Lifecycle, DlopenedModuleIsRecorded) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "dlopen", MT_DLTARGET}, dir.path(), &r);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(traces.size(), 1u);
  const Replay t = replay_trace(traces[0]);
  ASSERT_TRUE(t.read_ok) << t.error;
  int loads = 0;
  for (const auto& p : t.module_paths) loads += p.find("dltarget") != std::string::npos;
  EXPECT_EQ(loads, 1);
  EXPECT_GE(t.module_unloads, 1u) << "dlclose was not recorded";
  EXPECT_EQ(live(t, 2468), 1u);
  // The real dlopen allocates (the loader's object for the module) under memtide's dlopen: its
  // stacks go from the program to libc's dlopen, without the interposer between them.
  expect_consistent(t);
  EXPECT_EQ(t.frames_in_recorder, 0u);
}

TEST(Lifecycle, QuickExitIsFlushed) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "quick-exit"}, dir.path(), &r);
  EXPECT_EQ(r.status, 3);
  ASSERT_EQ(traces.size(), 1u);
  const Replay t = replay_trace(traces[0]);
  ASSERT_TRUE(t.read_ok) << t.error;
  EXPECT_TRUE(t.ended);
  EXPECT_EQ(t.end_reason, memtide::fmt::EndReason::ImmediateExit);
  EXPECT_EQ(t.end_status, 3u);
  EXPECT_EQ(live(t, 9999), 3u);
}

TEST(Lifecycle, FatalSignalIsFlushedThenReraised) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "abort"}, dir.path(), &r);
  EXPECT_EQ(r.status, 128 + SIGABRT) << "the signal still ends the program";
  ASSERT_EQ(traces.size(), 1u);
  const Replay t = replay_trace(traces[0]);
  ASSERT_TRUE(t.read_ok) << t.error;
  EXPECT_TRUE(t.ended);
  EXPECT_EQ(t.end_reason, memtide::fmt::EndReason::Signal);
  EXPECT_EQ(t.end_status, static_cast<uint64_t>(SIGABRT));
  EXPECT_EQ(live(t, 6666), 1u);
}

// A fatal signal ends the program as it would untraced, whatever its other signal handlers do:
// while the recorder flushes, a SIGALRM handler that siglongjmps (a 100 us timer) could take
// the program out of the fatal-signal handler, and abort() returned into the program, which
// printed its next line and exited 0.
TEST(Lifecycle, AFatalSignalCannotBeSurvivedThroughAnotherHandler) {
  for (int i = 0; i < 5; ++i) {
    TempDir dir;
    RunResult r;
    auto traces = traced({MT_LIFECYCLE, "abort-timer"}, dir.path(), &r);
    EXPECT_EQ(r.status, 128 + SIGABRT) << r.out << r.err;
    EXPECT_EQ(r.out.find("survived abort"), std::string::npos);
    ASSERT_EQ(traces.size(), 1u);
    const Replay t = replay_trace(traces[0]);
    ASSERT_TRUE(t.read_ok) << t.error;
    EXPECT_TRUE(t.ended);
    EXPECT_EQ(t.end_reason, memtide::fmt::EndReason::Signal);
    EXPECT_EQ(live(t, 6666), 1u);
  }
}

TEST(Lifecycle, ExitFromAnotherThread) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "exit-thread"}, dir.path(), &r);
  EXPECT_EQ(r.status, 5);
  ASSERT_EQ(traces.size(), 1u);
  const Replay t = replay_trace(traces[0]);
  ASSERT_TRUE(t.read_ok) << t.error;
  EXPECT_TRUE(t.ended);
  EXPECT_EQ(live(t, 4444), 1u);
}

// The End record says how the process ended and with what status, for every way out, from the
// main thread and from another one; what the exit handlers allocate is recorded.
TEST(Lifecycle, EndRecordHasTheRealWayOutAndStatus) {
  using memtide::fmt::EndReason;
  const struct {
    const char* way;
    const char* where;
    int status;  // what the shell sees
    EndReason reason;
    uint64_t end_status;
    uint64_t handler_block;  // the block the exit handlers that run allocate (0: none run)
  } ways[] = {
      {"return", "main", 7, EndReason::Exit, 7, 2020},
      {"exit", "main", 7, EndReason::Exit, 7, 2020},
      {"exit", "thread", 7, EndReason::Exit, 7, 2020},
      {"_exit", "main", 7, EndReason::ImmediateExit, 7, 0},
      {"_exit", "thread", 7, EndReason::ImmediateExit, 7, 0},
      {"_Exit", "main", 7, EndReason::ImmediateExit, 7, 0},
      {"quick_exit", "main", 7, EndReason::QuickExit, 7, 2121},
      {"quick_exit", "thread", 7, EndReason::QuickExit, 7, 2121},
      {"signal", "main", 128 + SIGTERM, EndReason::Signal, SIGTERM, 0},
      {"signal", "thread", 128 + SIGTERM, EndReason::Signal, SIGTERM, 0},
  };
  for (const auto& w : ways) {
    SCOPED_TRACE(std::string(w.way) + " from " + w.where);
    TempDir dir;
    RunResult r;
    const int arg = w.reason == EndReason::Signal ? SIGTERM : w.status;
    auto traces = traced({MT_EXIT_WAYS, w.way, w.where, std::to_string(arg)}, dir.path(), &r);
    EXPECT_EQ(r.status, w.status) << r.err;
    ASSERT_EQ(traces.size(), 1u);
    const Replay t = replay_trace(traces[0]);
    ASSERT_TRUE(t.read_ok) << t.error;
    EXPECT_TRUE(t.ended);
    EXPECT_EQ(t.end_reason, w.reason);
    EXPECT_EQ(t.end_status, w.end_status);
    EXPECT_EQ(live(t, 3000 + static_cast<uint64_t>(arg)), 1u);
    if (w.handler_block) {
      EXPECT_EQ(live(t, w.handler_block), 1u) << "the exit handlers' allocations are recorded";
    }
  }
  for (const char* where : {"main", "thread"}) {
    SCOPED_TRACE(std::string("exec from ") + where);
    TempDir dir;
    RunResult r;
    auto traces = traced({MT_EXIT_WAYS, "exec", where, "7"}, dir.path(), &r);
    EXPECT_EQ(r.status, 7) << r.err;
    ASSERT_EQ(traces.size(), 2u);
    const Replay before = replay_trace(traces[0]), after = replay_trace(traces[1]);
    EXPECT_EQ(before.end_reason, EndReason::Exec);
    EXPECT_EQ(after.end_reason, EndReason::Exit);
    EXPECT_EQ(after.end_status, 7u);
  }
}

// Chunks of a few records each (MEMTIDE_TEST_CHUNK_BYTES), so that the records of every
// stream cross chunk boundaries all the time, also the last counters and the End: every way
// out of the program still ends its trace, and the trace holds exactly what the program did.
// (The End was lost whenever it did not fit in the process stream's chunk: one python3 run in
// about twenty under memtide run. With mimalloc serving the program, a thread whose ThreadExit
// record needed a new chunk crashed the program: mimalloc had deleted the thread's heap.)
TEST(Lifecycle, TracesStayWholeAcrossChunkBoundaries) {
  for (const char* bytes : {"16", "100"}) {
    SCOPED_TRACE(std::string("chunks of ") + bytes + " bytes");
    const std::vector<std::pair<std::string, std::string>> env{{"MEMTIDE_TEST_CHUNK_BYTES", bytes}};
    for (const char* allocator : {"system", "mimalloc"}) {
      SCOPED_TRACE(allocator);
      TempDir dir;
      auto with = env;
      with.emplace_back("MEMTIDE_ALLOCATOR", allocator);
      const Replay t = whole_trace({MT_EXACT, "--out", (dir.path() / "tally.json").string()}, dir.path(), with, 0);
      EXPECT_EQ(t.end_reason, memtide::fmt::EndReason::Exit);
      EXPECT_GT(t.counters, 0u);
      const nlohmann::json tally = nlohmann::json::parse(slurp(dir.path() / "tally.json"));
      EXPECT_GE(t.heap_allocs, tally["heap_allocs"].get<uint64_t>());
      EXPECT_EQ(live(t, 1013), tally["leaks"]["leak_small"]["blocks"].get<uint64_t>());
      EXPECT_EQ(live(t, 10007), tally["leaks"]["leak_big"]["blocks"].get<uint64_t>());
    }
    {
      // Two threads handing one address back and forth: the order across threads holds at
      // every chunk boundary too.
      TempDir dir;
      const Replay t = whole_trace({MT_PINGPONG, "20000"}, dir.path(), env, 0);
      EXPECT_GE(t.allocs[static_cast<unsigned>(Api::Malloc)], 20000u);
    }
    const struct {
      const char* mode;
      int status;
      memtide::fmt::EndReason reason;
      uint64_t live_size, live_blocks;
    } ways[] = {{"quick-exit", 3, memtide::fmt::EndReason::ImmediateExit, 9999, 3},
                {"abort", 128 + SIGABRT, memtide::fmt::EndReason::Signal, 6666, 1},
                {"exit-thread", 5, memtide::fmt::EndReason::Exit, 4444, 1}};
    for (const auto& w : ways) {
      SCOPED_TRACE(w.mode);
      TempDir dir;
      const Replay t = whole_trace({MT_LIFECYCLE, w.mode}, dir.path(), env, w.status);
      EXPECT_EQ(t.end_reason, w.reason);
      EXPECT_EQ(live(t, w.live_size), w.live_blocks);
    }
  }
}

// SIGKILL: nothing can run, but everything flushed before stays readable.
TEST(Lifecycle, SigkillLosesAtMostTheLastFlush) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "spin"}, dir.path(), &r, {}, /*kill_after_ms=*/1500);
  EXPECT_EQ(r.status, 128 + SIGKILL);
  ASSERT_EQ(traces.size(), 1u);
  const Replay t = replay_trace(traces[0]);
  EXPECT_FALSE(t.ended);
  EXPECT_EQ(live(t, 3333), 1000u) << "blocks made in the first moments must have been flushed";
  EXPECT_GT(t.allocs[static_cast<unsigned>(Api::Malloc)], 10000u);
  EXPECT_EQ(t.double_allocs, 0u);
}

// How many messages the recorder printed ("memtide[pid]: ...").
size_t recorder_messages(const std::string& err) {
  size_t n = 0;
  for (size_t pos = 0; (pos = err.find("memtide[", pos)) != std::string::npos; ++pos) ++n;
  return n;
}

// A full disk: the program goes on, memtide says so once and stops recording.
TEST(Lifecycle, FullDiskStopsRecordingNotTheProgram) {
  TempDir dir;
  const fs::path mnt = dir.path() / "small";
  fs::create_directory(mnt);
  if (mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=256k") != 0)
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root): " << strerror(errno);
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "big", "300"}, dir.path(), &r, {{"MEMTIDE_OUTPUT", (mnt / "t.mtide").string()}});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("big done"), std::string::npos);
  EXPECT_EQ(recorder_messages(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("recording stopped"), std::string::npos) << r.err;
  ASSERT_EQ(traces.size(), 1u);
  const Replay t = replay_trace(traces[0]);
  EXPECT_GT(t.allocs[static_cast<unsigned>(Api::Malloc)], 0u) << "what was written before the disk filled is readable";
  umount(mnt.c_str());
}

// One meaning for every option that takes a size (formats/size.h): KB, MB, GB are powers of
// 1000, KiB, MiB, GiB powers of 1024, a bare number is bytes; a unit letter alone is refused.
TEST(Options, SizesParseWithDecimalAndBinaryUnits) {
  struct Case {
    const char* text;
    uint64_t bytes;
  };
  for (const Case& c : {Case{"0", 0}, Case{"65536", 65536}, Case{"64KiB", 65536}, Case{"500MB", 500000000},
                        Case{"500mb", 500000000}, Case{"10GiB", 10ull << 30}, Case{"2GB", 2000000000},
                        Case{"1TB", 1000000000000}, Case{"3b", 3}, Case{"1.5KiB", 1536}, Case{"0.5MB", 500000},
                        Case{"1.0000001KB", 1000}}) {
    uint64_t v = 1;
    EXPECT_EQ(memtide::rec::parse_size(c.text, v), nullptr) << c.text;
    EXPECT_EQ(v, c.bytes) << c.text;
  }
  for (const char* bad : {"", "MB", "-1", "5 MB", "5XB", "5MiBs", "99999999999999999999", "20000000TB", "2G", "64k",
                          "1.5", "1.KB", ".5MB"}) {
    uint64_t v = 0;
    EXPECT_NE(memtide::rec::parse_size(bad, v), nullptr) << bad;
  }
  memtide::rec::Options o;
  EXPECT_NE(memtide::rec::apply_option(o, "MEMTIDE_MAX_SIZE", "1000"), nullptr) << "a limit below 64 KiB is refused";
  EXPECT_EQ(memtide::rec::apply_option(o, "MEMTIDE_MAX_SIZE", "64KiB"), nullptr);
  EXPECT_EQ(o.max_size, 65536u);
}

// A size limit: the trace stops short of it and ends with an End record (stopped on request);
// the program goes on and memtide says so once. `big 300` writes about 2.5 MB of trace.
TEST(Lifecycle, SizeLimitStopsRecordingNotTheProgram) {
  TempDir dir;
  const fs::path out = dir.path() / "t.mtide";
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "big", "300"}, dir.path(), &r,
                       {{"MEMTIDE_OUTPUT", out.string()}, {"MEMTIDE_MAX_SIZE", "256KiB"}});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("big done"), std::string::npos);
  EXPECT_EQ(recorder_messages(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("size limit"), std::string::npos) << r.err;
  ASSERT_EQ(traces.size(), 1u);
  EXPECT_LE(fs::file_size(out), 256u * 1024u);
  EXPECT_GT(fs::file_size(out), 128u * 1024u) << "the trace stopped far short of its limit";
  const Replay t = replay_trace(traces[0]);
  ASSERT_TRUE(t.read_ok) << t.error;
  expect_consistent(t);
  EXPECT_TRUE(t.ended);
  EXPECT_EQ(t.end_reason, memtide::fmt::EndReason::Detached);
  EXPECT_GT(t.allocs[static_cast<unsigned>(Api::Malloc)], 1000u);
  EXPECT_LT(t.allocs[static_cast<unsigned>(Api::Malloc)], 300u * 2001u) << "recording went on past the limit";
  // Through the wrapper: --max-size, with the names appended to the stopped trace.
  const fs::path w = dir.path() / "w.mtide";
  RunResult rw = run({MT_WRAPPER, "run", "--max-size", "300KB", "-o", w.string(), "--", MT_LIFECYCLE, "big", "300"}, {},
                     dir.path());
  EXPECT_EQ(rw.status, 0) << rw.err;
  EXPECT_NE(rw.err.find("blocks not freed (recording stopped at the size limit)"), std::string::npos) << rw.err;
  const Replay tw = replay_trace(w.string());
  ASSERT_TRUE(tw.read_ok) << tw.error;
  EXPECT_EQ(tw.end_reason, memtide::fmt::EndReason::Detached);
  RunResult bad = run({MT_WRAPPER, "run", "--max-size", "lots", "--", MT_LIFECYCLE, "quick-exit"}, {}, dir.path());
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("MEMTIDE_MAX_SIZE"), std::string::npos) << bad.err;
  RunResult letter = run({MT_WRAPPER, "run", "--max-size", "300K", "--", MT_LIFECYCLE, "quick-exit"}, {}, dir.path());
  EXPECT_EQ(letter.status, 2);
  EXPECT_NE(letter.err.find("ambiguous"), std::string::npos) << letter.err;
}

// The leak scan at exit reads memory that another thread maps and unmaps meanwhile: the
// program exits normally every time and the trace ends with a complete scan.
TEST(Lifecycle, LeakScanWhileAnotherThreadUnmapsMemory) {
  for (int i = 0; i < 5; ++i) {
    TempDir dir;  // (one manifest per run)
    const fs::path out = dir.path() / "s.mtide";
    RunResult r;
    auto traces = traced({MT_LIFECYCLE, "unmapping", std::to_string(20 + 10 * i)}, dir.path(), &r,
                         {{"MEMTIDE_OUTPUT", out.string()}, {"MEMTIDE_LEAK_SCAN", "1"}});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("unmapping done"), std::string::npos);
    EXPECT_EQ(recorder_messages(r.err), 0u) << r.err;
    ASSERT_EQ(traces.size(), 1u);
    const Replay t = replay_trace(traces[0]);
    ASSERT_TRUE(t.read_ok) << t.error;
    expect_consistent(t);
    EXPECT_TRUE(t.ended);
    EXPECT_EQ(t.end_reason, memtide::fmt::EndReason::Exit);
    EXPECT_TRUE(t.scan_done);
    EXPECT_GT(t.scan_regions, 3u);
    EXPECT_GT(t.scan_refs, 0u);
  }
  // Without the option, no scan.
  TempDir dir;
  const fs::path out = dir.path() / "none.mtide";
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "unmapping", "20"}, dir.path(), &r, {{"MEMTIDE_OUTPUT", out.string()}});
  ASSERT_EQ(traces.size(), 1u);
  const Replay t = replay_trace(traces[0]);
  EXPECT_EQ(t.scan_regions, 0u);
  EXPECT_FALSE(t.scan_done);
}

TEST(Allocator, MimallocBackingRecordsTheSame) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_EXACT, "--out", (dir.path() / "tally.json").string()}, dir.path(), &r,
                       {{"MEMTIDE_ALLOCATOR", "mimalloc"}});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(traces.size(), 1u);
  const Replay t = replay_trace(traces[0]);
  ASSERT_TRUE(t.read_ok) << t.error;
  EXPECT_EQ(t.double_allocs, 0u);
  EXPECT_EQ(t.unknown_frees, 0u);
  EXPECT_EQ(live(t, 1013), 24u);
  EXPECT_EQ(live(t, 10007), 1u);
}

// The leaf frame of an allocation is the allocating function itself: memtide's own frames
// are not in the stack.
TEST(Stacks, LeafFrameIsTheAllocatingFunction) {
  TempDir dir;
  RunResult nm = run({"nm", "-S", "--defined-only", MT_EXACT}, {}, dir.path());
  ASSERT_EQ(nm.status, 0);
  uint64_t start = 0, size = 0;
  std::istringstream lines(nm.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("leak_small") == std::string::npos) continue;
    std::istringstream f(line);
    std::string a, s;
    f >> a >> s;
    start = std::stoull(a, nullptr, 16);
    size = std::stoull(s, nullptr, 16);
  }
  ASSERT_GT(size, 0u) << "leak_small not found in " << MT_EXACT;
  Replay r;
  run_exact(dir.path(), false, r);
  uint64_t bias = ~0ull;
  const std::string exe = fs::canonical(MT_EXACT).string();
  for (const auto& m : r.modules_loaded)
    if (m.path == exe) bias = m.bias;
  ASSERT_NE(bias, ~0ull) << "no module record for the executable";
  const auto& leaves = r.leaf_ips[1013];
  ASSERT_EQ(leaves.size(), 24u);
  for (uint64_t ip : leaves) {
    EXPECT_GT(ip, bias + start);
    EXPECT_LE(ip, bias + start + size) << "leaf frame is not in leak_small";
  }
}

// One function allocating under two callers in an irregular order, from the same state of
// the stack below the callers: every allocation is recorded with its own caller (a stack
// found again by its start state must be the one on the stack, with its own id).
TEST(Stacks, AlternatingCallersKeepTheirOwnStacks) {
  TempDir dir;
  RunResult nm = run({"nm", "-S", "--defined-only", MT_LIFECYCLE}, {}, dir.path());
  ASSERT_EQ(nm.status, 0);
  std::map<std::string, std::pair<uint64_t, uint64_t>> syms;  // name -> (start, size)
  std::istringstream lines(nm.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string a, s, t, name;
    if (!(f >> a >> s >> t >> name)) continue;
    if (name == "alloc_here" || name == "via_a" || name == "via_b")
      syms[name] = {std::stoull(a, nullptr, 16), std::stoull(s, nullptr, 16)};
  }
  ASSERT_EQ(syms.size(), 3u) << nm.out;
  const fs::path out = dir.path() / "callers.mtide";
  RunResult r = run({MT_LIFECYCLE, "callers", "200000"}, {{"LD_PRELOAD", MT_PRELOAD}, {"MEMTIDE_OUTPUT", out.string()}},
                    dir.path(), 120);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("callers ok"), std::string::npos) << r.out;
  const Replay t = replay_trace(out.string());
  ASSERT_TRUE(t.read_ok) << t.error;
  expect_consistent(t);
  uint64_t bias = ~0ull;
  const std::string exe = fs::canonical(MT_LIFECYCLE).string();
  for (const auto& m : t.modules_loaded)
    if (m.path == exe) bias = m.bias;
  ASSERT_NE(bias, ~0ull) << "no module record for the executable";
  const auto in = [&](uint64_t ip, const char* name) {
    const auto [start, size] = syms[name];
    return ip > bias + start && ip <= bias + start + size;
  };
  for (const auto& [size, caller] : {std::pair<uint64_t, const char*>{3001, "via_a"}, {3002, "via_b"}}) {
    const auto& leaves = t.leaf_ips.at(size);
    const auto& callers = t.caller_ips.at(size);
    EXPECT_GT(leaves.size(), 90000u);
    EXPECT_LT(leaves.size(), 110000u);
    size_t wrong = 0;
    for (size_t i = 0; i < leaves.size(); ++i)
      if (!in(leaves[i], "alloc_here") || !in(callers[i], caller)) ++wrong;
    EXPECT_EQ(wrong, 0u) << size << "-byte blocks not recorded as allocated by alloc_here under " << caller;
  }
}

TEST(Stacks, MaxDepthIsHonoured) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_EXACT}, dir.path(), &r, {{"MEMTIDE_MAX_DEPTH", "3"}});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(traces.size(), 1u);
  const Replay t = replay_trace(traces[0]);
  ASSERT_TRUE(t.read_ok) << t.error;
  EXPECT_EQ(t.max_stack_depth, 3u);
}


// Every stack of the 8-thread workload unwound by both unwinders (MEMTIDE_UNWIND=verify):
// the cached-rule unwinder and libunwind agree, and libunwind is almost never needed.
TEST(Stacks, FastUnwinderAgreesWithLibunwindOnEveryThread) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_EXACT}, dir.path(), &r, {{"MEMTIDE_UNWIND", "verify"}});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(traces.size(), 1u);
  const Replay t = replay_trace(traces[0]);
  ASSERT_TRUE(t.read_ok) << t.error;
  const VerifyCounts v = verify_counts(r.err);
  ASSERT_EQ(v.processes, 1) << r.err;
  EXPECT_EQ(v.differ, 0u) << r.err;
  EXPECT_GT(v.stacks, 10000u);
  EXPECT_GE(static_cast<double>(v.fast), 0.99 * static_cast<double>(v.stacks));
}

// Allocations on stacks other than the thread's own (ucontext coroutines switching back and
// forth, a signal handler on a sigaltstack): the program runs to the end, the unwinders agree,
// and the trace replays cleanly. The preload is named by a relative path, as a user may.
TEST(Stacks, CoroutinesAndSignalStacksUnwindSafely) {
  TempDir dir;
  const std::string rel = fs::relative(fs::path(MT_PRELOAD)).string();  // from the current directory
  ASSERT_NE(rel.find('/'), std::string::npos) << rel;  // ld.so needs a slash to take it as a path
  for (const char* mode : {"verify", "fast"}) {
    const fs::path out = dir.path() / (std::string(mode) + ".mtide");
    RunResult r = run({MT_LIFECYCLE, "stacks"}, {{"LD_PRELOAD", rel}, {"MEMTIDE_OUTPUT", out.string()}, {"MEMTIDE_UNWIND", mode}},
                      dir.path(), 120);
    ASSERT_EQ(r.status, 0) << mode << ": " << r.err;
    EXPECT_NE(r.out.find("stacks ok"), std::string::npos) << r.out;
    if (std::string(mode) == "verify") {
      const VerifyCounts v = verify_counts(r.err);
      ASSERT_EQ(v.processes, 1) << r.err;
      EXPECT_EQ(v.differ, 0u) << r.err;
      EXPECT_GT(v.stacks, 2800u);
      EXPECT_GT(v.fast, 500u) << "the thread's own stack is unwound without libunwind: " << r.err;
    }
    const Replay t = replay_trace(out.string());
    ASSERT_TRUE(t.read_ok) << t.error;
    expect_consistent(t);
  }
}

// `lifecycle slow-realloc [alone]`: reallocs that copy 256 MiB each, for many flush periods.
// The watermarks written meanwhile must not vouch for a realloc's free time (taken before the
// copy), so that the merged trace never goes back in time.
namespace {
void expect_slow_reallocs_ordered(const std::vector<std::string>& argv, const char* flush_ms) {
  TempDir dir;
  RunResult r;
  auto traces = traced(argv, dir.path(), &r, {{"MEMTIDE_FLUSH_INTERVAL_MS", flush_ms}});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_NE(r.out.find("realloc moved"), std::string::npos) << "the block was not copied: " << r.out;
  ASSERT_EQ(traces.size(), 1u);
  const Replay t = replay_trace(traces[0]);
  ASSERT_TRUE(t.read_ok) << t.error;
  expect_consistent(t);
}
}  // namespace

// While another thread keeps allocating: the free reads the clock, announced as pending.
TEST(Ordering, SlowReallocIsNotOvertakenByWatermarks) {
  expect_slow_reallocs_ordered({MT_LIFECYCLE, "slow-realloc"}, "40");
}

// One thread: the free of each realloc takes the time of the allocation before it and stays
// begun through the real call.
TEST(Ordering, SlowReallocOfALoneThreadIsNotOvertakenByWatermarks) {
  expect_slow_reallocs_ordered({MT_LIFECYCLE, "slow-realloc", "alone"}, "10");
}

TEST(Api, PauseSkipsAllocationsButNotFrees) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_LIFECYCLE, "pause"}, dir.path(), &r);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(traces.size(), 1u);
  const Replay t = replay_trace(traces[0]);
  ASSERT_TRUE(t.read_ok) << t.error;
  EXPECT_EQ(live(t, 2222), 1u);
  EXPECT_EQ(live(t, 1111), 0u) << "allocations while paused were recorded";
  EXPECT_EQ(live(t, 3333), 1u);
  EXPECT_EQ(live(t, 5050), 0u) << "a free while paused was not recorded";
  EXPECT_EQ(live(t, 6060), 0u) << "the old block of a realloc while paused was not released";
  EXPECT_EQ(live(t, 60600), 0u) << "the new block of a realloc while paused was recorded";
}

TEST(Api, MallocUsableSizeIsAnsweredByTheRightAllocator) {
  for (const char* allocator : {"system", "mimalloc"}) {
    TempDir dir;
    RunResult r;
    traced({MT_LIFECYCLE, "usable"}, dir.path(), &r, {{"MEMTIDE_ALLOCATOR", allocator}});
    EXPECT_EQ(r.status, 0) << allocator << ": " << r.err;
    EXPECT_NE(r.out.find("usable ok"), std::string::npos) << allocator;
  }
}

// Without %p in the name, a forked child's file gets .<pid> before the extension, and the
// exec'd image (same pid, same name) never overwrites the trace of the image before it: it
// gets .1 there (fixed.1.mtide).
TEST(Lifecycle, NamesWithoutPidNeverCollide) {
  TempDir dir;
  RunResult r;
  const fs::path base = dir.path() / "fixed.mtide";
  auto traces = traced({MT_LIFECYCLE, "fork"}, dir.path(), &r, {{"MEMTIDE_OUTPUT", base.string()}});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(traces.size(), 3u);
  EXPECT_EQ(traces[0], base.string());
  int child = 0, exec_image = 0;
  for (size_t i = 1; i < traces.size(); ++i) {
    const Replay t = replay_trace(traces[i]);
    if (traces[i] == (dir.path() / ("fixed." + std::to_string(t.pid) + ".mtide")).string() &&
        t.pid != replay_trace(traces[0]).pid)
      ++child;
    if (traces[i] == (dir.path() / "fixed.1.mtide").string()) ++exec_image;
  }
  EXPECT_EQ(child, 1);
  EXPECT_EQ(exec_image, 1);
}

// A program that closes every descriptor (as daemons do) keeps being recorded: close,
// closefrom and close_range leave the trace's out, and a dup2 onto its number moves it first.
// Closed by a direct system call, it is gone: memtide then stops recording, and never writes
// into the file the program opens next.
TEST(Lifecycle, ClosingEveryDescriptorLeavesTheTraceOpen) {
  for (const char* how : {"close", "closefrom", "close_range", "dup2"}) {
    SCOPED_TRACE(how);
    TempDir dir;
    RunResult r;
    const fs::path data = dir.path() / "data.txt";
    const auto traces = traced({MT_LIFECYCLE, "closefds", data.string(), how}, dir.path(), &r);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(slurp(data), "program data\n") << "trace bytes reached the program's file";
    EXPECT_EQ(r.err.find("closed the trace file"), std::string::npos) << r.err;
    ASSERT_EQ(traces.size(), 1u);
    const Replay t = replay_trace(traces[0]);
    EXPECT_TRUE(t.read_ok) << t.error;
    expect_consistent(t);
    EXPECT_TRUE(t.ended);
    EXPECT_EQ(live(t, 100), 400000u) << "the blocks made after the descriptors were closed";
  }
  TempDir dir;
  RunResult r;
  const fs::path data = dir.path() / "data.txt";
  traced({MT_LIFECYCLE, "closefds", data.string(), "syscall"}, dir.path(), &r);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(slurp(data), "program data\n") << "trace bytes reached the program's file";
  EXPECT_NE(r.err.find("closed the trace file"), std::string::npos) << r.err;
}

// The trace's descriptor is none of the program's business: fcntl F_DUPFD and
// F_DUPFD_CLOEXEC, dup2 and dup3 give the numbers of an untraced run, with a hard limit of
// descriptors above the soft one (the trace's descriptor then sits above the soft limit, and
// the program can take every number below it) and with both limits the same. The recording
// is whole afterwards.
TEST(Lifecycle, TraceDescriptorIsNotSeenByTheProgram) {
  for (auto [soft, hard, fill] : {std::tuple{"1024", "4096", "fill"}, std::tuple{"1024", "1024", ""}}) {
    SCOPED_TRACE(std::string(soft) + ":" + hard);
    TempDir dir;
    const RunResult plain = run({MT_FD_PROBE, soft, hard, fill}, {}, dir.path());
    ASSERT_EQ(plain.status, 0) << plain.err;
    ASSERT_NE(plain.out.find("F_DUPFD 512 -> 512\n"), std::string::npos) << plain.out;
    RunResult r;
    const auto traces = traced({MT_FD_PROBE, soft, hard, fill}, dir.path(), &r);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, plain.out);
    ASSERT_FALSE(traces.empty());
    const Replay t = replay_trace(traces.back());
    EXPECT_TRUE(t.read_ok) << t.error;
    expect_consistent(t);
    EXPECT_TRUE(t.ended);
    EXPECT_EQ(live(t, 4242), 10u);
  }
}
