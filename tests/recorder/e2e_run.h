// What the recorder's end-to-end tests share: running a program (under the preload), and the
// checks every recorded trace must pass.
#pragma once

#include <fcntl.h>
#include <time.h>
#include <linux/membarrier.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/recorder/test_support.h"
#include "tests/recorder/trace_replay.h"

namespace memtide::test {

struct RunResult {
  int status = -1;  // exit status, or 128 + signal
  std::string out, err;
  uint64_t killed_at_ns = 0;  // CLOCK_MONOTONIC when kill_after_ms sent SIGKILL (the trace's clock)
};

// Runs argv with extra environment variables; kills it after `timeout_s` (a watchdog).
inline RunResult run(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env,
              const fs::path& dir, int timeout_s = 300, int kill_after_ms = -1) {
  const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  const pid_t pid = fork();
  if (pid == 0) {
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  RunResult r;
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  bool killed = false;
  for (;;) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
    if (kill_after_ms >= 0 && ms >= kill_after_ms && !killed) {
      kill(pid, SIGKILL);
      timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      r.killed_at_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
      killed = true;
    }
    if (ms > timeout_s * 1000 && !killed) {
      ADD_FAILURE() << "watchdog: " << argv[0] << " ran longer than " << timeout_s << " s";
      kill(pid, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// Runs a program under the preload; returns the traces it wrote (manifest order: root first).
inline std::vector<std::string> traced(const std::vector<std::string>& argv, const fs::path& dir, RunResult* result = nullptr,
                                std::vector<std::pair<std::string, std::string>> env = {}, int kill_after_ms = -1) {
  const fs::path manifest = dir / "manifest";
  env.emplace_back("LD_PRELOAD", MT_PRELOAD);
  env.emplace_back("MEMTIDE_MANIFEST", manifest.string());
  bool has_output = false;
  for (auto& [k, v] : env) has_output |= k == "MEMTIDE_OUTPUT";
  if (!has_output) env.emplace_back("MEMTIDE_OUTPUT", (dir / "trace.%p.mtide").string());
  RunResult r = run(argv, env, dir, 300, kill_after_ms);
  if (result) *result = r;
  return manifest_traces(manifest);
}

inline uint64_t live(const Replay& r, uint64_t size) {
  auto it = r.live_by_size.find(size);
  return it == r.live_by_size.end() ? 0 : it->second;
}

// Whether this kernel offers expedited private membarrier (what exact watermarks need).
inline bool membarrier_available() {
  const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0;
}

inline void expect_consistent(const Replay& r) {
  EXPECT_EQ(r.double_allocs, 0u) << "an address was allocated twice without a free in between";
  EXPECT_EQ(r.unknown_frees, 0u) << "a free of an address that was not live";
  EXPECT_EQ(r.out_of_order, 0u) << "merged records went back in time";
  EXPECT_EQ(r.stacks_undefined, 0u) << "an allocation refers to an undefined stack";
  EXPECT_TRUE(r.block_hints) << "the recorder flags the blocks holding stacks";
  EXPECT_EQ(r.exact_watermarks, membarrier_available()) << "exact watermarks wherever membarrier works";
  EXPECT_EQ(r.unflagged_stack_blocks, 0u) << "of " << r.stack_blocks << " blocks holding StackDef records";
  EXPECT_EQ(r.events_in_stack_blocks, 0u) << "Allocs and Frees in the blocks flagged as holding stacks";
  EXPECT_EQ(r.frames_in_recorder, 0u) << "frames of libmemtide's own code in the stacks";
}

}  // namespace memtide::test
