// End-to-end tests of the recorder's life in its process: fork, exec, threads, exit, signals and
// SIGKILL. Real programs run under the real LD_PRELOAD; their traces are read back with the real
// reader (trace_replay.h). (The event path: events_e2e_test.cpp; the trace file and the
// process's limits: limits_e2e_test.cpp.)
#include <fcntl.h>
#include <signal.h>
#include <linux/membarrier.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
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

}  // namespace

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

// A forked child begins a trace of its own, as the program's start does: its End counts its own
// events (not the parent's before the fork), and its checkpoints (one a second) number from 1,
// point to no earlier one, and hold what the replay of the child's own trace holds at their
// time, stream by stream (none of the parent's blocks, which the child inherits and frees).
TEST(Lifecycle, AForkedChildsEndAndCheckpointsAreItsOwn) {
  TempDir dir;
  RunResult r;
  const auto traces = traced({MT_LIFECYCLE, "fork-churn", "3000"}, dir.path(), &r, {{"MEMTIDE_CHECKPOINT_INTERVAL", "1"}});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(traces.size(), 2u) << "the parent's and the child's";
  for (const std::string& path : traces) {
    SCOPED_TRACE(path);
    const Replay t = replay_trace(path);
    ASSERT_TRUE(t.read_ok) << t.error;
    ASSERT_TRUE(t.ended);
    EXPECT_EQ(t.end_reason, memtide::fmt::EndReason::Exit);
    EXPECT_EQ(t.end_status, 0u);
    EXPECT_EQ(t.lost_events, 0u);
    EXPECT_GE(t.end_time, t.last_time);
    uint64_t allocs = 0, frees = 0;
    for (unsigned a = 0; a < memtide::fmt::kApiCount; ++a) allocs += t.allocs[a], frees += t.frees[a];
    EXPECT_EQ(t.end_allocs, allocs);
    EXPECT_EQ(t.end_frees, frees);
    const bool child = live(t, 3333) == 0 && t.allocs[static_cast<unsigned>(Api::Malloc)] > 0 && t.unknown_frees > 0;
    const auto seen = memtide::test::checkpoints_of(path);
    ASSERT_FALSE(seen.empty()) << "a run of 1.5 s or more, checkpoints every second";
    EXPECT_EQ(seen.front().seq, 1u);
    EXPECT_EQ(seen.front().prev, 0u);
    for (const auto& c : seen) {
      SCOPED_TRACE("checkpoint " + std::to_string(c.seq) + (child ? " of the child" : ""));
      EXPECT_EQ(c.interval, 0u);
      EXPECT_EQ(c.bytes, c.replay_bytes);
      EXPECT_EQ(c.blocks, c.replay_blocks);
      EXPECT_EQ(c.streams_differ, "");
    }
  }
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

// Every signal whose default action ends the program keeps the End record and the last flush:
// a producer in a pipeline ends by SIGPIPE when its reader has what it wanted (`| head`).
TEST(Lifecycle, DeathByAnyDefaultFatalSignalKeepsTheEnd) {
  {
    TempDir dir;
    const std::string trace = (dir.path() / "yes.mtide").string();
    const RunResult r = run({"/bin/sh", "-c", "LD_PRELOAD=" MT_PRELOAD " MEMTIDE_OUTPUT=" + trace + " yes | head -c 4"}, {},
                            dir.path(), 60);
    EXPECT_EQ(r.out, "y\ny\n");
    const Replay t = replay_trace(trace);
    ASSERT_TRUE(t.read_ok) << t.error;
    EXPECT_TRUE(t.ended) << "no End record after SIGPIPE";
    EXPECT_EQ(t.end_reason, memtide::fmt::EndReason::Signal);
    EXPECT_EQ(t.end_status, static_cast<uint64_t>(SIGPIPE));
  }
  for (const int sig : {SIGALRM, SIGUSR1, SIGXCPU}) {
    SCOPED_TRACE(strsignal(sig));
    TempDir dir;
    RunResult r;
    auto traces = traced({"/bin/sh", "-c", "kill -" + std::to_string(sig) + " $$"}, dir.path(), &r);
    EXPECT_EQ(r.status, 128 + sig);
    ASSERT_GE(traces.size(), 1u);
    const Replay t = replay_trace(traces[0]);
    ASSERT_TRUE(t.read_ok) << t.error;
    EXPECT_TRUE(t.ended) << "no End record";
    EXPECT_EQ(t.end_reason, memtide::fmt::EndReason::Signal);
    EXPECT_EQ(t.end_status, static_cast<uint64_t>(sig));
  }
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

// A handler that mallocs while it interrupts malloc, or siglongjmps out of it, is undefined
// behaviour that glibc mostly turns into SIGABRT (or SIGSEGV) in a program of one thread. The
// recorder's writer thread made glibc take its arena lock instead, which the interrupted call
// held: the program hung. The writer allocates from the recorder's own arena, and glibc still
// sees one thread: the program ends as untraced, by glibc's signal or (the heap's damage gone
// unnoticed, as it may untraced) by finishing its loop.
TEST(Lifecycle, AHandlerThatMallocsInsideMallocCrashesAsUntraced) {
  const auto by_glibc = [](int status) { return status == 128 + SIGABRT || status == 128 + SIGSEGV; };
  int crashed = 0;
  for (const std::string how : {"call", "jmp"}) {
    TempDir plain;
    const RunResult untraced = run({MT_LIFECYCLE, "handler-malloc", how}, {}, plain.path(), 60);
    ASSERT_TRUE(by_glibc(untraced.status)) << how << ": the premise (untraced, glibc ends it) " << untraced.status;
    for (int i = 0; i < 4; ++i) {
      TempDir dir;
      // A watchdog of 60 s: a hang fails the test.
      const RunResult r = run({MT_LIFECYCLE, "handler-malloc", how},
                              {{"LD_PRELOAD", MT_PRELOAD}, {"MEMTIDE_OUTPUT", (dir.path() / "t.mtide").string()}},
                              dir.path(), 60);
      const bool finished = r.status == 0 && r.out.find("survived") != std::string::npos;
      EXPECT_TRUE(by_glibc(r.status) || finished) << how << " run " << i << ": " << r.status << " " << r.err;
      crashed += by_glibc(r.status);
    }
  }
  EXPECT_GE(crashed, 4) << "of 8 runs, glibc ended fewer than half";
}

// Credentials are per thread in Linux: the writer thread gives up the ids the program gives up.
TEST(Lifecycle, TheWriterThreadGivesUpTheIdsTheProgramGivesUp) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to change ids";
  TempDir dir;
  RunResult r;
  traced({MT_LIFECYCLE, "setuid"}, dir.path(), &r);
  ASSERT_EQ(r.status, 0) << r.err;
  int tasks = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    unsigned task = 0, real = 0, eff = 0;
    if (std::sscanf(line.c_str(), "uid %u %u %u", &task, &real, &eff) != 3) continue;
    ++tasks;
    EXPECT_EQ(real, 65534u) << line;
    EXPECT_EQ(eff, 65534u) << line;
  }
  EXPECT_GE(tasks, 2) << "the program's thread and the writer's: " << r.out;
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

// 64 threads handing blocks to each other while checkpoints are written every second (and,
// under --keep, at each segment): the writer's per-stream counts grow with the streams, not
// doubled at each new one, so the writer keeps up and the trace has its End record. 6 runs of
// each: a stalled writer showed in about one run of three.
TEST(Lifecycle, CheckpointsWithManyThreadsKeepTheEnd) {
  for (const bool keep : {false, true}) {
    for (int run = 0; run < 6; ++run) {
      SCOPED_TRACE(std::string(keep ? "--keep 1MiB" : "--checkpoint-interval 1") + ", run " + std::to_string(run));
      TempDir dir;
      std::vector<std::pair<std::string, std::string>> env{{"MEMTIDE_CHECKPOINT_INTERVAL", "1"}};
      if (keep) env = {{"MEMTIDE_KEEP", "1MiB"}, {"MEMTIDE_OUTPUT", (dir.path() / "ring.mtide").string()}};
      RunResult r;
      auto traces = traced({MT_PINGPONG, "ring", "64", "2000"}, dir.path(), &r, env);
      EXPECT_EQ(r.status, 0) << r.err;
      EXPECT_EQ(r.err.find("memtide["), std::string::npos) << r.err;
      ASSERT_EQ(traces.size(), 1u);
      const Replay t = replay_trace(traces[0]);
      EXPECT_TRUE(t.read_ok) << t.error;
      EXPECT_TRUE(t.ended) << "no End record";
      EXPECT_EQ(t.end_reason, memtide::fmt::EndReason::Exit);
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

// Eight threads allocating without pause on a machine with fewer cores: the writer gets a
// share of the CPU like any of them and fell behind by hundreds of milliseconds; the threads
// wait for it instead once it has written nothing of the last two flush intervals. A SIGKILL
// then loses about that much: the median of three kills at most 120 ms (20 ms flush interval;
// what is left is the pass in progress and the scheduler's delays on a busy machine).
TEST(Lifecycle, SigkillWithMoreThreadsThanCoresLosesLittle) {
  std::vector<double> lost_ms;
  for (int run = 0; run < 3; ++run) {
    TempDir dir;
    RunResult r;
    auto traces = traced({MT_LIFECYCLE, "spin-threads", "8"}, dir.path(), &r, {}, /*kill_after_ms=*/1500);
    EXPECT_EQ(r.status, 128 + SIGKILL);
    ASSERT_EQ(traces.size(), 1u);
    const Replay t = replay_trace(traces[0]);
    EXPECT_FALSE(t.ended);
    EXPECT_EQ(t.double_allocs, 0u);
    ASSERT_GT(t.allocs[static_cast<unsigned>(Api::Malloc)], 100000u);
    ASSERT_GT(r.killed_at_ns, t.last_time);
    lost_ms.push_back(static_cast<double>(r.killed_at_ns - t.last_time) / 1e6);
  }
  std::sort(lost_ms.begin(), lost_ms.end());
  EXPECT_LT(lost_ms[1], 120.0) << "the traces end " << lost_ms[0] << ", " << lost_ms[1] << " and " << lost_ms[2]
                               << " ms before the SIGKILL";
}
