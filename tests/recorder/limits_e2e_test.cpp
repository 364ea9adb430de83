// End-to-end tests of the trace file and of the recorder at the limits of its process: a full
// disk, a size limit, a leak scan racing an unmap, trace names, the program's descriptors, small
// thread stacks and a low address-space limit. Real programs run under the real LD_PRELOAD;
// their traces are read back with the real reader (trace_replay.h).
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
  EXPECT_NE(bad.err.find("bad value --max-size lots"), std::string::npos) << bad.err;
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
// Closed by a direct system call, it is opened again by its path (never writing into the file
// the program opened next at its number), and nothing recorded is lost.
TEST(Lifecycle, ClosingEveryDescriptorLeavesTheTraceOpen) {
  for (const char* how : {"close", "closefrom", "close_range", "dup2", "syscall"}) {
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

// A thread with a 16 KiB stack recurses as deep under memtide as untraced, less what a stack
// walk takes on it, whatever --max-depth: the walk's buffer is on the heap. With libunwind and
// --max-depth 1024 the recursion once reached 9 frames of its 30 (the buffers were on the stack).
// The most frames of `lifecycle MODE N [LIB]` (a thread of 16 KiB recursing N frames) that run
// to the end, N from 4 to `most`, with the environment `env` (none: untraced).
int deepest_small_stack(const fs::path& dir, const char* mode, const char* lib, int most,
                        const std::vector<std::pair<std::string, std::string>>& env) {
  int n = 4;
  for (; n <= most; ++n) {
    auto e = env;
    if (!e.empty()) e.emplace_back("MEMTIDE_OUTPUT", (dir / "t.mtide").string());
    std::vector<std::string> argv{MT_LIFECYCLE, mode, std::to_string(n)};
    if (lib) argv.emplace_back(lib);
    const RunResult r = run(argv, e, dir, 60);
    std::error_code ec;
    fs::remove(dir / "t.mtide", ec);
    if (r.status != 0) break;
    EXPECT_EQ(r.out, "small stack: " + std::to_string(n) + " frames\n");
  }
  return n - 1;
}

TEST(Lifecycle, SmallThreadStacksKeepTheirDepth) {
  TempDir dir;
  auto deepest = [&](const std::vector<std::pair<std::string, std::string>>& env) {
    return deepest_small_stack(dir.path(), "small-stack", nullptr, 64, env);
  };
  const int untraced = deepest({});
  ASSERT_GE(untraced, 10) << "frames of 256 bytes in 16 KiB";
  for (const char* unwind : {"fast", "libunwind", "verify"}) {
    for (const char* depth : {"64", "1024"}) {
      const int traced = deepest({{"LD_PRELOAD", MT_PRELOAD}, {"MEMTIDE_UNWIND", unwind}, {"MEMTIDE_MAX_DEPTH", depth}});
      // A walk may take about 1 KiB of the thread's stack: 3 of these frames.
      EXPECT_GE(traced, untraced - 3) << "--unwind " << unwind << " --max-depth " << depth << ": " << traced
                                      << " frames of the " << untraced << " untraced";
    }
  }
}

// The same thread, but its first allocation is made at the bottom of the recursion, through a
// library loaded before and never called: the first walk of the thread is also the first sight
// of that module's code, whose unwind rules libelf and libdw compute from its CFI (or which
// libunwind walks, with --unwind libunwind). They run on a stack of the recorder's own, not the
// program's.
TEST(Lifecycle, AModulesFirstSightDeepInASmallStack) {
  TempDir dir;
  auto deepest = [&](const std::vector<std::pair<std::string, std::string>>& env) {
    return deepest_small_stack(dir.path(), "small-stack-deep", MT_DLTARGET, 80, env);
  };
  const int untraced = deepest({});
  ASSERT_GE(untraced, 20) << "frames of 256 bytes in 16 KiB";
  const int traced = deepest({{"LD_PRELOAD", MT_PRELOAD}});
  // What the walk itself takes of the thread's stack, the hooks' frames and the thread's first
  // records: at most 3 KiB, 12 of these frames.
  EXPECT_GE(traced, untraced - 12) << traced << " frames of the " << untraced << " untraced";
  // libunwind's walk runs on the recorder's stack too when the thread's has little room left:
  // at most 4 KiB in all (it took 5 KiB on the thread's own).
  const int by_libunwind = deepest({{"LD_PRELOAD", MT_PRELOAD}, {"MEMTIDE_UNWIND", "libunwind"}});
  EXPECT_GE(by_libunwind, untraced - 16) << by_libunwind << " frames of the " << untraced << " untraced";
}

// Under an address-space limit that leaves the program room for its own heap but not for the
// recorder's usual arena (mimalloc reserves 32 MiB at a time), the recording keeps every event
// and its End: the recorder's memory is then mapped block by block.
TEST(Lifecycle, ALowAddressSpaceLimitKeepsWhatWasRecorded) {
  TempDir dir;
  fs::create_directories(dir.path() / "a");
  fs::create_directories(dir.path() / "b");
  RunResult free_run;
  traced({MT_SMALL_HEAP, "20000"}, dir.path() / "a", &free_run);
  long vmsize = 0, made = 0;
  ASSERT_EQ(std::sscanf(free_run.out.c_str(), "vmsize %ld made %ld", &vmsize, &made), 2) << free_run.out;
  ASSERT_EQ(made, 20000);
  // 8 MiB below what the traced program had mapped at the start of main, 32 MiB of which is
  // the reservation of the recorder's first mimalloc arena: room for the program's heap, none
  // for that reservation.
  ASSERT_GT(vmsize, 40 * 1024);
  const std::string limit = "--as=" + std::to_string((vmsize - 8 * 1024) * 1024);
  RunResult r;
  const auto traces = traced({"prlimit", limit, MT_SMALL_HEAP, "20000"}, dir.path() / "b", &r);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "vmsize %ld made %ld", &vmsize, &made), 2) << r.out;
  ASSERT_GT(made, 0);
  std::optional<Replay> heap;
  for (const std::string& t : traces) {
    Replay rep = replay_trace(t);
    if (!rep.argv.empty() && rep.argv[0].find("small_heap") != std::string::npos) heap = std::move(rep);
  }
  ASSERT_TRUE(heap) << "no trace of the program after prlimit's exec";
  ASSERT_TRUE(heap->read_ok) << heap->error;
  EXPECT_TRUE(heap->ended) << "the trace has no End record";
  EXPECT_GE(heap->allocs[static_cast<unsigned>(Api::Malloc)] + heap->lost_events, static_cast<uint64_t>(made));
  EXPECT_EQ(heap->lost_events, 0u);
}

// A program that lowers RLIMIT_AS first thing in main (to what it has mapped, plus 1 MiB), as a
// service that caps itself does: the writer's buffers were taken before main, so every run's
// trace holds the program's 100,000 allocations and frees and its End record. (When the writer
// took them on its own thread, the limit came first in most runs: 0 events, 9 runs of 10.)
TEST(Lifecycle, ALimitSetFirstThingInMainKeepsEveryEvent) {
  TempDir dir;
  for (int run = 0; run < 10; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    const fs::path d = dir.path() / std::to_string(run);
    fs::create_directories(d);
    RunResult r;
    const auto traces = traced({MT_AS_LIMIT, "1"}, d, &r);
    ASSERT_EQ(r.status, 0) << r.err;
    ASSERT_EQ(traces.size(), 1u);
    long made = 0;
    ASSERT_EQ(std::sscanf(r.out.c_str(), "done %ld", &made), 1) << r.out;
    const Replay t = replay_trace(traces[0]);
    ASSERT_TRUE(t.read_ok) << t.error;
    EXPECT_TRUE(t.ended) << r.err;
    EXPECT_GE(t.allocs[static_cast<unsigned>(Api::Malloc)] + t.lost_events, static_cast<uint64_t>(made)) << r.err;
    EXPECT_EQ(r.err.find("out of memory"), std::string::npos) << r.err;
  }
}

// A program started as root that drops to nobody, kept to 1 MiB in a directory only root may
// write: memtide run's helper creates and removes its segments, so the set goes on past its
// first segments and ends whole. (The recorder stopped at the first new segment: "Permission
// denied".)
TEST(Lifecycle, AKeptProgramThatDropsItsPrivilegesGoesOnInNewSegments) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to drop privileges";
  TempDir dir;
  const fs::path d = dir.path() / "root-only";
  fs::create_directories(d);
  ASSERT_EQ(chmod(d.c_str(), 0755), 0);
  const RunResult r = run({MT_WRAPPER, "run", "-q", "--keep", "1MiB", "-o", (d / "t.mtide").string(), "--", MT_LIFECYCLE,
                           "setuid-churn", "400000"},
                          {}, dir.path(), 300);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "done 400000\n");
  EXPECT_EQ(r.err.find("cannot create"), std::string::npos) << r.err;
  unsigned first = ~0u, last = 0;
  for (const auto& e : fs::directory_iterator(d)) {
    unsigned n = 0;
    if (std::sscanf(e.path().filename().c_str(), "t.%u.mtide", &n) == 1) first = std::min(first, n), last = std::max(last, n);
  }
  EXPECT_GE(last, 10u) << "the set did not rotate enough to tell";
  EXPECT_GT(first, 1u) << "the oldest segments were not removed";
  const Replay t = replay_trace((d / "t.mtide").string());
  ASSERT_TRUE(t.read_ok) << t.error;
  EXPECT_TRUE(t.ended);
  EXPECT_EQ(t.end_reason, memtide::fmt::EndReason::Exit);
}
