// End-to-end tests of `memtide run` with programs it cannot wholly reach: a statically linked
// one, one with an allocator of its own, one built with a sanitizer, a set-user-ID one; and what
// the recorder adds to a program's heap (nothing) and asks of the kernel. Real programs under
// the real wrapper; traces read back through the reader.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/recorder/e2e_run.h"

namespace fs = std::filesystem;
using memtide::test::live;
using memtide::test::Replay;
using memtide::test::replay_trace;
using memtide::test::run;
using memtide::test::RunResult;
using memtide::test::TempDir;

// A statically linked program runs (its status passes through) but cannot be recorded: the
// run says why instead of asking whether the program started.
TEST(Wrapper, AStaticallyLinkedProgramIsSaidToBeOutOfReach) {
  TempDir dir;
  RunResult r = run({"sh", "-c", "cd '" + dir.path().string() + "' && exec " MT_WRAPPER " run -- " MT_STATIC}, {},
                    dir.path());
  EXPECT_EQ(r.status, 4) << r.err;
  EXPECT_NE(r.out.find("static 1"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("no trace was written: " MT_STATIC " is statically linked"), std::string::npos) << r.err;
  RunResult d = run({"sh", "-c", "cd '" + dir.path().string() + "' && exec " MT_WRAPPER " run -- /bin/sh -c 'exit 0'"},
                    {}, dir.path());
  EXPECT_EQ(d.err.find("statically linked"), std::string::npos) << "a dynamically linked program is not taken for one\n"
                                                                 << d.err;
}

// A program with a malloc of its own keeps every allocation from the interposer (the loader
// binds malloc to the program's, ahead of LD_PRELOAD's): the recorder says so once, instead of
// leaving an empty trace without a word; an ordinary program gets no such line. The program's
// allocator maps a page while it holds its lock, as jemalloc does: the recorder, which records
// that mmap, must not enter the allocator again (with a stack walk's first look at a module, or
// the main thread's stack bounds from pthread_getattr_np, it did: rustc hung at its start).
// A program whose own allocator is 10,000 bytes of its executable runs as it does untraced: the
// recorder's start-up does not take what the program needs (libmemtide loaded libstdc++, whose
// emergency pool asked the program's allocator for 72 KiB, and the program ran out).
TEST(Wrapper, AProgramWithATinyAllocatorOfItsOwnRunsAsUntraced) {
  TempDir dir;
  const RunResult untraced = run({MT_TINY_MALLOC}, {}, dir.path());
  ASSERT_EQ(untraced.status, 0) << untraced.err;
  const RunResult r = run({MT_WRAPPER, "run", "-q", "-o", (dir.path() / "tiny.mtide").string(), "--", MT_TINY_MALLOC}, {},
                          dir.path());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, untraced.out);
  EXPECT_EQ(r.err.find("out of memory"), std::string::npos) << r.err;
}

// The recorder adds no block to a C program's heap: libmemtide needs no C++ runtime, whose
// start-up allocates (libstdc++'s emergency pool: 72,704 bytes in every program recorded).
TEST(Wrapper, TheRecorderAddsNoBlockToTheProgramsHeap) {
  TempDir dir;
  const RunResult elf = run({"readelf", "-d", MT_PRELOAD}, {}, dir.path());
  ASSERT_EQ(elf.status, 0) << elf.err;
  EXPECT_EQ(elf.out.find("libstdc++"), std::string::npos) << elf.out;
  const fs::path out = dir.path() / "small.mtide";
  const RunResult r = run({MT_WRAPPER, "run", "-q", "--no-symbolize", "-o", out.string(), "--", MT_SMALL_HEAP, "10"}, {},
                          dir.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const Replay t = replay_trace(out.string());
  ASSERT_TRUE(t.read_ok) << t.error;
  EXPECT_EQ(live(t, 72704), 0u) << "libstdc++'s emergency pool";
}

TEST(Wrapper, AProgramWithItsOwnMallocIsSaidToKeepItsAllocations) {
  TempDir dir;
  const fs::path out = dir.path() / "own.mtide";
  RunResult r = run({MT_WRAPPER, "run", "-o", out.string(), "--", MT_OWN_MALLOC}, {}, dir.path());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("own 1"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("malloc is defined in " MT_OWN_MALLOC ", ahead of libmemtide: the allocations made through it are not "
                       "recorded, and memory mappings are recorded without their stacks"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("sanitizer"), std::string::npos) << r.err;
  const Replay t = replay_trace(out.string());
  ASSERT_TRUE(t.read_ok) << t.error;
  EXPECT_TRUE(t.ended);
  EXPECT_EQ(t.heap_allocs, 0u) << "the program's 4000-byte block was its own";
  EXPECT_GE(t.allocs[static_cast<int>(memtide::fmt::Api::Mmap)], 1u) << "the allocator's pages are recorded";
  // The trace says so: the report notes it, and the leak gate cannot pass it.
  RunResult rep = run({MT_WRAPPER, "report", out.string()}, {}, dir.path());
  EXPECT_EQ(rep.status, 0) << rep.err;
  EXPECT_NE(rep.out.find("note        the program's allocations were not recorded: it has a malloc of its own, in " MT_OWN_MALLOC),
            std::string::npos)
      << rep.out;
  RunResult gate = run({MT_WRAPPER, "check", out.string()}, {}, dir.path());
  EXPECT_EQ(gate.status, 2) << gate.out << gate.err;
  EXPECT_NE(gate.err.find("the program's allocations were not recorded (it has a malloc of its own, in " MT_OWN_MALLOC
                          "): leaks cannot be checked"),
            std::string::npos)
      << gate.err;
  RunResult d = run({MT_WRAPPER, "run", "-o", (dir.path() / "d.mtide").string(), "--", MT_LIFECYCLE, "quick-exit"}, {},
                    dir.path());
  EXPECT_EQ(d.err.find("malloc is defined in"), std::string::npos) << d.err;
  // A program that only takes malloc's address (not position-independent: its own stub is
  // malloc's canonical address) is recorded as any other.
  const fs::path a = dir.path() / "a.mtide";
  RunResult m = run({MT_WRAPPER, "run", "-o", a.string(), "--", MT_MALLOC_ADDRESS}, {}, dir.path());
  EXPECT_EQ(m.status, 0) << m.err;
  EXPECT_NE(m.out.find("address 1"), std::string::npos) << m.out;
  EXPECT_EQ(m.err.find("malloc is defined in"), std::string::npos) << m.err;
  const Replay ta = replay_trace(a.string());
  ASSERT_TRUE(ta.read_ok) << ta.error;
  EXPECT_GE(ta.allocs[static_cast<int>(memtide::fmt::Api::Malloc)], 1u) << "its malloc through the pointer";
}

// Programs built with AddressSanitizer, whose runtime replaces malloc: gcc's (a shared library
// that must be the first one loaded) makes the program refuse to start behind LD_PRELOAD, and
// no trace is written; clang's (linked into the program) keeps malloc to itself, and the trace
// is empty. Either way the run says why.
TEST(Wrapper, AProgramBuiltWithASanitizerIsSaidToBeOutOfReach) {
  std::vector<std::string> progs;
  for (std::string all = MT_ASAN_PROGS; !all.empty();) {
    const size_t colon = all.find(':');
    progs.push_back(all.substr(0, colon));
    all = colon == std::string::npos ? "" : all.substr(colon + 1);
  }
  if (progs.empty()) GTEST_SKIP() << "no compiler here builds with -fsanitize=address";
  for (const std::string& prog : progs) {
    SCOPED_TRACE(prog);
    TempDir dir;
    RunResult r = run({MT_WRAPPER, "run", "-o", (dir.path() / "a.mtide").string(), "--", prog}, {}, dir.path());
    if (r.err.find("no trace was written") != std::string::npos) {
      EXPECT_NE(r.err.find("no trace was written: " + prog + " is built with a sanitizer (-fsanitize=...)"),
                std::string::npos)
          << r.err;
    } else {
      EXPECT_EQ(r.status, 4) << r.err;
      EXPECT_NE(r.err.find("ahead of libmemtide: the allocations made through it are not recorded, and memory "
                           "mappings are recorded without their stacks; record a build without the sanitizer"),
                std::string::npos)
          << r.err;
      EXPECT_NE(r.err.find("(a sanitizer's runtime)"), std::string::npos) << r.err;
    }
  }
}

// The default unwinder's first look at a module allocates many times through libdw, and each of
// those allocations re-enters the shims, which ask whether a signal handler interrupted the
// recorder. The part of the answer that needs the kernel is learnt once at start-up, never per
// allocation: clang makes about as many rt_sigaction calls traced as untraced.
TEST(Wrapper, TheUnwindersAllocationsDoNotAskTheKernelForSignalActions) {
  if (access("/usr/bin/strace", X_OK) != 0 || access("/usr/bin/clang", X_OK) != 0) GTEST_SKIP() << "no strace or clang";
  TempDir dir;
  {
    std::ofstream((dir.path() / "one.c").string()) << "int main(void) { return 0; }\n";
  }
  auto calls = [&](bool traced) {
    std::vector<std::string> argv = {"/usr/bin/strace", "-f", "-c", "-e", "trace=rt_sigaction", "-o",
                                     (dir.path() / "count.txt").string(), "/usr/bin/env"};
    if (traced) {
      argv.push_back(std::string("LD_PRELOAD=") + MT_PRELOAD);
      argv.push_back("MEMTIDE_OUTPUT=" + (dir.path() / "clang.mtide").string());
    }
    for (const std::string& a : {std::string("/usr/bin/clang"), std::string("-c"), (dir.path() / "one.c").string(),
                                 std::string("-o"), (dir.path() / "one.o").string()})
      argv.push_back(a);
    const RunResult r = run(argv, {}, dir.path(), 120);
    EXPECT_EQ(r.status, 0) << r.err;
    std::ifstream in((dir.path() / "count.txt").string());
    long n = -1;
    for (std::string line; std::getline(in, line);) {
      // "% time  seconds  usecs/call  calls  [errors]  syscall"
      std::istringstream words(line);
      std::vector<std::string> w;
      for (std::string x; words >> x;) w.push_back(x);
      if (w.size() >= 5 && w.back() == "rt_sigaction") n = std::stol(w[3]);
    }
    return n;
  };
  const long untraced = calls(false), traced = calls(true);
  ASSERT_GT(untraced, 0);
  EXPECT_LE(traced, untraced + 200) << "rt_sigaction calls: " << traced << " traced, " << untraced << " untraced";
}

// A program built with LeakSanitizer under the gate gets a verdict, not silence: gcc's runtime is
// a shared library behind memtide's malloc, so memtide records and judges the 123-byte leak;
// clang's keeps malloc to itself and ends the program by itself when its own check fails
// (exit 23, no End record): the gate says the sanitizer judges that build.
TEST(Wrapper, AProgramBuiltWithLeakSanitizerGetsAVerdict) {
  std::vector<std::string> progs;
  for (std::string all = MT_LSAN_PROGS; !all.empty();) {
    const size_t colon = all.find(':');
    progs.push_back(all.substr(0, colon));
    all = colon == std::string::npos ? "" : all.substr(colon + 1);
  }
  if (progs.empty()) GTEST_SKIP() << "no compiler here builds with -fsanitize=leak";
  for (const std::string& prog : progs) {
    SCOPED_TRACE(prog);
    TempDir dir;
    RunResult r = run({MT_WRAPPER, "run", "-q", "--check", "-o", (dir.path() / "l.mtide").string(), "--", prog}, {},
                      dir.path());
    EXPECT_NE(r.status, 0) << r.err;
    if (r.err.find("has a malloc of its own") != std::string::npos) {
      EXPECT_NE(r.err.find("a sanitizer's runtime, whose own leak check (LeakSanitizer) judges this build"),
                std::string::npos)
          << r.err;
      EXPECT_EQ(r.err.find("no End record"), std::string::npos) << r.err;
    } else {
      EXPECT_NE(r.err.find("FAIL leaked bytes: 123 B"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("main (lsan_leak.c:"), std::string::npos) << r.err;
    }
  }
}

// A set-user-ID program (owned by another user than the one running it) runs in the loader's
// secure mode, which ignores LD_PRELOAD: the run says so.
TEST(Wrapper, ASetUserIdProgramIsSaidToBeOutOfReach) {
  if (geteuid() != 0) GTEST_SKIP() << "making a program set-user-ID for another user needs root";
  TempDir dir;
  struct statvfs vfs;
  ASSERT_EQ(statvfs(dir.path().c_str(), &vfs), 0);
  if (vfs.f_flag & ST_NOSUID) GTEST_SKIP() << dir.path() << " is mounted nosuid";
  const fs::path prog = dir.path() / "setuid_prog";
  fs::copy_file(MT_LIFECYCLE, prog);
  ASSERT_EQ(chown(prog.c_str(), 65534, 65534), 0);
  ASSERT_EQ(chmod(prog.c_str(), 04755), 0);
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  RunResult r = run({MT_WRAPPER, "run", "-o", (dir.path() / "s.mtide").string(), "--", prog.string(), "quick-exit"}, {},
                    dir.path());
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.err.find("no trace was written: " + prog.string() +
                       " is set-user-ID or set-group-ID, and the loader ignores LD_PRELOAD for such programs"),
            std::string::npos)
      << r.err;
}
