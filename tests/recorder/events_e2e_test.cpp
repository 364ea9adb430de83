// End-to-end tests of the event path: real programs run under the real LD_PRELOAD; their
// traces are read back with the real reader and merger (trace_replay.h) and compared with what
// the programs did: counts per API, times and their order across threads, stacks, the API.
// (The recorder's life in its process: lifecycle_e2e_test.cpp.)
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

#include "formats/decoder.h"
#include "formats/reader.h"
#include "recorder/options.h"
#include "tests/recorder/e2e_run.h"
#include "tests/recorder/test_support.h"
#include "tests/recorder/trace_replay.h"

namespace fs = std::filesystem;
namespace fmt = memtide::fmt;
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
// (event_time in recorder/stream.h), never older than the writer's last clock tick (every
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

// Two threads take turns, each replacing blocks the other allocated and getting the other's
// freed addresses back. With turns of 25 ms each turn spans writer ticks in which one thread
// records alone and owns the time (recorder/clock.h), so both reuse times and ownership passes
// from one to the other at every turn; with turns of 1 ms both threads record within one tick
// and the owner must stop reusing its time as soon as the other records. Either way the replay
// never sees an address allocated twice or freed twice.
TEST(Ordering, TimeOwnershipPassingBetweenThreadsReplaysExactly) {
  for (const char* turn_ms : {"25", "1"}) {
    SCOPED_TRACE(std::string("turns of ") + turn_ms + " ms");
    TempDir dir;
    RunResult r;
    const bool long_turns = std::string(turn_ms) == "25";
    auto traces = traced({MT_PINGPONG, "handoff", long_turns ? "40" : "1000", turn_ms}, dir.path(), &r,
                         {{"MEMTIDE_FLUSH_INTERVAL_MS", "10"}});
    ASSERT_EQ(r.status, 0) << r.err;
    ASSERT_EQ(traces.size(), 1u);
    int turns = 0;
    long reused = 0;
    ASSERT_EQ(std::sscanf(r.out.c_str(), "turns %d reused %ld", &turns, &reused), 2) << r.out;
    EXPECT_GT(reused, 1000) << "the threads did not get each other's addresses back; the test proves nothing";
    const Replay rep = replay_trace(traces[0]);
    ASSERT_TRUE(rep.read_ok) << rep.error;
    expect_consistent(rep);
    if (!long_turns) continue;
    int owners = 0;  // streams that reused times for most of their events
    for (const auto& [stream, counts] : rep.events_and_same_times)
      if (counts.first > 10000 && counts.second * 2 > counts.first) ++owners;
    EXPECT_EQ(owners, 2) << "both threads should have owned the time in their turns; the test proves nothing";
  }
}

// A worker's shape: the main thread allocated, then waits for the one thread that works. The
// worker's events reuse times as a lone main thread's do (one clock reading for up to 64
// events), since no other thread records while it works.
TEST(Clock, AWorkerThreadWhoseMainThreadWaitsReusesTimes) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_PINGPONG, "pool", "1000000"}, dir.path(), &r);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(traces.size(), 1u);
  const Replay rep = replay_trace(traces[0]);
  ASSERT_TRUE(rep.read_ok) << rep.error;
  expect_consistent(rep);
  uint64_t worker_events = 0, worker_same = 0;
  for (const auto& [stream, counts] : rep.events_and_same_times) {
    if (counts.first < worker_events) continue;
    std::tie(worker_events, worker_same) = counts;
  }
  ASSERT_GE(worker_events, 1000000u);
  // (63 in 64 on a quiet machine; fewer where a starved writer idles, which stops the sharing.)
  EXPECT_GT(worker_same, worker_events / 2) << worker_same << " of " << worker_events << " events took the time before them";
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

// A signal handler that allocates, signalled about every 20 us, while its thread maps and unmaps
// memory: signals land inside the recorder's own work on the mappings (unwinding a mapping's
// stack, writing its record), where the handler's malloc and free cannot be recorded.
// None may vanish: each handler allocation is either in the trace or counted in the End
// record's lost events (a malloc and its free, both lost together), and the readers say so.
TEST(Lifecycle, AHandlersEventsDuringTheRecordersWorkAreCountedAsLost) {
  TempDir dir;
  RunResult r;
  auto traces = traced({MT_SIGNAL_STORM, "alloc", "1500"}, dir.path(), &r);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(traces.size(), 1u);
  long handled = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "handler allocations %ld", &handled), 1) << r.out;
  ASSERT_GT(handled, 50) << "the signals did not arrive; the test proves nothing";
  const Replay rep = replay_trace(traces[0]);
  ASSERT_TRUE(rep.read_ok) << rep.error;
  ASSERT_TRUE(rep.ended);
  EXPECT_EQ(rep.double_allocs, 0u);
  const auto it = rep.allocs_by_size.find(4321);
  const uint64_t recorded = it == rep.allocs_by_size.end() ? 0 : it->second;
  EXPECT_EQ(rep.lost_events % 2, 0u) << "a lost malloc goes with its lost free";
  EXPECT_EQ(recorded + rep.lost_events / 2, static_cast<uint64_t>(handled))
      << recorded << " recorded, " << rep.lost_events << " lost events";
  if (rep.lost_events == 0) return;
  RunResult info = run({MT_WRAPPER, "info", traces[0]}, {}, dir.path());
  EXPECT_NE(info.out.find("lost events"), std::string::npos) << info.out;
}

// The process stream's first records (ProcessInfo and the modules) are the trace's first block,
// before any thread's events, however fast the threads fill their chunks: a trace stopped by
// its size limit (as by a full disk) at 64 KiB, six times, still says what ran.
TEST(Lifecycle, TheProcessAndItsModulesAreTheTracesFirstBlock) {
  for (int run = 0; run < 6; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    TempDir dir;
    RunResult r;
    auto traces = traced({MT_HIGH_RATE, "8", "100000"}, dir.path(), &r, {{"MEMTIDE_MAX_SIZE", "64KiB"}});
    ASSERT_EQ(r.status, 0) << r.err;
    ASSERT_EQ(traces.size(), 1u);
    fmt::FileReader reader;
    ASSERT_TRUE(reader.open(traces[0]).ok());
    fmt::Block b;
    ASSERT_TRUE(reader.next(b).ok());
    EXPECT_EQ(b.header.stream, 0u);
    struct First : fmt::NullVisitor {
      int process = 0, modules = 0;
      void on_process_info(uint32_t, const fmt::ProcessInfo&) { ++process; }
      void on_module_load(uint32_t, const fmt::ModuleLoad&) { ++modules; }
    } first;
    fmt::RecordDecoder decoder;
    ASSERT_TRUE(decoder.decode(b, first).ok());
    EXPECT_EQ(first.process, 1);
    EXPECT_GT(first.modules, 0);
    const Replay rep = replay_trace(traces[0]);
    EXPECT_TRUE(rep.ended);
    EXPECT_EQ(rep.argv.size(), 3u);
  }
}

// One meaning for every option that takes a size (formats/size.h): KB, MB, GB are powers of
// 1000, KiB, MiB, GiB powers of 1024, a bare number is bytes; a unit letter alone is refused.
// The defaults of a sampled recording come from the option table's `sampled` column, for the
// options not given, from the environment and from attach's configuration alike.
TEST(Options, ASampledRecordingTakesTheTablesSampledDefaultsForWhatWasNotGiven) {
  using namespace memtide::rec;
  Options exact;
  apply_mode_defaults(exact);
  EXPECT_EQ(exact.flush_interval_ms, 20u);
  EXPECT_EQ(exact.counter_interval_ms, 10u);
  EXPECT_EQ(exact.checkpoint_interval_s, 0u);

  Options sampled;
  ASSERT_EQ(apply_option(sampled, "MEMTIDE_SAMPLE", "512KiB"), nullptr);
  apply_mode_defaults(sampled);
  EXPECT_EQ(sampled.flush_interval_ms, 500u);
  EXPECT_EQ(sampled.counter_interval_ms, 100u);
  EXPECT_EQ(sampled.checkpoint_interval_s, 10u);

  Options set;
  ASSERT_EQ(apply_option(set, "MEMTIDE_SAMPLE", "512KiB"), nullptr);
  ASSERT_EQ(apply_option(set, "MEMTIDE_FLUSH_INTERVAL_MS", "20"), nullptr);
  ASSERT_EQ(apply_option(set, "MEMTIDE_CHECKPOINT_INTERVAL", "0"), nullptr);
  EXPECT_TRUE(set.was_given(kOption_flush_interval_ms));
  EXPECT_FALSE(set.was_given(kOption_counter_interval_ms));
  apply_mode_defaults(set);
  EXPECT_EQ(set.flush_interval_ms, 20u) << "a value given, even the exact default, stays";
  EXPECT_EQ(set.checkpoint_interval_s, 0u);
  EXPECT_EQ(set.counter_interval_ms, 100u);

  Options kept;
  ASSERT_EQ(apply_option(kept, "MEMTIDE_KEEP", "64MiB"), nullptr);
  ASSERT_EQ(apply_option(kept, "MEMTIDE_CHECKPOINT_INTERVAL", "0"), nullptr);
  apply_mode_defaults(kept);
  EXPECT_EQ(kept.checkpoint_interval_s, kKeptCheckpointIntervalS) << "a kept set needs checkpoints";

  Options bad;
  EXPECT_NE(apply_option(bad, "MEMTIDE_FLUSH_INTERVAL_MS", "5"), nullptr);
  EXPECT_FALSE(bad.was_given(kOption_flush_interval_ms)) << "a refused value is not given";
}

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
