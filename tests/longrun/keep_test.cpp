// Kept traces (`memtide run --keep SIZE`): the example worker recorded under the real LD_PRELOAD
// into a segment set; its disk use sampled while it runs, every reader opening the set, a set cut
// by SIGKILL, and the report of the range a set keeps equal to the same range's report of the
// whole recording (every segment of the same run, kept by hard links as they are written).
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "analysis/replay.h"
#include "formats/checkpoint.h"
#include "formats/reader.h"
#include "formats/segment_set.h"
#include "viewer/loader.h"

namespace memtide::test {
namespace {

constexpr uint64_t kKeep = 2u << 20;  // 2 MiB: segments of 256 KiB

std::string temp_dir() {
  static const std::string dir = [] {
    char t[] = "/tmp/memtide-keep.XXXXXX";
    const char* d = mkdtemp(t);
    return std::string(d ? d : "/tmp");
  }();
  return dir;
}

std::string run_out(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int st = pclose(p);
  if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return out;
}

// The worker recorded with --keep into `stem`.mtide, started in the background.
pid_t start_worker(const std::string& stem, const char* seconds, const char* rate) {
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("LD_PRELOAD", MT_PRELOAD, 1);
    setenv("MEMTIDE_OUTPUT", (stem + ".mtide").c_str(), 1);
    setenv("MEMTIDE_KEEP", std::to_string(kKeep).c_str(), 1);
    execl(MT_WORKER, MT_WORKER, "--seconds", seconds, "--threads", "2", "--rate", rate, static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// Watches a set while its recorder runs: the largest sum of its segments' sizes seen, the
// largest segment, and (with `links`) a hard link to every segment in `links`/ as it appears,
// so that the whole recording outlives the removal of its oldest segments.
struct Watch {
  std::string stem, links;
  std::atomic<bool> stop{false};
  uint64_t most = 0, largest = 0;
  std::set<uint32_t> seen;
  std::thread t;

  void look() {
    uint64_t sum = 0;
    for (const fmt::SegmentPath& p : fmt::list_segments(stem)) {
      struct stat st;
      if (::stat(p.path.c_str(), &st) != 0) continue;
      sum += static_cast<uint64_t>(st.st_size);
      largest = std::max<uint64_t>(largest, static_cast<uint64_t>(st.st_size));
      if (!links.empty() && seen.insert(p.number).second) {
        const std::string to = links + "/" + p.path.substr(p.path.rfind('/') + 1);
        EXPECT_EQ(::link(p.path.c_str(), to.c_str()), 0) << to;
      }
    }
    most = std::max(most, sum);
  }
  void start() {
    if (!links.empty()) ::mkdir(links.c_str(), 0700);
    t = std::thread([this] {
      while (!stop.load()) {
        look();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      look();
    });
  }
  void finish() {
    stop = true;
    t.join();
  }
};

int wait_for(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return st;
}

// One recording shared by the tests below: the worker for 12 s with --keep 2MiB, every segment
// linked aside as it appeared.
struct Recorded {
  std::string stem, whole;
  uint64_t most = 0, largest = 0;
  size_t segments = 0;
  int status = -1;
};

const Recorded& recorded() {
  static const Recorded r = [] {
    Recorded x;
    x.stem = temp_dir() + "/kept";
    Watch w;
    w.stem = x.stem;
    w.links = temp_dir() + "/whole";
    w.start();
    x.status = wait_for(start_worker(x.stem, "12", "8000"));
    w.finish();
    x.most = w.most;
    x.largest = w.largest;
    x.segments = w.seen.size();
    x.whole = w.links + "/kept";
    return x;
  }();
  return r;
}

TEST(KeptTrace, DiskUseNeverPassesSizePlusOneSegment) {
  const Recorded& r = recorded();
  ASSERT_EQ(r.status, 0);
  const auto kept = fmt::list_segments(r.stem);
  ASSERT_FALSE(kept.empty());
  EXPECT_GT(kept.front().number, 1u) << "no segment was removed: the test needs a longer run";
  EXPECT_GE(r.segments, 10u);
  EXPECT_LE(r.most, kKeep + kKeep / 8) << "largest segment " << r.largest;
  EXPECT_LE(r.largest, kKeep / 8 + (128u << 10));  // (a checkpoint's blocks may pass it a little)
}

std::string cli(const std::string& args, int* status = nullptr) {
  return run_out(std::string(MT_CLI) + " " + args + " 2>&1", status);
}

TEST(KeptTrace, EveryReaderOpensTheSetByItsBaseNameOrASegment) {
  const Recorded& r = recorded();
  const auto kept = fmt::list_segments(r.stem);
  ASSERT_GE(kept.size(), 2u);
  for (const std::string& name : {r.stem + ".mtide", kept.front().path, kept.back().path}) {
    SCOPED_TRACE(name);
    int st = -1;
    const std::string info = cli("info " + name, &st);
    EXPECT_EQ(st, 0) << info;
    char want[64];
    std::snprintf(want, sizeof want, "segments %04u-%04u of ", kept.front().number, kept.back().number);
    EXPECT_NE(info.find(want), std::string::npos) << info;
    EXPECT_NE(info.find("complete (end: exit"), std::string::npos) << info;
    const std::string report = cli("report --top 5 " + name, &st);
    EXPECT_EQ(st, 0) << report;
    EXPECT_NE(report.find(want), std::string::npos) << report;
    EXPECT_NE(report.find("remember_session"), std::string::npos) << report;
    EXPECT_NE(report.find("allocated before the kept segments were never freed"), std::string::npos) << report;
    const std::string flame = cli("flamegraph -o - " + name, &st);  // (folded stacks)
    EXPECT_EQ(st, 0);
    EXPECT_NE(flame.find(";handle_request;"), std::string::npos);
    cli("check " + name, &st);
    EXPECT_TRUE(st == 0 || st == 1) << st;  // a verdict, not an error
    const std::string diff = cli("diff " + name + " " + r.stem + ".mtide", &st);
    EXPECT_EQ(st, 0) << diff;
  }
}

TEST(KeptTrace, SymbolizeWritesTheNamesWhereTheSetIsRead) {
  const Recorded& r = recorded();
  int st = -1;
  const std::string out = cli("symbolize " + r.stem + ".mtide", &st);
  ASSERT_EQ(st, 0) << out;
  // The names are in the set: a report needs no module file (MEMTIDE_DEBUGINFOD etc. aside).
  const std::string info = cli("info --json " + r.stem + ".mtide", &st);
  EXPECT_EQ(st, 0);
  EXPECT_NE(info.find("\"symbols\""), std::string::npos) << info.substr(0, 2000);
  const std::string report = cli("report --top 5 " + fmt::list_segments(r.stem).back().path, &st);
  EXPECT_NE(report.find("write_audit_line"), std::string::npos) << report;
}

// The report of the range the set keeps (from its first checkpoint), and the same range of the
// whole recording replayed from its start: the same.
TEST(KeptTrace, TheKeptRangesReportIsTheWholeRecordingsReport) {
  const Recorded& r = recorded();
  fmt::FileReader kept;
  ASSERT_TRUE(kept.open(r.stem + ".mtide").ok());
  ASSERT_TRUE(kept.starts_mid_run());
  const auto heads = fmt::find_checkpoints(kept);
  ASSERT_FALSE(heads.empty());
  fmt::FileReader whole;
  ASSERT_TRUE(whole.open(r.whole + ".mtide").ok());
  ASSERT_FALSE(whole.starts_mid_run());
  ASSERT_EQ(whole.segment_set()->segments().size(), r.segments);
  // The recording's start, from the set's ProcessInfo.
  analysis::Session s{analysis::ReplayOptions{}};
  ASSERT_EQ(s.open(r.stem + ".mtide"), "");
  s.advance();
  s.finish();
  const auto m = s.snapshot();
  EXPECT_EQ(s.checkpoint(), heads.front().seq);
  ASSERT_GT(heads.front().time, m->time_base);
  const std::string from = std::to_string(heads.front().time - m->time_base) + "ns";
  for (const std::string& args : {"report --json --from " + from, "report --top 8 --from " + from,
                                  "flamegraph -o - --from " + from}) {
    SCOPED_TRACE(args);
    const std::string part = run_out(std::string(MT_CLI) + " " + args + " " + r.stem + ".mtide 2>/dev/null");
    const std::string full = run_out("MEMTIDE_FULL_REPLAY=1 " + std::string(MT_CLI) + " " + args + " " + r.whole + ".mtide 2>/dev/null");
    EXPECT_GT(full.size(), 100u);
    std::string a = part, b = full;
    for (std::string* t : {&a, &b})  // (the file's name and size are not the report's)
      for (const std::string& name : {r.stem + ".mtide", r.whole + ".mtide"})
        for (size_t at; (at = t->find(name)) != std::string::npos;) t->replace(at, name.size(), "TRACE");
    if (args.find("--json") != std::string::npos) {
      // The markers of the removed segments are not in the set: it holds the latest ones.
      nlohmann::json ja = nlohmann::json::parse(a), jb = nlohmann::json::parse(b), kept = nlohmann::json::array();
      const size_t n = ja["markers"].size(), all = jb["markers"].size();
      ASSERT_LT(n, all);
      for (size_t i = all - n; i < all; ++i) kept.push_back(jb["markers"][i]);
      jb["markers"] = kept;
      // The set says how many blocks from before its range were never freed.
      ASSERT_EQ(ja["warnings"].size(), 1u);
      EXPECT_NE(ja["warnings"][0].get<std::string>().find("allocated before the kept segments were never freed"),
                std::string::npos);
      ja["warnings"] = jb["warnings"];
      a = ja.dump(1), b = jb.dump(1);
    }
    EXPECT_EQ(a, b);
  }
}

TEST(KeptTrace, ASetCutBySigkillIsReadable) {
  const std::string stem = temp_dir() + "/killed";
  const pid_t pid = start_worker(stem, "60", "8000");
  sleep(9);
  kill(pid, SIGKILL);
  wait_for(pid);
  const auto kept = fmt::list_segments(stem);
  ASSERT_GE(kept.size(), 2u);
  EXPECT_GT(kept.front().number, 1u);
  int st = -1;
  const std::string info = cli("info " + stem + ".mtide", &st);
  EXPECT_EQ(st, 0) << info;
  EXPECT_NE(info.find("no end record"), std::string::npos) << info;
  const std::string report = cli("report --top 3 " + stem + ".mtide", &st);
  EXPECT_EQ(st, 0) << report;
  analysis::Session s{analysis::ReplayOptions{}};
  ASSERT_EQ(s.open(kept.back().path), "");
  s.advance();
  s.finish();
  EXPECT_GT(s.checkpoint(), 0u);
  EXPECT_GT(s.snapshot()->totals[0].allocations, 1000u);
}

TEST(KeptTrace, MemtideRunKeepsItsSummaryAndExitStatus) {
  const std::string out = temp_dir() + "/run.mtide";
  int st = -1;
  const std::string text = run_out(std::string(MT_WRAPPER) + " run --keep 1MiB -o " + out + " -- " MT_WORKER
                                   " --seconds 5 --threads 2 --rate 8000 2>&1", &st);
  EXPECT_EQ(st, 0) << text;
  const auto kept = fmt::list_segments(temp_dir() + "/run");
  ASSERT_GE(kept.size(), 2u);
  EXPECT_GT(kept.front().number, 1u);
  EXPECT_NE(text.find(" not freed"), std::string::npos) << text;  // the run's summary
  // The gate: the worker leaks (one request in 1000), so --check fails it, and says why.
  const std::string checked = run_out(std::string(MT_WRAPPER) + " run --keep 1MiB --check -o " + out + " -- " MT_WORKER
                                      " --seconds 3 --threads 2 --rate 8000 2>&1", &st);
  EXPECT_NE(st, 0);
  EXPECT_NE(st, 2) << checked;
  int info_st = -1;
  const std::string info = cli("info " + out, &info_st);
  EXPECT_EQ(info_st, 0) << info;
  EXPECT_NE(info.find("complete (end: exit"), std::string::npos) << info;
}

// The viewer's loader opens a set while its recorder writes it, follows it across new segments
// and the removal of old ones, and ends with the recording's last events.
TEST(KeptTrace, TheViewersLoaderFollowsASet) {
  using namespace std::chrono_literals;
  const std::string stem = temp_dir() + "/viewed";
  const pid_t pid = start_worker(stem, "6", "8000");
  for (int i = 0; i < 500 && fmt::list_segments(stem).size() < 2; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_GE(fmt::list_segments(stem).size(), 2u);
  viewer::Loader::Options o;
  o.live_interval = 100ms;
  viewer::Loader l(o);
  l.open(stem + ".mtide");
  auto until = [&](auto pred, std::chrono::seconds limit) {
    for (auto end = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < end;) {
      if (pred()) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  };
  ASSERT_TRUE(until([&] { return l.snapshot()->loaded() || !l.snapshot()->error.empty(); }, 30s));
  EXPECT_EQ(l.snapshot()->error, "");
  EXPECT_TRUE(l.snapshot()->live);
  const uint64_t first = l.snapshot()->base->heap().allocations;
  EXPECT_EQ(WEXITSTATUS(wait_for(pid)), 0);
  ASSERT_TRUE(until([&] { return !l.snapshot()->live && l.snapshot()->base->complete; }, 30s));
  const auto& heap = l.snapshot()->base->heap();
  EXPECT_GT(heap.allocations, first);
  EXPECT_GT(fmt::list_segments(stem).front().number, 1u);
  // What a reader of the finished set counts from the same start.
  analysis::Session s{analysis::ReplayOptions{}};
  ASSERT_EQ(s.open(stem + ".mtide"), "");
  s.advance();
  s.finish();
  EXPECT_GE(heap.allocations, s.snapshot()->totals[0].allocations);
}

}  // namespace
}  // namespace memtide::test
