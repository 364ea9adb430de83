// Kept traces (`memtide run --keep`): the example worker recorded under the real LD_PRELOAD
// into a segment set; its disk use sampled while it runs, every reader opening the set, a set cut
// by SIGKILL, symbolize in place and as a copy, and the report of the range a set keeps equal to
// the same range's report of the whole recording (every segment of the same run, kept by hard
// links as they are written), its leaks equal to the whole recording's. Also: a program that
// leaks early only, a segment that cannot be created, a follower left behind, the timeline read
// without a replay.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/replay.h"
#include "tests/longrun/keep_support.h"
#include "formats/checkpoint.h"
#include "formats/reader.h"
#include "formats/segment_set.h"
#include "analysis/symbols.h"
#include "viewer/format.h"
#include "viewer/growth_model.h"
#include "viewer/leaks_model.h"
#include "viewer/loader.h"
#include "viewer/summary_model.h"
#include "viewer/timeline_model.h"

namespace memtide::test {
namespace {

constexpr uint64_t kKeep = 2u << 20;  // 2 MiB: segments of 256 KiB

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

// A report's leaks by stack id: bytes, blocks and the first and last allocation times.
std::map<uint64_t, std::array<uint64_t, 4>> leaks_by_stack(const nlohmann::json& leaks) {
  std::map<uint64_t, std::array<uint64_t, 4>> out;
  for (const nlohmann::json& l : leaks)
    out[l["stack_id"].get<uint64_t>()] = {l["bytes"].get<uint64_t>(), l["count"].get<uint64_t>(),
                                          l["first_alloc_time_ns"].get<uint64_t>(), l["last_alloc_time_ns"].get<uint64_t>()};
  return out;
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
    EXPECT_NE(report.find("the kept segments begin at"), std::string::npos) << report;
    const std::string flame = cli("flamegraph -o - " + name, &st);  // (folded stacks)
    EXPECT_EQ(st, 0);
    EXPECT_NE(flame.find(";handle_request;"), std::string::npos);
    cli("check " + name, &st);
    EXPECT_TRUE(st == 0 || st == 1) << st;  // a verdict, not an error
    const std::string diff = cli("diff " + name + " " + r.stem + ".mtide", &st);
    EXPECT_EQ(st, 0) << diff;
  }
  // The size the viewer's summary shows: the kept segments' bytes on disk, not the offset the
  // set's writing reached (which counts the removed segments too).
  uint64_t disk = 0;
  for (const fmt::SegmentPath& s : kept) {
    struct stat st;
    ASSERT_EQ(::stat(s.path.c_str(), &st), 0);
    disk += static_cast<uint64_t>(st.st_size);
  }
  const analysis::AnalyzeResult a = analysis::analyze_file(r.stem + ".mtide");
  ASSERT_TRUE(a.ok()) << a.error;
  EXPECT_EQ(a.model->file_size, disk);
  const viewer::SummaryData sum = viewer::make_summary(*a.model, r.stem + ".mtide", /*recording=*/false);
  bool shown = false;
  for (const auto& sec : sum.sections)
    for (const auto& row : sec.rows) shown |= row.label == "trace" && row.value.find("(" + viewer::format_bytes(disk) + ",") != std::string::npos;
  EXPECT_TRUE(shown);
}

// A segment copied under a name of no set (a user's `cp`): read as its set's one segment, at
// its set's offsets, from its first checkpoint, said as such; not as a whole recording. Its
// prologue names the process (the process stream's first block is the trace's first).
TEST(KeptTrace, ASegmentCopiedUnderAnotherNameIsReadAsThatSegmentAlone) {
  const Recorded& r = recorded();
  const auto kept = fmt::list_segments(r.stem);
  ASSERT_GE(kept.size(), 3u);
  const fmt::SegmentPath& middle = kept[kept.size() / 2];
  const std::string copy = temp_dir() + "/copied.mtide";
  ASSERT_EQ(run_out("cp " + middle.path + " " + copy + " && echo ok"), "ok\n");
  int st = -1;
  const std::string info = cli("info " + copy, &st);
  EXPECT_EQ(st, 0) << info;
  char want[64];
  std::snprintf(want, sizeof want, "segment %04u of a kept set, alone", middle.number);
  EXPECT_NE(info.find(want), std::string::npos) << info;
  EXPECT_NE(info.find("read alone under another name"), std::string::npos) << info;
  EXPECT_NE(info.find("process      pid "), std::string::npos) << info;
  const nlohmann::json one = cli_json("report --json " + copy), set = cli_json("report --json " + r.stem + ".mtide");
  ASSERT_TRUE(one.is_object() && set.is_object());
  EXPECT_GT(one["total_allocations"].get<uint64_t>(), 0u);
  EXPECT_LT(one["total_allocations"].get<uint64_t>(), set["total_allocations"].get<uint64_t>());
  EXPECT_EQ(one["process"]["pid"], set["process"]["pid"]);
  bool said = false;
  for (const nlohmann::json& w : one["warnings"]) said |= w.get<std::string>().find("read alone") != std::string::npos;
  EXPECT_TRUE(said) << one["warnings"].dump();
}

// A window that ends before the kept range begins holds nothing the set kept: an error that
// says so, not a backwards window of zeros.
TEST(KeptTrace, AWindowBeforeTheKeptRangeIsAnError) {
  const Recorded& r = recorded();
  int st = -1;
  const std::string out = cli("report --from 0s --to 1ms " + r.stem + ".mtide", &st);
  EXPECT_EQ(st, 2) << out;
  EXPECT_NE(out.find("the window ends at 0.001 s, before the kept segments begin"), std::string::npos) << out;
  EXPECT_NE(out.find("nothing of it was kept"), std::string::npos) << out;
  cli("report --from 0s --to 1000s " + r.stem + ".mtide", &st);
  EXPECT_EQ(st, 0);
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

// symbolize -o OUT: a copy of the set named by OUT's base name, every segment, the names at the
// end of its latest; the set itself untouched, and a second copy to the same name refused.
TEST(KeptTrace, SymbolizeCopiesASetToASetNamedByTheOutput) {
  const Recorded& r = recorded();
  const auto before = fmt::list_segments(r.stem);
  std::vector<off_t> sizes;
  for (const fmt::SegmentPath& p : before) {
    struct stat st;
    ASSERT_EQ(::stat(p.path.c_str(), &st), 0);
    sizes.push_back(st.st_size);
  }
  const std::string out = temp_dir() + "/named.mtide";
  int st = -1;
  const std::string said = cli("symbolize --force -o " + out + " " + r.stem + ".mtide", &st);
  ASSERT_EQ(st, 0) << said;
  const auto copied = fmt::list_segments(temp_dir() + "/named");
  ASSERT_EQ(copied.size(), before.size());
  for (std::size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(copied[i].number, before[i].number);
    struct stat a, b;
    ASSERT_EQ(::stat(before[i].path.c_str(), &a), 0);
    ASSERT_EQ(::stat(copied[i].path.c_str(), &b), 0);
    EXPECT_EQ(a.st_size, sizes[i]);  // the set is as it was
    if (i + 1 < before.size()) EXPECT_EQ(b.st_size, a.st_size);
    else EXPECT_GT(b.st_size, a.st_size);  // its names
  }
  EXPECT_EQ(::access(out.c_str(), F_OK), -1);  // (no file of that name: the set is read by it)
  const std::string info = cli("info --json " + out, &st);
  EXPECT_EQ(st, 0) << info;
  EXPECT_NE(info.find("\"symbols\""), std::string::npos) << info.substr(0, 2000);
  char want[64];
  std::snprintf(want, sizeof want, "segments %04u-%04u of ", before.front().number, before.back().number);
  const std::string report = cli("report --top 5 " + copied.front().path, &st);
  EXPECT_EQ(st, 0) << report;
  EXPECT_NE(report.find(want), std::string::npos) << report;
  EXPECT_NE(report.find("write_audit_line"), std::string::npos) << report;
  const std::string again = cli("symbolize -o " + out + " " + r.stem + ".mtide", &st);
  EXPECT_EQ(st, 2) << again;
  EXPECT_NE(again.find("exist already"), std::string::npos) << again;
}

// The set's report with its range's start as the window (--from) is the whole recording's report of
// that window; without a window, the same but for the leaks, which are the whole recording's (the
// blocks allocated before the range and never freed are leaks as well).
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
  EXPECT_EQ(m->kept_from, heads.front().time);
  const std::string from = "--from " + std::to_string(heads.front().time - m->time_base) + "ns";
  auto out = [&](const std::string& args, const std::string& trace, bool full = false) {
    std::string t = run_out((full ? "MEMTIDE_FULL_REPLAY=1 " : "") + std::string(MT_CLI) + " " + args + " " + trace + " 2>/dev/null");
    for (const std::string& name : {r.stem + ".mtide", r.whole + ".mtide"})  // (the file's name is not the report's)
      for (size_t at; (at = t.find(name)) != std::string::npos;) t.replace(at, name.size(), "TRACE");
    return t;
  };
  // The markers of the removed segments are not in the set: it holds the latest ones.
  auto latest_markers = [](const nlohmann::json& ja, nlohmann::json& jb) {
    nlohmann::json kept = nlohmann::json::array();
    const size_t n = ja["markers"].size(), all = jb["markers"].size();
    ASSERT_LT(n, all);
    for (size_t i = all - n; i < all; ++i) kept.push_back(jb["markers"][i]);
    jb["markers"] = kept;
  };
  for (const std::string& args : {"report --json " + from, "report --top 8 " + from, "flamegraph -o - " + from}) {
    SCOPED_TRACE(args);
    std::string a = out(args, r.stem + ".mtide"), b = out(args, r.whole + ".mtide", true);
    EXPECT_GT(b.size(), 100u);
    if (args.find("--json") != std::string::npos) {
      nlohmann::json ja = nlohmann::json::parse(a), jb = nlohmann::json::parse(b);
      latest_markers(ja, jb);
      EXPECT_TRUE(ja["kept_range"].is_null());
      a = ja.dump(1), b = jb.dump(1);
    }
    EXPECT_EQ(a, b);
  }
  // Without a window.
  nlohmann::json ja = nlohmann::json::parse(out("report --json --top 100000", r.stem + ".mtide"));
  nlohmann::json jb = nlohmann::json::parse(out("report --json --top 100000 " + from, r.whole + ".mtide", true));
  nlohmann::json jw = nlohmann::json::parse(out("report --json --top 100000", r.whole + ".mtide"));
  EXPECT_EQ(leaks_by_stack(ja["leaks"]), leaks_by_stack(jw["leaks"]));
  EXPECT_FALSE(ja["leaks"].empty());
  EXPECT_EQ(ja["leaked_bytes"], jw["leaked_bytes"]);
  EXPECT_EQ(ja["leaked_blocks"], jw["leaked_blocks"]);
  EXPECT_EQ(ja["suppressed_leaks"], jw["suppressed_leaks"]);  // (the built-in suppressions' share of the leaks)
  EXPECT_EQ(ja["kept_range"]["from_ns"], jb["window"]["from_ns"]);
  EXPECT_EQ(ja["kept_range"]["leaked_before_bytes"].get<uint64_t>(),
            jw["leaked_bytes"].get<uint64_t>() - jb["leaked_bytes"].get<uint64_t>());
  EXPECT_GT(ja["kept_range"]["leaked_before_blocks"].get<uint64_t>(), 0u);
  ASSERT_EQ(ja["warnings"].size(), 1u);
  EXPECT_EQ(ja["warnings"][0].get<std::string>().find("the kept segments begin at "), 0u) << ja["warnings"][0];
  // The rest is the window's.
  latest_markers(ja, jb);
  for (nlohmann::json* j : {&ja, &jb}) {
    for (const char* k : {"leaks", "suppressed_leaks", "leaked_bytes", "leaked_blocks", "kept_range", "warnings"}) j->erase(k);
    (*j)["window"].erase("leaked_means");
    for (nlohmann::json& x : (*j)["top_allocators"]) x.erase("leaked_bytes");
    for (const char* d : {"mmap", "custom"})
      for (const char* k : {"leaks", "leaked_bytes", "leaked_blocks", "leaked_before_range_bytes", "leaked_before_range_blocks"})
        (*j)[d].erase(k);
  }
  EXPECT_EQ(ja.dump(1), jb.dump(1));
  EXPECT_EQ(out("flamegraph --metric leaked -o -", r.stem + ".mtide"), out("flamegraph --metric leaked -o -", r.whole + ".mtide"));
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

// A program recorded under --keep into `stem`.mtide, `meanwhile` run while it runs: its exit
// status, its stdout in `out` and its stderr in `err`.
int run_kept(const std::string& stem, const std::vector<std::string>& argv, uint64_t keep, std::string* out,
             std::string* err = nullptr, const std::function<void()>& meanwhile = {}) {
  static int runs = 0;
  const std::string o = temp_dir() + "/run" + std::to_string(++runs) + ".stdout", e = temp_dir() + "/run" + std::to_string(runs) + ".stderr";
  const pid_t pid = fork();
  if (pid == 0) {
    if (!std::freopen(o.c_str(), "w", stdout) || !std::freopen(e.c_str(), "w", stderr)) _exit(126);
    setenv("LD_PRELOAD", MT_PRELOAD, 1);
    setenv("MEMTIDE_OUTPUT", (stem + ".mtide").c_str(), 1);
    setenv("MEMTIDE_KEEP", std::to_string(keep).c_str(), 1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  if (meanwhile) meanwhile();
  const int st = wait_for(pid);
  auto slurp = [](const std::string& path) {
    std::string t;
    if (FILE* f = std::fopen(path.c_str(), "r")) {
      char buf[4096];
      for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) t.append(buf, n);
      std::fclose(f);
    }
    return t;
  };
  if (out) *out = slurp(o);
  if (err) *err = slurp(e);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// The report item of the leak whose stack has a frame in `function`, or null.
nlohmann::json leak_in(const nlohmann::json& leaks, const std::string& function) {
  for (const nlohmann::json& l : leaks)
    for (const nlohmann::json& f : l["stack"])
      if (f["function"].is_string() && f["function"].get<std::string>().find(function) != std::string::npos) return l;
  return nullptr;
}

// A program that leaks 37 blocks of 4000 bytes on one stack at its start and nothing after,
// kept to its last 1 MiB: every reader lists that leak, as the whole recording does (every
// segment linked aside as it was written), marked as allocated before the kept range.
TEST(KeptTrace, LeaksFromBeforeTheKeptRangeAreListedByStack) {
  const std::string stem = temp_dir() + "/early";
  Watch w;
  w.stem = stem;
  w.links = temp_dir() + "/early-whole";
  w.start();
  std::string out;
  const int st = run_kept(stem, {MT_EARLY_LEAK, "30"}, 1u << 20, &out);
  w.finish();
  ASSERT_EQ(st, 0) << out;
  EXPECT_EQ(out.rfind("done ", 0), 0u) << out;
  const auto segs = fmt::list_segments(stem);
  ASSERT_FALSE(segs.empty());
  ASSERT_GT(segs.front().number, 2u) << "the first segments were not removed: the program must run longer";
  const std::string kept = stem + ".mtide", whole = w.links + "/early.mtide";

  const nlohmann::json jk = cli_json("report --json --top 100000 " + kept), jw = cli_json("report --json --top 100000 " + whole);
  ASSERT_TRUE(jk.is_object() && jw.is_object());
  const nlohmann::json early = leak_in(jk["leaks"], "leak_early");
  ASSERT_TRUE(early.is_object()) << jk["leaks"].dump(1).substr(0, 3000);
  EXPECT_EQ(early["bytes"], 37 * 4000);
  EXPECT_EQ(early["count"], 37);
  EXPECT_EQ(early["before_range_bytes"], 37 * 4000);
  EXPECT_EQ(early["before_range_count"], 37);
  // (Its time: the checkpoint's record of the blocks' allocation, before the range.)
  EXPECT_LT(early["last_alloc_time_ns"].get<uint64_t>(), jk["kept_range"]["from_ns"].get<uint64_t>());
  const nlohmann::json truth = leak_in(jw["leaks"], "leak_early");
  ASSERT_TRUE(truth.is_object());
  EXPECT_EQ(truth["bytes"], 37 * 4000);
  EXPECT_EQ(truth["first_alloc_time_ns"], early["first_alloc_time_ns"]);
  EXPECT_EQ(leaks_by_stack(jk["leaks"]), leaks_by_stack(jw["leaks"]));
  EXPECT_EQ(jk["leaked_bytes"], jw["leaked_bytes"]);
  EXPECT_EQ(jk["leaked_blocks"], jw["leaked_blocks"]);
  EXPECT_GE(jk["kept_range"]["leaked_before_bytes"].get<uint64_t>(), 37u * 4000);
  // The figures of the range are its own: nothing allocated before it is in them.
  EXPECT_EQ(leak_in(jk["top_allocators"], "leak_early"), nullptr);
  EXPECT_LT(jk["total_allocated_bytes"].get<uint64_t>(), jw["total_allocated_bytes"].get<uint64_t>());

  int rc = -1;
  const std::string text = cli("report --top 100000 " + kept, &rc);
  EXPECT_EQ(rc, 0);
  // The leak's line: the numbered line before the first frame in leak_early (the LEAKS section's).
  const size_t at = text.find("leak_early");
  ASSERT_NE(at, std::string::npos) << text;
  std::string head;
  for (size_t b = 0, e; (e = text.find('\n', b)) != std::string::npos && b < at; b = e + 1) {
    const std::string l = text.substr(b, e - b);
    if (l.size() > 5 && l.find(". ") != std::string::npos && l.find(". ") < 6 && std::isdigit(static_cast<unsigned char>(l[3]))) head = l;
  }
  EXPECT_NE(head.find(" in 37 blocks, allocated "), std::string::npos) << head;
  EXPECT_NE(head.find("; 37 blocks ("), std::string::npos) << head;
  EXPECT_NE(head.find(") allocated before the kept range"), std::string::npos) << head;
  EXPECT_NE(text.find("the kept segments begin at"), std::string::npos);
  EXPECT_EQ(run_out(std::string(MT_CLI) + " flamegraph --metric leaked -o - " + kept + " 2>/dev/null"),
            run_out(std::string(MT_CLI) + " flamegraph --metric leaked -o - " + whole + " 2>/dev/null"));

  // The leak gate counts them: what the whole recording leaks, one byte over the limit fails.
  const nlohmann::json ck = cli_json("check --json " + kept), cw = cli_json("check --json " + whole);
  ASSERT_TRUE(ck.is_object() && cw.is_object());
  const uint64_t leaked = ck["leaked_bytes"].get<uint64_t>();
  EXPECT_EQ(leaked, cw["leaked_bytes"].get<uint64_t>());
  EXPECT_GE(leaked, 37u * 4000);
  const std::string failed = cli("check --max-leaked-bytes " + std::to_string(leaked - 1) + " " + kept, &rc);
  EXPECT_EQ(rc, 1) << failed;
  EXPECT_NE(failed.find("leak_early"), std::string::npos) << failed;
  cli("check --max-leaked-bytes " + std::to_string(leaked) + " " + kept, &rc);
  EXPECT_EQ(rc, 0);

  // The viewer's Leaks view.
  const analysis::AnalyzeResult a = analysis::analyze_file(kept);
  ASSERT_TRUE(a.ok()) << a.error;
  analysis::Symbolizer sym(*a.model);
  const viewer::LeaksData d = viewer::make_leaks(*a.model, sym);
  EXPECT_TRUE(d.kept_range);
  EXPECT_EQ(d.total_bytes, jk["leaked_bytes"].get<uint64_t>());
  bool found = false;
  for (const viewer::LeakRow& r : d.rows)
    if (r.stack == early["stack_id"].get<uint64_t>()) {
      found = true;
      EXPECT_EQ(r.bytes, 37u * 4000);
      EXPECT_EQ(r.before_range_blocks, 37u);
      EXPECT_EQ(viewer::leak_kind(d, r), "37 before the kept range");
    }
  EXPECT_TRUE(found);
}

// A segment that cannot be created (its directory renamed away while the program runs): the
// recording stops with one message, the program's output and exit status are its own, and
// the segments written read as a set where they are now.
TEST(KeptTrace, ASegmentThatCannotBeCreatedStopsTheRecordingOnce) {
  const std::string dir = temp_dir() + "/moving", moved = temp_dir() + "/moved";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  std::string out, err;
  const int st = run_kept(dir + "/t", {MT_WORKER, "--seconds", "5", "--threads", "2", "--rate", "20000"}, 1u << 20, &out, &err, [&] {
    for (int i = 0; i < 1000 && fmt::list_segments(dir + "/t").size() < 3; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(::rename(dir.c_str(), moved.c_str()), 0);
  });
  EXPECT_EQ(st, 0) << err;
  EXPECT_EQ(out.rfind("handled ", 0), 0u) << out;
  EXPECT_NE(out.find(" sessions cached\n"), std::string::npos) << out;
  const std::string msg = "cannot create the trace's next segment";
  const size_t first = err.find(msg);
  ASSERT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find(msg, first + 1), std::string::npos) << err;
  EXPECT_NE(err.find("recording stopped, the program goes on"), std::string::npos) << err;
  const auto segs = fmt::list_segments(moved + "/t");
  ASSERT_GE(segs.size(), 2u);
  int rc = -1;
  const std::string info = cli("info " + moved + "/t.mtide", &rc);
  EXPECT_EQ(rc, 0) << info;
  for (const fmt::SegmentPath& p : segs) {
    SCOPED_TRACE(p.path);
    const analysis::AnalyzeResult a = analysis::analyze_file(p.path);
    ASSERT_TRUE(a.ok()) << a.error;
    EXPECT_FALSE(a.model->corrupt);
    EXPECT_GT(a.model->heap().allocations, 1000u);
    const std::string report = cli("report --top 3 " + p.path, &rc);
    EXPECT_EQ(rc, 0) << report;
  }
}

// A reader following a set that falls more than its size behind is told which segments it missed.
TEST(KeptTrace, AFollowerMoreThanTheSizeBehindIsToldWhichSegmentsWereRemoved) {
  const std::string stem = temp_dir() + "/followed";
  const pid_t pid = start_worker(stem, "10", "40000");
  for (int i = 0; i < 1000 && fmt::list_segments(stem).size() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  analysis::Session s{analysis::ReplayOptions{}};
  ASSERT_EQ(s.open(stem + ".mtide"), "");
  s.advance();
  // Every segment the follower holds, and the next one, removed.
  uint32_t held = 0;
  {
    fmt::FileReader r;
    ASSERT_TRUE(r.open(stem + ".mtide").ok());
    held = r.segment_set()->segments().back().number;
  }
  bool behind = false;
  for (int i = 0; i < 3000 && !behind; ++i) {
    const auto segs = fmt::list_segments(stem);
    behind = !segs.empty() && segs.front().number > held + 2;
    if (!behind) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(behind);
  s.advance();
  const auto m = s.snapshot();
  kill(pid, SIGKILL);
  wait_for(pid);
  EXPECT_TRUE(m->corrupt);
  std::string said;
  for (const std::string& x : m->warnings)
    if (x.find("removed before they were read") != std::string::npos) said = x;
  ASSERT_NE(said, "") << testing::PrintToString(m->warnings);
  // "the segments STEM.NNNN.mtide to STEM.MMMM.mtide were removed ...": from the one after those it held.
  const size_t a = said.find(stem + "."), b = said.find(" to " + stem + ".");
  ASSERT_NE(a, std::string::npos) << said;
  ASSERT_NE(b, std::string::npos) << said;
  std::string s1, s2;
  uint32_t n1 = 0, n2 = 0;
  ASSERT_TRUE(fmt::parse_segment_name(said.substr(a, b - a), s1, n1)) << said;
  ASSERT_TRUE(fmt::parse_segment_name(said.substr(b + 4, said.find(' ', b + 4) - b - 4), s2, n2)) << said;
  EXPECT_EQ(s1, stem);
  EXPECT_GE(n1, 2u);
  EXPECT_LE(n1, held + 1);
  EXPECT_GT(n2, n1);
}

// The viewer's whole-run timeline read without a replay: the same by the set's base name and by
// any segment, a heap point per checkpoint of the kept range, over the range the replay covers.
TEST(KeptTrace, TheTimelineWithoutAReplayCoversTheKeptRange) {
  const Recorded& r = recorded();
  const auto segs = fmt::list_segments(r.stem);
  ASSERT_GE(segs.size(), 2u);
  fmt::FileReader fr;
  ASSERT_TRUE(fr.open(r.stem + ".mtide").ok());
  const auto heads = fmt::find_checkpoints(fr);
  ASSERT_GE(heads.size(), 2u);
  const analysis::AnalyzeResult a = analysis::analyze_file(r.stem + ".mtide");
  ASSERT_TRUE(a.ok());
  const uint64_t base = a.model->time_base;
  const viewer::TimelineData t = viewer::scan_timeline(r.stem + ".mtide", 4096);
  ASSERT_TRUE(t.coarse);
  EXPECT_EQ(t.duration, a.model->duration());
  ASSERT_EQ(t.heap.size(), heads.size());
  for (std::size_t i = 0; i < heads.size(); ++i) {
    EXPECT_LE(t.heap[i].time, heads[i].time - base);  // (the start of the series' bucket that holds it)
    EXPECT_LT(heads[i].time - base, t.heap[i].time + t.heap_bucket_ns);
    EXPECT_EQ(t.heap[i].last, heads[i].bytes[0]);
  }
  ASSERT_FALSE(t.rss.empty());
  // The RSS and the marks as the replay of the set has them.
  const viewer::TimelineData full = viewer::make_timeline(*a.model);
  ASSERT_FALSE(full.rss.empty());
  EXPECT_EQ(t.rss.front().time, full.rss.front().time);
  EXPECT_EQ(t.rss.back().time, full.rss.back().time);
  // (The threads' marks up to the last checkpoint: timeline_model.h.)
  std::size_t marks = 0;
  for (const viewer::MarkerLabel& k : full.markers) marks += k.time <= heads.back().time - base;
  EXPECT_EQ(t.markers.size(), marks);
  EXPECT_GE(t.markers.size(), 2u);
  for (const std::string& name : {segs.front().path, segs.back().path}) {
    SCOPED_TRACE(name);
    const viewer::TimelineData u = viewer::scan_timeline(name, 4096);
    EXPECT_EQ(u.duration, t.duration);
    EXPECT_EQ(u.heap.size(), t.heap.size());
    EXPECT_EQ(u.rss.size(), t.rss.size());
    EXPECT_EQ(u.markers.size(), t.markers.size());
    EXPECT_EQ(u.peak_bytes, t.peak_bytes);
  }
}

// A kept set holds its range from its first checkpoint: the timeline's axis (replayed or read
// from the heads) and the Growth view start there, not at the recording's start, and the
// warm-up (a tenth by default) is a tenth of what the set holds, measured from its start, for
// the views and the growth gate alike.
TEST(KeptTrace, TheTimelineAndGrowthSpanWhatTheSetHolds) {
  const Recorded& r = recorded();
  analysis::ReplayOptions o;
  o.stack_history = true;  // (as the viewer and the growth gate replay)
  const analysis::AnalyzeResult a = analysis::analyze_file(r.stem + ".mtide", o);
  ASSERT_TRUE(a.ok()) << a.error;
  const analysis::Model& m = *a.model;
  ASSERT_GT(m.kept_from, m.time_base);
  const uint64_t start = m.kept_from - m.time_base;
  const viewer::TimelineData t = viewer::make_timeline(m);
  EXPECT_EQ(t.start, start);
  EXPECT_EQ(t.span(), (viewer::TimeRange{start, m.duration()}));
  EXPECT_EQ(viewer::scan_timeline(r.stem + ".mtide", 4096).start, start);
  for (const viewer::SeriesSample& p : t.heap) EXPECT_GE(p.time + t.heap_bucket_ns, start);

  const uint64_t held = m.duration() - start;
  const analysis::Growth g = analysis::analyze_growth(m, {});
  ASSERT_TRUE(g.ok()) << g.problem;
  EXPECT_GE(g.from, m.kept_from + held / 10 - m.stack_history.width);
  EXPECT_LE(g.from, m.kept_from + held / 10 + m.stack_history.width);
  analysis::Symbolizer sym(m);
  const viewer::GrowthData d = viewer::make_growth(m, sym);
  EXPECT_EQ(d.start, start);
  EXPECT_EQ(d.warmup, held / 10);
  ASSERT_FALSE(d.times.empty());
  EXPECT_GE(d.times.front() + m.stack_history.width, start);
}

}  // namespace
}  // namespace memtide::test
