// `memtide attach` end to end: real running programs, the real gdb injection, traces read back
// by `memtide report --json`. Each test checks that the program went on as it would untraced
// (its output and exit status those of a run nobody attached to).
//
// The recordings last 5 s where the test is about what a recording holds; 2 s where it is about
// the attach and detach themselves (a second attach, sampled mode), which need only a few of
// the program's rounds inside the recording.
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/recorder/e2e_run.h"
#include "tests/recorder/trace_replay.h"

namespace memtide::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// A program started in the background, its output in files of `dir`.
struct Spawned {
  pid_t pid = -1;
  fs::path out, err;
};

Spawned spawn(const std::vector<std::string>& argv, const fs::path& dir, const std::string& name,
              const std::vector<std::pair<std::string, std::string>>& env = {}) {
  Spawned s{-1, dir / (name + ".out"), dir / (name + ".err")};
  s.pid = fork();
  if (s.pid == 0) {
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    const int o = open(s.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(s.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  return s;
}

// Its exit status (128 + signal), killing it after `timeout` (a watchdog).
int wait_exit(const Spawned& s, std::chrono::seconds timeout = 120s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(s.pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "watchdog: process " << s.pid << " still running";
      kill(s.pid, SIGKILL);
      waitpid(s.pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool wait_file(const fs::path& p, std::chrono::seconds timeout = 60s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!fs::exists(p) || fs::file_size(p) == 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// The attach target: its threads allocate without pause; each of `rounds` lasts 50 ms.
std::vector<std::string> target_args(int rounds, const fs::path& ready, int status = 3) {
  return {MT_ATTACH_TARGET, "--threads", "4", "--rounds", std::to_string(rounds), "--round-ms", "50",
          "--status", std::to_string(status), "--ready", ready.string()};
}

RunResult memtide(const std::vector<std::string>& args, const fs::path& dir, int timeout_s = 180) {
  std::vector<std::string> argv{MT_WRAPPER};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, {}, dir, timeout_s);
}

json report(const fs::path& trace, const fs::path& dir) {
  const RunResult r = memtide({"report", "--json", "--top", "100", trace.string()}, dir);
  EXPECT_EQ(r.status, 0) << r.err;
  return json::parse(r.out, nullptr, false);
}

// The leaked bytes and blocks of the stacks whose frames include `function`.
std::pair<uint64_t, uint64_t> leaked_in(const json& j, const std::string& function) {
  uint64_t bytes = 0, count = 0;
  for (const json& leak : j["leaks"])
    for (const json& frame : leak["stack"])
      if (frame.value("function", "").find(function) != std::string::npos) {
        bytes += leak["bytes"].get<uint64_t>();
        count += leak["count"].get<uint64_t>();
        break;
      }
  return {bytes, count};
}

void expect_detached_trace(const json& j) {
  EXPECT_TRUE(j["complete"].get<bool>());
  ASSERT_TRUE(j["end"].is_object());
  EXPECT_EQ(j["end"]["reason"], "detach");
  EXPECT_TRUE(j["attached"].get<bool>());
  EXPECT_EQ(j["unknown_frees"], 0) << "frees of blocks allocated before the attach are counted apart";
  EXPECT_EQ(j["mmap"]["unknown_frees"], 0);
}

// A run nobody attaches to: the output and status an attached run must also give (its output
// files in a directory of its own: it runs while the test runs memtide).
RunResult untraced(const std::vector<std::string>& argv, const fs::path& dir) {
  const fs::path own = dir / "untraced";
  fs::create_directories(own);
  return run(argv, {}, own, 300);
}
RunResult untraced(int rounds, const fs::path& dir) {
  return untraced(target_args(rounds, dir / "untraced.ready"), dir);
}

TEST(Attach, RecordsThreadsAllocatingAtTheMomentOfTheAttachAndLeavesTheProgramAsItWas) {
  TempDir dir;
  const int rounds = 240;  // 12 s: the attach (gdb) and a 5 s recording fit well inside
  std::thread baseline_thread;
  RunResult baseline;
  baseline_thread = std::thread([&] { baseline = untraced(rounds, dir.path()); });
  const fs::path ready = dir.path() / "ready", trace = dir.path() / "trace.mtide";
  const Spawned target = spawn(target_args(rounds, ready), dir.path(), "target");
  ASSERT_TRUE(wait_file(ready));
  const RunResult a = memtide({"attach", std::to_string(target.pid), "--duration", "5s", "-o", trace.string()}, dir.path());
  EXPECT_EQ(a.status, 0) << a.err;
  EXPECT_NE(a.err.find("detached from process"), std::string::npos) << a.err;
  EXPECT_EQ(kill(target.pid, 0), 0) << "the program runs on after the detach";
  const int status = wait_exit(target);
  baseline_thread.join();
  EXPECT_EQ(status, 3);
  EXPECT_EQ(baseline.status, 3);
  EXPECT_EQ(slurp(target.out), baseline.out);
  EXPECT_EQ(slurp(target.err), "");

  const json j = report(trace, dir.path());
  ASSERT_FALSE(j.is_discarded());
  expect_detached_trace(j);
  EXPECT_GT(j["freed_before_recording"].get<uint64_t>(), 0u) << "the early blocks freed while recording";
  // One 4242-byte block every 5 rounds and one 777-byte array every 7, per thread: over 5 s of
  // 50 ms rounds, about 80 and 57 of them.
  const auto [mb, mn] = leaked_in(j, "leak_from_malloc");
  const auto [nb, nn] = leaked_in(j, "leak_from_new");
  EXPECT_GE(mn, 20u);
  EXPECT_EQ(mb, mn * 4242);
  EXPECT_GE(nn, 12u);
  EXPECT_EQ(nb, nn * 777);
  // Every API the program calls reached the recorder.
  for (const char* api : {"malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc", "new", "new[]",
                          "new[](align)", "mmap", "munmap", "free", "delete", "delete[](align)"})
    EXPECT_TRUE(j["apis"].contains(api)) << api << " in " << j["apis"].dump();
}

TEST(Attach, RecordsTheExampleWorkerWithoutChangingItsOutput) {
  TempDir dir;
  // 48,000 requests at 4,000 a second: 12 s, the same work and output every run.
  const std::vector<std::string> args{MT_WORKER, "--threads", "4", "--requests", "48000", "--rate", "4000"};
  RunResult baseline;
  std::thread baseline_thread([&] { baseline = untraced(args, dir.path()); });
  const Spawned worker = spawn(args, dir.path(), "worker");
  std::this_thread::sleep_for(300ms);
  const fs::path trace = dir.path() / "worker.mtide";
  const RunResult a = memtide({"attach", std::to_string(worker.pid), "--duration", "5s", "-o", trace.string()}, dir.path());
  EXPECT_EQ(a.status, 0) << a.err;
  const int status = wait_exit(worker);
  baseline_thread.join();
  EXPECT_EQ(status, 0);
  EXPECT_EQ(baseline.status, 0);
  EXPECT_EQ(slurp(worker.out), baseline.out);
  EXPECT_EQ(slurp(worker.out), "handled 48000 requests, 960 sessions cached\n");

  const json j = report(trace, dir.path());
  ASSERT_FALSE(j.is_discarded());
  expect_detached_trace(j);
  // One audit line of 128 bytes per 1,000 requests: about 20 in 5 s at 4,000 a second.
  const auto [ab, an] = leaked_in(j, "write_audit_line");
  EXPECT_GE(an, 8u);
  EXPECT_EQ(ab, an * 128);
  EXPECT_GT(leaked_in(j, "remember_session").second, 0u) << "the sessions cached while recording";
}

TEST(Attach, AttachesAgainAfterADetach) {
  TempDir dir;
  const int rounds = 240;
  RunResult baseline;
  std::thread baseline_thread([&] { baseline = untraced(rounds, dir.path()); });
  const fs::path ready = dir.path() / "ready";
  const Spawned target = spawn(target_args(rounds, ready), dir.path(), "target");
  ASSERT_TRUE(wait_file(ready));
  for (const char* name : {"first.mtide", "second.mtide"}) {
    const fs::path trace = dir.path() / name;
    const RunResult a = memtide({"attach", std::to_string(target.pid), "--duration", "2s", "-o", trace.string()}, dir.path());
    EXPECT_EQ(a.status, 0) << name << ": " << a.err;
    const json j = report(trace, dir.path());
    ASSERT_FALSE(j.is_discarded()) << name;
    expect_detached_trace(j);
    EXPECT_GE(leaked_in(j, "leak_from_malloc").second, 4u) << name;
    EXPECT_TRUE(j["warnings"].empty()) << name << ": " << j["warnings"].dump();
  }
  EXPECT_EQ(wait_exit(target), 3);
  baseline_thread.join();
  EXPECT_EQ(slurp(target.out), baseline.out);
}

// A library dlopened while attached: its constructor's allocation (made inside dlopen, before
// its entries could be rewritten) is recorded, with the constructor's stack.
TEST(Attach, RecordsTheConstructorsOfALibraryLoadedWhileAttached) {
  TempDir dir;
  const fs::path ready = dir.path() / "ready", trigger = dir.path() / "go";
  const Spawned target = spawn({MT_DLOPEN_LATER, ready.string(), trigger.string(), MT_CTOR_LIB}, dir.path(), "target");
  ASSERT_TRUE(wait_file(ready));
  const fs::path trace = dir.path() / "t.mtide", at = dir.path() / "attach";
  fs::create_directories(at);
  RunResult a;
  std::thread attach([&] { a = memtide({"attach", std::to_string(target.pid), "--duration", "3s", "-o", trace.string()}, at); });
  for (int i = 0; i < 600 && !fs::exists(trace); ++i) std::this_thread::sleep_for(50ms);
  std::this_thread::sleep_for(300ms);
  { std::ofstream(trigger.string()) << "go\n"; }
  attach.join();
  EXPECT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(wait_exit(target), 0) << slurp(target.err);
  const json j = report(trace, dir.path());
  ASSERT_FALSE(j.is_discarded());
  const auto [bytes, blocks] = leaked_in(j, "ctor_leak");
  EXPECT_EQ(blocks, 1u) << j["leaks"].dump().substr(0, 3000);
  EXPECT_EQ(bytes, 3131u);
}

// A process that ends while attached, its parent not reaping it yet (a zombie, as a parent busy
// elsewhere leaves it): memtide attach sees the end at once, not when --duration is over.
TEST(Attach, AProcessThatEndsUnreapedEndsTheAttach) {
  TempDir dir;
  const fs::path ready = dir.path() / "ready", trigger = dir.path() / "go";
  { std::ofstream(trigger.string()) << "go\n"; }  // (it loads the library at once, then lives 5 s)
  const Spawned target = spawn({MT_DLOPEN_LATER, ready.string(), trigger.string(), MT_CTOR_LIB}, dir.path(), "target");
  ASSERT_TRUE(wait_file(ready));
  const auto began = std::chrono::steady_clock::now();
  const RunResult a = memtide({"attach", std::to_string(target.pid), "--duration", "60s", "-o", (dir.path() / "t.mtide").string()},
                              dir.path());
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  EXPECT_EQ(a.status, 0) << a.err;
  EXPECT_NE(a.err.find("ended"), std::string::npos) << a.err;
  EXPECT_LT(took, 20.0) << "the process ended about 5 s after it started";
  EXPECT_EQ(wait_exit(target), 0);
}

// Each attach begins a trace of its own, the second as the first: its End counts its own events,
// and its checkpoints (one a second) number from 1, point to no earlier one, and hold what the
// replay of its own trace holds at their time, stream by stream.
TEST(Attach, EachAttachsEndAndCheckpointsAreItsOwn) {
  TempDir dir;
  const fs::path ready = dir.path() / "ready";
  const Spawned target = spawn(target_args(240, ready), dir.path(), "target");
  ASSERT_TRUE(wait_file(ready));
  for (const char* name : {"first.mtide", "second.mtide"}) {
    SCOPED_TRACE(name);
    const fs::path trace = dir.path() / name;
    const RunResult a = memtide({"attach", std::to_string(target.pid), "--duration", "3s", "--checkpoint-interval", "1",
                                 "-o", trace.string()},
                                dir.path());
    ASSERT_EQ(a.status, 0) << a.err;
    const Replay t = replay_trace(trace.string());
    ASSERT_TRUE(t.read_ok) << t.error;
    ASSERT_TRUE(t.ended);
    EXPECT_EQ(t.end_reason, fmt::EndReason::Detach);
    EXPECT_EQ(t.end_status, 0u);
    EXPECT_EQ(t.lost_events, 0u);
    EXPECT_GE(t.end_time, t.last_time);
    uint64_t allocs = 0, frees = 0;
    for (unsigned k = 0; k < fmt::kApiCount; ++k) allocs += t.allocs[k], frees += t.frees[k];
    EXPECT_GT(allocs, 0u);
    EXPECT_EQ(t.end_allocs, allocs);
    EXPECT_EQ(t.end_frees, frees);
    const auto seen = checkpoints_of(trace.string());
    ASSERT_FALSE(seen.empty()) << "3 s attached, checkpoints every second";
    EXPECT_EQ(seen.front().seq, 1u);
    EXPECT_EQ(seen.front().prev, 0u);
    for (const CheckpointSeen& c : seen) {
      SCOPED_TRACE("checkpoint " + std::to_string(c.seq));
      EXPECT_EQ(c.interval, 0u);
      EXPECT_EQ(c.bytes, c.replay_bytes);
      EXPECT_EQ(c.blocks, c.replay_blocks);
      EXPECT_EQ(c.streams_differ, "");
    }
  }
  kill(target.pid, SIGTERM);
  wait_exit(target);
}

// A second attach begins a trace of its own: its End counts the events lost in it only. The
// target's signal handler allocates while its thread maps and unmaps (tests/recorder/programs/
// signal_storm.cpp, `phases`): attached during that storm, the recorder may lose some of the
// handler's events (counted in the End record; not in every recording); attached again once
// the storm is over, none. The storm is recorded up to 6 times for a
// recording with a loss; without one, nothing can be told and the test is skipped.
TEST(Attach, ASecondAttachCountsOnlyItsOwnLostEvents) {
  TempDir dir;
  const fs::path ready = dir.path() / "ready";
  const Spawned target = spawn({MT_SIGNAL_STORM, "phases", "120000", "60000", ready.string()}, dir.path(), "storm");
  ASSERT_TRUE(wait_file(ready));
  uint64_t lost = 0;
  for (int i = 0; i < 6 && !lost; ++i) {
    const fs::path first = dir.path() / ("storm" + std::to_string(i) + ".mtide");
    const RunResult a = memtide({"attach", std::to_string(target.pid), "--duration", "2s", "-o", first.string()}, dir.path());
    ASSERT_EQ(a.status, 0) << a.err;
    ASSERT_FALSE(fs::exists(dir.path() / "ready.quiet")) << "the storm ended before the recording did";
    const Replay one = replay_trace(first.string());
    ASSERT_TRUE(one.read_ok && one.ended) << one.error;
    lost = one.lost_events;
  }
  std::ofstream(dir.path() / "ready.stop") << "stop\n";
  ASSERT_TRUE(wait_file(dir.path() / "ready.quiet", 60s));
  if (!lost) {
    kill(target.pid, SIGTERM);
    wait_exit(target);
    GTEST_SKIP() << "no handler's event was lost in 6 recordings of the storm: nothing to carry over";
  }
  const fs::path second = dir.path() / "second.mtide";
  const RunResult b = memtide({"attach", std::to_string(target.pid), "--duration", "1s", "-o", second.string()}, dir.path());
  ASSERT_EQ(b.status, 0) << b.err;
  const Replay two = replay_trace(second.string());
  ASSERT_TRUE(two.read_ok && two.ended) << two.error;
  EXPECT_EQ(two.lost_events, 0u) << "the storm's recording's " << lost << " lost events were carried over";
  kill(target.pid, SIGTERM);
  wait_exit(target);
}

// A process none of whose threads ever sleeps (each spins in its own code and the C library's
// clock) is attached over ptrace, with no gdb: a thread is stepped out of the library to its own
// code, and its vector registers are given back (the program checks two copies it keeps there).
// Attached 5 times: a step that met a system call or a signal is tried again, never a failure.
TEST(Attach, LoadsIntoAProcessWhoseThreadsNeverSleep) {
  TempDir dir;
  const fs::path ready = dir.path() / "ready";
  const Spawned target = spawn({MT_SPINNER, ready.string(), "3"}, dir.path(), "spinner");
  ASSERT_TRUE(wait_file(ready));
  for (int i = 0; i < 5; ++i) {
    SCOPED_TRACE("attach " + std::to_string(i));
    const fs::path trace = dir.path() / ("spin" + std::to_string(i) + ".mtide");
    const RunResult a = run({MT_WRAPPER, "attach", std::to_string(target.pid), "--duration", "1s", "-o", trace.string()},
                            {{"MEMTIDE_ATTACH_INJECTOR", "ptrace"}}, dir.path(), 120);
    ASSERT_EQ(a.status, 0) << a.err;
    const Replay t = replay_trace(trace.string());
    ASSERT_TRUE(t.read_ok && t.ended) << t.error;
    EXPECT_EQ(t.end_reason, fmt::EndReason::Detach);
    uint64_t allocs = 0;
    for (unsigned k = 0; k < fmt::kApiCount; ++k) allocs += t.allocs[k];
    EXPECT_GT(allocs, 0u) << "the spinning threads' mallocs are recorded";
  }
  std::ofstream(dir.path() / "ready.stop") << "stop\n";
  EXPECT_EQ(wait_exit(target), 0) << "the vector registers of a thread the recorder was loaded on changed: "
                                  << slurp(target.out);
}

// The recorder's messages while attached go to `memtide attach`'s stderr, never into the
// program's: a size limit reached says so there.
TEST(Attach, TheRecordersMessagesGoToAttachNotToTheProgramsStderr) {
  TempDir dir;
  const fs::path ready = dir.path() / "ready", trace = dir.path() / "small.mtide";
  const Spawned target = spawn(target_args(80, ready), dir.path(), "target");
  ASSERT_TRUE(wait_file(ready));
  const RunResult a = memtide({"attach", std::to_string(target.pid), "--duration", "2s", "--max-size", "64KiB", "-o",
                               trace.string()}, dir.path());
  EXPECT_EQ(a.status, 0) << a.err;
  EXPECT_NE(a.err.find("reached its size limit"), std::string::npos) << a.err;
  EXPECT_EQ(wait_exit(target), 3);
  EXPECT_EQ(slurp(target.err), "");
}

TEST(Attach, RecordsASampleWhenAskedTo) {
  TempDir dir;
  const fs::path ready = dir.path() / "ready", trace = dir.path() / "sampled.mtide";
  const Spawned target = spawn(target_args(160, ready), dir.path(), "target");
  ASSERT_TRUE(wait_file(ready));
  const RunResult a = memtide({"attach", std::to_string(target.pid), "--duration", "2s", "--sample", "16KiB", "-o",
                               trace.string()}, dir.path());
  EXPECT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(wait_exit(target), 3);
  const json j = report(trace, dir.path());
  ASSERT_FALSE(j.is_discarded());
  expect_detached_trace(j);
  ASSERT_TRUE(j["sampling"].is_object());
  EXPECT_EQ(j["sampling"]["interval_bytes"], 16384);
  EXPECT_GT(j["total_allocations"].get<uint64_t>(), 0u);
  // A sampled recording's defaults, as `memtide run --sample` gets them: checkpoints on (the
  // file's header says so), 500 ms flushes and 100 ms counters.
  std::ifstream f(trace, std::ios::binary);
  uint8_t header[fmt::kFileHeaderSize] = {};
  ASSERT_TRUE(f.read(reinterpret_cast<char*>(header), sizeof header));
  const uint32_t flags = header[16] | header[17] << 8 | header[18] << 16 | uint32_t{header[19]} << 24;
  EXPECT_NE(flags & fmt::kFileFlagCheckpoints, 0u) << "attach --sample records checkpoints";
  EXPECT_NE(flags & fmt::kFileFlagSampled, 0u);
}

TEST(Attach, DetachCommandAndCtrlCEndTheRecording) {
  TempDir dir;
  const fs::path ready = dir.path() / "ready";
  const Spawned target = spawn(target_args(400, ready, 0), dir.path(), "target");
  ASSERT_TRUE(wait_file(ready));
  // memtide detach, from another command.
  const fs::path first = dir.path() / "by-detach.mtide";
  const Spawned attach = spawn({MT_WRAPPER, "attach", std::to_string(target.pid), "-o", first.string()}, dir.path(), "attach1");
  ASSERT_TRUE(wait_file(first));
  std::this_thread::sleep_for(500ms);
  const RunResult d = memtide({"detach", std::to_string(target.pid)}, dir.path());
  EXPECT_EQ(d.status, 0) << d.err;
  EXPECT_EQ(wait_exit(attach), 0) << slurp(attach.err);
  expect_detached_trace(report(first, dir.path()));
  // Ctrl-C of memtide attach.
  const fs::path second = dir.path() / "by-sigint.mtide";
  const Spawned attach2 = spawn({MT_WRAPPER, "attach", std::to_string(target.pid), "-o", second.string()}, dir.path(), "attach2");
  ASSERT_TRUE(wait_file(second));
  std::this_thread::sleep_for(500ms);
  kill(attach2.pid, SIGINT);
  EXPECT_EQ(wait_exit(attach2), 0) << slurp(attach2.err);
  expect_detached_trace(report(second, dir.path()));
  // Nothing attached any more: detach says so.
  EXPECT_EQ(memtide({"detach", std::to_string(target.pid)}, dir.path()).status, 2);
  kill(target.pid, SIGTERM);
  wait_exit(target);
}

// ---- Refusals: exit 2, a word on what to do, the process untouched -------------------------

void expect_refused(const std::vector<std::string>& args, const fs::path& dir, const std::string& words) {
  const RunResult r = memtide(args, dir);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
}

TEST(AttachRefuses, AProcessThatIsNotThere) {
  TempDir dir;
  expect_refused({"attach", "999999999"}, dir.path(), "no process");
  expect_refused({"detach", "999999999"}, dir.path(), "no process");
}

TEST(AttachRefuses, ABadOptionBeforeTouchingTheProcess) {
  TempDir dir;
  const Spawned target = spawn({MT_STATIC_SLEEPER, "30"}, dir.path(), "static");
  expect_refused({"attach", std::to_string(target.pid), "--sample", "lots"}, dir.path(), "bad value --sample lots");
  expect_refused({"attach", std::to_string(target.pid), "--no-such-option", "1"}, dir.path(), "unknown option");
  expect_refused({"attach", std::to_string(target.pid), "--no-follow"}, dir.path(), "not an option of memtide attach");
  kill(target.pid, SIGTERM);
  wait_exit(target);
}

TEST(AttachRefuses, AStaticallyLinkedProgram) {
  TempDir dir;
  const Spawned target = spawn({MT_STATIC_SLEEPER, "30"}, dir.path(), "static");
  std::this_thread::sleep_for(200ms);
  expect_refused({"attach", std::to_string(target.pid)}, dir.path(), "statically linked");
  EXPECT_EQ(kill(target.pid, 0), 0);
  kill(target.pid, SIGTERM);
  wait_exit(target);
}

TEST(AttachRefuses, AProgramRecordedByRun) {
  TempDir dir;
  const fs::path ready = dir.path() / "ready";
  std::vector<std::string> args{MT_WRAPPER, "run", "-q", "--no-symbolize", "-o", (dir.path() / "run.mtide").string(), "--"};
  const std::vector<std::string> t = target_args(60, ready);
  args.insert(args.end(), t.begin(), t.end());
  const Spawned run = spawn(args, dir.path(), "run");
  ASSERT_TRUE(wait_file(ready));
  const std::string pid = slurp(ready).substr(0, slurp(ready).find('\n'));
  expect_refused({"attach", pid}, dir.path(), "already recorded by memtide run");
  EXPECT_EQ(wait_exit(run), 3);
}

TEST(AttachRefuses, AProcessAlreadyAttached) {
  TempDir dir;
  const fs::path ready = dir.path() / "ready", trace = dir.path() / "trace.mtide";
  const Spawned target = spawn(target_args(400, ready, 0), dir.path(), "target");
  ASSERT_TRUE(wait_file(ready));
  const Spawned attach = spawn({MT_WRAPPER, "attach", std::to_string(target.pid), "-o", trace.string()}, dir.path(), "attach");
  ASSERT_TRUE(wait_file(trace));
  expect_refused({"attach", std::to_string(target.pid), "-o", (dir.path() / "other.mtide").string()}, dir.path(),
                 "already attached");
  EXPECT_EQ(memtide({"detach", std::to_string(target.pid)}, dir.path()).status, 0);
  EXPECT_EQ(wait_exit(attach), 0);
  kill(target.pid, SIGTERM);
  wait_exit(target);
}

TEST(AttachRefuses, AProcessOfAnotherUser) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: a process of another user to attach to as that user cannot";
  if (system("command -v setpriv >/dev/null") != 0) GTEST_SKIP() << "setpriv (util-linux) is not installed";
  TempDir dir;
  chmod(dir.path().c_str(), 0777);
  // The build must be readable by the unprivileged user that runs memtide attach.
  if (system(("setpriv --reuid=65534 --regid=65534 --clear-groups test -x " + std::string(MT_WRAPPER)).c_str()) != 0)
    GTEST_SKIP() << "the build tree is not readable by user 65534";
  const Spawned target = spawn(target_args(200, dir.path() / "ready", 0), dir.path(), "target");
  ASSERT_TRUE(wait_file(dir.path() / "ready"));
  const RunResult r = run({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", MT_WRAPPER, "attach",
                           std::to_string(target.pid), "-o", (dir.path() / "t.mtide").string()}, {}, dir.path(), 120);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("belongs to"), std::string::npos) << r.err;
  EXPECT_EQ(kill(target.pid, 0), 0);
  kill(target.pid, SIGTERM);
  wait_exit(target);
}

TEST(AttachRefuses, WhenPtraceScopeForbidsIt) {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  if (!(f >> scope)) GTEST_SKIP() << "no Yama on this kernel: ptrace_scope does not apply";
  if (geteuid() == 0 && scope < 3) GTEST_SKIP() << "ptrace_scope " << scope << " does not restrict root";
  if (scope == 0) GTEST_SKIP() << "ptrace_scope is 0: attaching to one's own processes is allowed";
  TempDir dir;
  const Spawned target = spawn(target_args(100, dir.path() / "ready", 0), dir.path(), "target");
  ASSERT_TRUE(wait_file(dir.path() / "ready"));
  expect_refused({"attach", std::to_string(target.pid)}, dir.path(), "ptrace_scope");
  kill(target.pid, SIGTERM);
  wait_exit(target);
}

TEST(AttachRefuses, A32BitProgram) {
  if (std::string(MT_SLEEPER32).empty()) GTEST_SKIP() << "no 32-bit C toolchain (gcc-multilib) to build one";
  TempDir dir;
  const Spawned target = spawn({MT_SLEEPER32, "30"}, dir.path(), "sleeper32");
  std::this_thread::sleep_for(200ms);
  expect_refused({"attach", std::to_string(target.pid)}, dir.path(), "32-bit");
  kill(target.pid, SIGTERM);
  wait_exit(target);
}

TEST(AttachRefuses, AProcessInAnotherMountNamespaceWithOtherLibraries) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make a mount namespace";
  if (system("command -v unshare >/dev/null") != 0) GTEST_SKIP() << "unshare (util-linux) is not installed";
  TempDir dir;
  const fs::path empty = dir.path() / "empty", ready = dir.path() / "ready";
  std::ofstream(empty) << "";
  // In its namespace, memtide's library is another file.
  const std::string script = "mount --bind " + empty.string() + " " + MT_PRELOAD + " && exec " + MT_ATTACH_TARGET +
                             " --threads 1 --rounds 200 --round-ms 50 --ready " + ready.string();
  const Spawned target = spawn({"unshare", "-m", "--propagation", "private", "sh", "-c", script}, dir.path(), "ns");
  if (!wait_file(ready, 20s)) {
    kill(target.pid, SIGKILL);
    wait_exit(target);
    GTEST_SKIP() << "cannot make a mount namespace here: " << slurp(target.err);
  }
  const std::string pid = slurp(ready).substr(0, slurp(ready).find('\n'));
  expect_refused({"attach", pid}, dir.path(), "another mount namespace");
  kill(std::stoi(pid), SIGTERM);
  wait_exit(target);
}

// Whether the process has libmemtide.so mapped.
bool has_recorder(pid_t pid) { return slurp("/proc/" + std::to_string(pid) + "/maps").find("libmemtide.so") != std::string::npos; }

// A malloc of the executable's own: told from outside, by the ELF files of the process's lookup
// scope (the refusal names the file; the recorder's own check, inside, could not), so the
// process is never stopped and nothing is loaded into it.
TEST(AttachRefuses, AProgramWithAnAllocatorOfItsOwn) {
  TempDir dir;
  const Spawned target = spawn({MT_OWN_MALLOC_SLEEPER, "30"}, dir.path(), "own");
  std::this_thread::sleep_for(300ms);
  expect_refused({"attach", std::to_string(target.pid)}, dir.path(), "malloc is own_malloc_sleeper's, not the C library's");
  EXPECT_EQ(kill(target.pid, 0), 0);
  EXPECT_FALSE(has_recorder(target.pid));
  kill(target.pid, SIGTERM);
  wait_exit(target);
}

// Debian's redis-server, whose malloc comes from libjemalloc.so.2 (a library it needs): recorded
// through jemalloc while redis-benchmark writes 20,000 keys. The server answers throughout and
// keeps its keys after the detach; the trace holds the keys' allocations, with redis's stacks
// (zmalloc, its wrapper of jemalloc), still live at the detach.
TEST(Attach, RecordsARedisServerWhoseMallocIsJemallocs) {
  if (access("/usr/bin/redis-server", X_OK) != 0 || access("/usr/bin/redis-benchmark", X_OK) != 0)
    GTEST_SKIP() << "redis-server or redis-benchmark is not installed";
  TempDir dir;
  const std::string port = std::to_string(20000 + getpid() % 20000);
  const Spawned redis = spawn({"/usr/bin/redis-server", "--port", port, "--save", "", "--appendonly", "no"}, dir.path(), "redis");
  auto cli = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv{"redis-cli", "-p", port};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, {}, dir.path()).out;
  };
  bool up = false;
  for (int i = 0; i < 100 && !up; ++i) {
    std::this_thread::sleep_for(50ms);
    up = cli({"ping"}).find("PONG") != std::string::npos;
  }
  ASSERT_TRUE(up) << slurp(redis.err);
  const fs::path trace = dir.path() / "redis.mtide", at = dir.path() / "attach", client = dir.path() / "client";
  fs::create_directories(at);
  fs::create_directories(client);
  RunResult a;
  std::thread attach([&] { a = memtide({"attach", std::to_string(redis.pid), "--duration", "8s", "-o", trace.string()}, at); });
  for (int i = 0; i < 600 && !has_recorder(redis.pid); ++i) std::this_thread::sleep_for(50ms);
  std::this_thread::sleep_for(500ms);  // (the entries redirected after the load)
  const RunResult bench = run({"redis-benchmark", "-p", port, "-t", "set", "-n", "20000", "-r", "1000000", "-d", "64", "-q"},
                              {}, client);
  attach.join();
  EXPECT_EQ(bench.status, 0) << bench.err;
  EXPECT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.err.find("not the C library"), std::string::npos) << a.err;
  EXPECT_NE(cli({"ping"}).find("PONG"), std::string::npos);
  const long keys = std::atol(cli({"dbsize"}).c_str());
  EXPECT_GT(keys, 19000) << "20,000 SETs of keys drawn from a million";

  const json j = report(trace, dir.path());
  ASSERT_FALSE(j.is_discarded());
  expect_detached_trace(j);
  EXPECT_GE(j["total_allocations"].get<uint64_t>(), 40000u) << "a key and its value for each SET at the least";
  // The keys written while attached are live at the detach: leaks of the detach, by redis's stacks.
  const auto [bytes, blocks] = leaked_in(j, "zmalloc");
  EXPECT_GE(blocks, static_cast<uint64_t>(keys)) << j["leaks"].dump().substr(0, 3000);
  EXPECT_GE(bytes, static_cast<uint64_t>(keys) * 64);
  kill(redis.pid, SIGTERM);
  EXPECT_EQ(wait_exit(redis), 0);
}

}  // namespace
}  // namespace memtide::test
