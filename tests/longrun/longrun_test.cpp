// Checkpoints of a real recording (the example worker under LD_PRELOAD): written at their
// interval, found by a scan of the block headers (also in a file cut by SIGKILL), and a window
// replayed from one equals the same window replayed from the start.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "analysis/replay.h"
#include "formats/checkpoint.h"
#include "formats/reader.h"
#include "viewer/loader.h"
#include "model_equal.h"

namespace memtide::test {
namespace {

using analysis::ReplayOptions;
using analysis::Session;

std::string temp_path(const std::string& name) {
  static const std::string dir = [] {
    char t[] = "/tmp/memtide-longrun.XXXXXX";
    const char* d = mkdtemp(t);
    return std::string(d ? d : "/tmp");
  }();
  return dir + "/" + name;
}

// Records the worker into `trace` with checkpoints every second; `env` adds variables.
int record_worker(const std::string& trace, const std::string& args, const std::string& env = "") {
  std::remove(trace.c_str());
  const std::string cmd = "LD_PRELOAD=" MT_PRELOAD " MEMTIDE_OUTPUT=" + trace + " MEMTIDE_CHECKPOINT_INTERVAL=1 " + env +
                          " " MT_WORKER " " + args + " >/dev/null 2>&1";
  return std::system(cmd.c_str());
}

std::vector<fmt::CheckpointHead> heads_of(const std::string& trace) {
  fmt::FileReader r;
  EXPECT_TRUE(r.open(trace).ok());
  return fmt::find_checkpoints(r);
}

struct Replayed {
  std::unique_ptr<analysis::Model> model;
  uint64_t checkpoint = 0, bytes_read = 0;
};

Replayed replay(const std::string& trace, ReplayOptions o, bool full) {
  if (full) setenv("MEMTIDE_FULL_REPLAY", "1", 1);
  Session s(o);
  Replayed r;
  EXPECT_EQ(s.open(trace), "");
  s.advance();
  s.finish();
  r.model = s.snapshot();
  r.checkpoint = s.checkpoint();
  r.bytes_read = s.bytes_read();
  unsetenv("MEMTIDE_FULL_REPLAY");
  return r;
}

// The window's figures: everything but the whole-run series, which start at the checkpoint.
void expect_same_window(const analysis::Model& a, const analysis::Model& b) {
  EXPECT_EQ(a.complete, b.complete);
  EXPECT_EQ(a.time_base, b.time_base);
  EXPECT_EQ(a.last_time, b.last_time);
  EXPECT_EQ(a.peak_rss, b.peak_rss);
  expect_same_stacks_and_apis(a, b);
  ASSERT_EQ(a.threads.size(), b.threads.size());
  for (std::size_t i = 0; i < a.threads.size(); ++i) {
    EXPECT_EQ(a.threads[i].id, b.threads[i].id);
    EXPECT_EQ(a.threads[i].os_tid, b.threads[i].os_tid);
    EXPECT_EQ(a.threads[i].name, b.threads[i].name);
    EXPECT_EQ(a.threads[i].allocations, b.threads[i].allocations);
    EXPECT_EQ(a.threads[i].frees, b.threads[i].frees);
  }
  ASSERT_EQ(a.markers.size(), b.markers.size());
  for (std::size_t i = 0; i < a.markers.size(); ++i) {
    EXPECT_EQ(a.markers[i].time, b.markers[i].time);
    EXPECT_EQ(a.markers[i].label, b.markers[i].label);
  }
  EXPECT_EQ(a.modules.size(), b.modules.size());
}

// Windows at several places of `trace`: each from a checkpoint, equal to the full replay's
// (which also stops at the window's end). (What each reads is compared on a larger trace in
// AWindowIsReadNoFurtherThanItsEnd: in a trace of a megabyte or two, the reader thread's
// read-ahead and the checkpoint's copy of the live blocks are as large as what a window skips.)
void expect_windows_match(const std::string& trace, uint64_t seconds) {
  const uint64_t s = 1'000'000'000;
  struct W {
    uint64_t from, to;
    std::optional<uint64_t> at;
  };
  for (const W& w : {W{s + s / 2, 2 * s, std::nullopt}, W{2 * s + s / 3, seconds * s, 3 * s},
                     W{(seconds - 1) * s, seconds * s + s, std::nullopt}}) {
    SCOPED_TRACE("window from " + std::to_string(w.from) + " to " + std::to_string(w.to));
    ReplayOptions o;
    o.from = w.from;
    o.to = w.to;
    o.at = w.at;
    const Replayed full = replay(trace, o, true), part = replay(trace, o, false);
    EXPECT_EQ(full.checkpoint, 0u);
    EXPECT_GT(part.checkpoint, 0u);
    EXPECT_GT(full.model->totals[0].allocations, 0u);
    expect_same_window(*full.model, *part.model);
  }
}

TEST(Checkpoints, AreWrittenAtTheirIntervalWithTheLiveHeap) {
  const std::string trace = temp_path("interval.mtide");
  ASSERT_EQ(record_worker(trace, "--seconds 5 --threads 2 --rate 4000"), 0);
  const auto heads = heads_of(trace);
  ASSERT_GE(heads.size(), 2u);
  for (std::size_t i = 0; i < heads.size(); ++i) {
    EXPECT_EQ(heads[i].seq, i + 1);
    EXPECT_LE(heads[i].replay_from, heads[i].data_offset);
    EXPECT_GT(heads[i].blocks[0], 0u);  // the worker's cache grows: never an empty heap
    if (i) {
      EXPECT_GT(heads[i].time, heads[i - 1].time);
      EXPECT_GE(heads[i].blocks[0], heads[i - 1].blocks[0] / 2);
    }
  }
  // The live heap at the checkpoint is the one a replay up to its time holds.
  fmt::FileReader r;
  ASSERT_TRUE(r.open(trace).ok());
  uint64_t n = 0, bytes = 0;
  EXPECT_EQ(fmt::read_checkpoint(r, heads.back(),
                                 [&](fmt::CheckpointDomain d, const fmt::CheckpointEntry& e) {
                                   if (d == fmt::CheckpointDomain::Heap) ++n, bytes += e.size;
                                 }),
            "");
  EXPECT_EQ(n, heads.back().blocks[0]);
  EXPECT_EQ(bytes, heads.back().bytes[0]);
}

TEST(Checkpoints, AreFoundByAScanWhenTheHeaderPointerIsTorn) {
  const std::string trace = temp_path("torn.mtide");
  ASSERT_EQ(record_worker(trace, "--seconds 3.5 --threads 2 --rate 4000"), 0);
  const auto by_pointer = heads_of(trace);
  ASSERT_GE(by_pointer.size(), 2u);
  // The 16 bytes at offset 32 (the pointer and its checksum) overwritten: the block headers
  // are scanned instead, and give the same checkpoints.
  FILE* f = std::fopen(trace.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fseek(f, fmt::kCheckpointPointerAt, SEEK_SET);
  const uint8_t junk[fmt::kCheckpointPointerSize] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  ASSERT_EQ(std::fwrite(junk, 1, sizeof junk, f), sizeof junk);
  std::fclose(f);
  const auto by_scan = heads_of(trace);
  ASSERT_EQ(by_scan.size(), by_pointer.size());
  for (std::size_t i = 0; i < by_scan.size(); ++i) {
    EXPECT_EQ(by_scan[i].seq, by_pointer[i].seq);
    EXPECT_EQ(by_scan[i].offset, by_pointer[i].offset);
    EXPECT_EQ(by_scan[i].time, by_pointer[i].time);
    EXPECT_EQ(by_scan[i].markers.size(), by_pointer[i].markers.size());
  }
}

TEST(Checkpoints, AWindowFromACheckpointEqualsTheFullReplay) {
  const std::string trace = temp_path("window.mtide");
  ASSERT_EQ(record_worker(trace, "--seconds 5 --threads 3 --rate 4000"), 0);
  expect_windows_match(trace, 4);
}

std::string run_out(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  pclose(p);
  return out;
}

TEST(Checkpoints, AWindowsReportAndFlamegraphAreTheFullReplays) {
  const std::string trace = temp_path("cli.mtide");
  ASSERT_EQ(record_worker(trace, "--seconds 4.5 --threads 2 --rate 4000"), 0);
  ASSERT_GE(heads_of(trace).size(), 2u);
  for (const std::string args : {"report --json --from 2.5s --to 3.5s --at 4s", "report --from 2s --top 5",
                                 "flamegraph -o - --from 2.2s --to 4s"}) {
    SCOPED_TRACE(args);
    const std::string cmd = std::string(MT_CLI) + " " + args + " " + trace + " 2>&1";
    const std::string part = run_out(cmd), full = run_out("MEMTIDE_FULL_REPLAY=1 " + cmd);
    EXPECT_GT(full.size(), 100u);
    EXPECT_EQ(part, full);
  }
}

// A window with an end is read up to it and no further (its figures are as at its end), from
// a checkpoint or from the start alike; what the rest of the file says that is not about time
// (the End record, the trace's last time) is read from its tail.
TEST(Checkpoints, AWindowIsReadNoFurtherThanItsEnd) {
  const std::string trace = temp_path("stop.mtide");
  ASSERT_EQ(record_worker(trace, "--seconds 6 --threads 2 --rate 40000"), 0);
  struct stat st {};
  ASSERT_EQ(stat(trace.c_str(), &st), 0);
  const uint64_t size = static_cast<uint64_t>(st.st_size), s = 1'000'000'000;
  const Replayed whole = replay(trace, {}, false);
  ASSERT_TRUE(whole.model->complete);
  for (const bool full : {true, false}) {
    SCOPED_TRACE(full ? "from the start" : "from a checkpoint");
    ReplayOptions o;
    o.from = 1 * s + s / 4;
    o.to = 2 * s;
    const Replayed w = replay(trace, o, full);
    EXPECT_LT(w.bytes_read, size / 2);
    EXPECT_TRUE(w.model->complete);
    ASSERT_TRUE(w.model->end && whole.model->end);
    EXPECT_EQ(w.model->end->reason, whole.model->end->reason);
    EXPECT_EQ(w.model->last_time, whole.model->last_time);
    EXPECT_GT(w.model->heap().allocations, 0u);
    EXPECT_EQ(w.model->heap().leaked_bytes, w.model->heap().allocated_bytes - w.model->heap().freed_bytes);
  }
  // Late in the trace, the replay from the checkpoint before the window reads less than one
  // from the start.
  {
    ReplayOptions o;
    o.from = 4 * s + s / 2;
    o.to = 5 * s;
    const Replayed full = replay(trace, o, true), part = replay(trace, o, false);
    EXPECT_GT(part.checkpoint, 0u);
    EXPECT_LT(part.bytes_read, full.bytes_read * 3 / 4);
  }
  // The window's figures do not depend on how much later `at` is, and `at` at the window's end
  // is its leaks.
  ReplayOptions o;
  o.from = 2 * s;
  o.to = 3 * s;
  const Replayed plain = replay(trace, o, false);
  o.at = 3 * s;
  const Replayed at_end = replay(trace, o, false);
  EXPECT_EQ(at_end.model->heap().at_bytes, plain.model->heap().leaked_bytes);
  o.at = 4 * s;
  const Replayed later = replay(trace, o, false);
  analysis::Totals t = later.model->heap();
  t.at_bytes = t.at_blocks = 0;
  expect_same_totals(plain.model->heap(), t, 0);
  EXPECT_LE(later.model->heap().at_bytes, plain.model->heap().leaked_bytes);
  EXPECT_GT(later.bytes_read, plain.bytes_read);
}

// report and flamegraph agree on a window: what is leaked in it (not freed by its end) is what
// was live at its end among the blocks made in it (export's pprof takes the same figures).
TEST(Checkpoints, TheCommandsAgreeOnAWindow) {
  const std::string trace = temp_path("agree.mtide");
  ASSERT_EQ(record_worker(trace, "--seconds 3.5 --threads 2 --rate 4000"), 0);
  const std::string cli = std::string(MT_CLI) + " ";
  const nlohmann::json r = nlohmann::json::parse(run_out(cli + "report --json --from 1.2s --to 2.5s --at 2.5s " + trace));
  const uint64_t leaked = r["leaked_bytes"].get<uint64_t>();
  EXPECT_GT(leaked, 0u);
  EXPECT_EQ(r["live_at"]["bytes"].get<uint64_t>(), leaked);
  EXPECT_EQ(r["window"]["leaked_means"], "allocated in the window and not freed by its end");
  EXPECT_TRUE(r["complete"].get<bool>());
  auto folded_sum = [](const std::string& out) {
    uint64_t sum = 0;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);)
      if (line.find(' ') != std::string::npos) sum += std::stoull(line.substr(line.rfind(' ') + 1));
    return sum;
  };
  EXPECT_EQ(folded_sum(run_out(cli + "flamegraph --metric leaked -o - --from 1.2s --to 2.5s " + trace)), leaked);
  EXPECT_EQ(folded_sum(run_out(cli + "flamegraph --metric live --at 2.5s -o - --from 1.2s --to 2.5s " + trace)), leaked);
}

// The whole run's timeline drawn on opening reads the checkpoints' heads (which hold the process
// stream's counters and marks) and the blocks after the last one, not every block: the same
// lines and marks as a scan of every block, from a small part of the file.
TEST(Checkpoints, TheWholeRunsTimelineIsReadFromTheHeads) {
  const std::string trace = temp_path("timeline.mtide");
  ASSERT_EQ(record_worker(trace, "--seconds 5 --threads 2 --rate 40000"), 0);
  const auto heads = heads_of(trace);
  ASSERT_GE(heads.size(), 3u);
  for (const fmt::CheckpointHead& h : heads) EXPECT_TRUE(h.has_process) << h.seq;
  viewer::TimelineScan quick_scan, full_scan;
  full_scan.from_heads = false;
  const viewer::TimelineData quick = viewer::scan_timeline(trace, 4096, &quick_scan);
  const viewer::TimelineData full = viewer::scan_timeline(trace, 4096, &full_scan);
  EXPECT_TRUE(quick_scan.used_heads);
  EXPECT_FALSE(full_scan.used_heads);
  EXPECT_GT(quick.rss.size(), 50u);
  ASSERT_EQ(quick.rss.size(), full.rss.size());
  for (std::size_t i = 0; i < quick.rss.size(); ++i) {
    EXPECT_EQ(quick.rss[i].time, full.rss[i].time) << i;
    EXPECT_EQ(quick.rss[i].min, full.rss[i].min) << i;
    EXPECT_EQ(quick.rss[i].max, full.rss[i].max) << i;
    EXPECT_EQ(quick.rss[i].last, full.rss[i].last) << i;
  }
  EXPECT_EQ(quick.peak_rss, full.peak_rss);
  EXPECT_EQ(quick.duration, full.duration);
  ASSERT_EQ(quick.markers.size(), full.markers.size());
  for (std::size_t i = 0; i < quick.markers.size(); ++i) {
    EXPECT_EQ(quick.markers[i].time, full.markers[i].time) << i;
    EXPECT_EQ(quick.markers[i].label, full.markers[i].label) << i;
  }
  EXPECT_EQ(quick.heap.size(), heads.size());
  // Only what follows the last head's replay_from is read block by block (about a second of
  // the five), besides the heads and the first block.
  struct stat st {};
  ASSERT_EQ(stat(trace.c_str(), &st), 0);
  EXPECT_LT(quick_scan.bytes_read, full_scan.bytes_read / 2) << st.st_size;
}

// The viewer's selection is the same replay: from the checkpoint before it up to its end, with
// the figures of the CLI's window; and the timeline read without a replay has a heap point per
// checkpoint, at its live bytes.
TEST(Checkpoints, TheViewersSelectionStartsFromACheckpoint) {
  const std::string trace = temp_path("viewer.mtide");
  ASSERT_EQ(record_worker(trace, "--seconds 6 --threads 2 --rate 40000"), 0);
  const auto heads = heads_of(trace);
  ASSERT_GE(heads.size(), 4u);
  const viewer::TimelineData t = viewer::scan_timeline(trace, 4096);
  ASSERT_EQ(t.heap.size(), heads.size());
  for (std::size_t i = 0; i < heads.size(); ++i) EXPECT_EQ(t.heap[i].last, heads[i].bytes[0]);
  EXPECT_GT(t.rss.size(), 100u);
  EXPECT_GE(t.markers.size(), 3u);

  const uint64_t s = 1'000'000'000;
  viewer::Loader l;
  l.open(trace);
  auto wait = [](auto&& p) {
    for (int i = 0; i < 6000 && !p(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return p();
  };
  ASSERT_TRUE(wait([&] { return l.idle() && l.snapshot()->loaded(); }));
  const viewer::TimeRange w{4 * s + s / 2, 5 * s};
  l.set_window(w);
  ASSERT_TRUE(wait([&] { return l.idle() && l.snapshot()->view && l.snapshot()->view->window == w; }));
  const auto v = l.snapshot()->view;
  struct stat st {};
  ASSERT_EQ(stat(trace.c_str(), &st), 0);
  EXPECT_LT(v->bytes_read, static_cast<uint64_t>(st.st_size) / 2);
  ReplayOptions o;
  o.from = w.from;
  o.to = o.at = w.to;
  const Replayed full = replay(trace, o, true);
  expect_same_window(*v->model, *full.model);
  EXPECT_GT(v->model->heap().leaked_bytes, 0u);
}

TEST(Checkpoints, ASampledWindowFromACheckpointEqualsTheFullReplay) {
  const std::string trace = temp_path("sampled.mtide");
  ASSERT_EQ(record_worker(trace, "--seconds 5 --threads 2 --rate 4000", "MEMTIDE_SAMPLE=4096"), 0);
  expect_windows_match(trace, 4);
}

TEST(Checkpoints, AFileCutBySigkillKeepsItsCheckpoints) {
  const std::string trace = temp_path("killed.mtide");
  std::remove(trace.c_str());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("LD_PRELOAD", MT_PRELOAD, 1);
    setenv("MEMTIDE_OUTPUT", trace.c_str(), 1);
    setenv("MEMTIDE_CHECKPOINT_INTERVAL", "1", 1);
    execl(MT_WORKER, MT_WORKER, "--seconds", "60", "--threads", "2", "--rate", "4000", static_cast<char*>(nullptr));
    _exit(127);
  }
  sleep(6);
  kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
  const auto heads = heads_of(trace);
  ASSERT_GE(heads.size(), 2u);
  expect_windows_match(trace, 4);
}

}  // namespace
}  // namespace memtide::test
