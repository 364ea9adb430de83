// The loader thread: opening, the time window, the baseline, following a file that is still
// being written, errors. Each test waits with a deadline (a hung loader fails, not blocks).
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "analysis/replay.h"
#include "synthetic_trace.h"
#include "viewer/file_browser.h"
#include "viewer/frame_stats.h"
#include "viewer/loader.h"
#include "viewer/settings.h"

namespace memtide::viewer {
namespace {

constexpr unsigned kHeap = static_cast<unsigned>(analysis::Domain::Heap);

using namespace std::chrono_literals;
namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("memtide-viewer-test-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const char* name) const { return (path / name).string(); }
};

template <class Pred>
bool wait_for(Pred&& p, std::chrono::milliseconds limit = 20s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (p()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

std::string write_standard(const TempDir& d, const char* name) {
  const std::string path = d.file(name);
  test::Synthetic s(path);
  test::standard_program(s).end(40 * test::kMs);
  return path;
}

TEST(Loader, OpensAndBuildsEveryView) {
  TempDir d;
  const std::string path = write_standard(d, "a.mtide");
  Loader l;
  l.want_tables();  // every metric
  l.open(path);
  ASSERT_TRUE(wait_for([&] { return l.idle() && l.snapshot()->view && l.snapshot()->view->complete; }));
  auto s = l.snapshot();
  EXPECT_TRUE(s->error.empty());
  EXPECT_FALSE(s->live);
  ASSERT_TRUE(s->base && s->summary && s->timeline && s->view->leaks);
  EXPECT_EQ(s->base->heap().peak_bytes, 1350u);
  EXPECT_EQ(s->view->leaks->rows.size(), 2u);
  EXPECT_TRUE(s->view->window.empty());
  for (unsigned m = 0; m < kMetricCount; ++m)
    for (unsigned dir = 0; dir < 2; ++dir) EXPECT_TRUE(s->view->flames[m][dir]) << m << " " << dir;
  EXPECT_TRUE(s->view->tables[0] && s->view->tables[1]);
  EXPECT_EQ(s->view->flame(analysis::Metric::Allocated, Direction::TopDown)->total(), 1350u);
}

TEST(Loader, BuildsCallTreesOfAMetricWhenAsked) {
  TempDir d;
  const std::string path = write_standard(d, "a.mtide");
  Loader l;
  l.open(path);
  ASSERT_TRUE(wait_for([&] { return l.idle(); }));
  auto s = l.snapshot();
  const unsigned A = static_cast<unsigned>(analysis::Metric::Allocated), P = static_cast<unsigned>(analysis::Metric::Peak);
  EXPECT_TRUE(s->view->flames[A][0] && s->view->flames[A][1]);
  EXPECT_FALSE(s->view->flames[P][0]) << "not asked for yet";
  EXPECT_FALSE(s->view->tables[0]);
  const auto allocated = s->view->flames[A][0];
  l.want_metric(analysis::Metric::Peak);
  EXPECT_FALSE(l.idle() && !l.snapshot()->view->flames[P][0]) << "a want not yet met is work to do";
  ASSERT_TRUE(wait_for([&] { return l.idle(); }));
  s = l.snapshot();
  ASSERT_TRUE(s->view->flames[P][0]);
  EXPECT_EQ(s->view->flames[P][0]->total(), 1350u);
  EXPECT_EQ(s->view->flames[A][0], allocated) << "what was built is kept";
  l.want_tables();
  ASSERT_TRUE(wait_for([&] { return l.idle(); }));
  EXPECT_TRUE(l.snapshot()->view->tables[0] && l.snapshot()->view->tables[1]);
}

TEST(Loader, BuildsTheOtherDomainsWhenAsked) {
  TempDir d;
  const std::string path = d.file("domains.mtide");
  {
    test::Synthetic s(path);
    test::program_with_domains(s).end(40 * test::kMs);
  }
  Loader l;
  l.open(path);
  ASSERT_TRUE(wait_for([&] { return l.idle(); }));
  using analysis::Domain;
  EXPECT_EQ(l.snapshot()->view->leaks_of(Domain::Mmap), nullptr) << "not asked for yet";
  EXPECT_EQ(l.snapshot()->view->leaks_of(Domain::Heap)->total_bytes, 150u) << "the heap alone";
  l.want_domain(Domain::Mmap);
  l.want_domain(Domain::Custom);
  ASSERT_TRUE(wait_for([&] { return l.idle(); }));
  auto s = l.snapshot();
  ASSERT_TRUE(s->view->complete);
  const LeaksData* mm = s->view->leaks_of(Domain::Mmap);
  ASSERT_TRUE(mm);
  ASSERT_EQ(mm->rows.size(), 1u);
  EXPECT_EQ(mm->total_bytes, 65536u);
  EXPECT_EQ(mm->rows[0].first, 33 * test::kMs);
  const LeaksData* cu = s->view->leaks_of(Domain::Custom);
  ASSERT_TRUE(cu);
  EXPECT_EQ(cu->total_bytes, 256u);
  EXPECT_EQ(cu->total_blocks, 1u);
  const FlameTree* f = s->view->flame(Domain::Mmap, analysis::Metric::Allocated, Direction::TopDown);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->total(), 65536u + 4096u);
  EXPECT_EQ(s->view->flame(Domain::Mmap, analysis::Metric::Peak, Direction::BottomUp)->total(), 65536u + 4096u);
  EXPECT_EQ(s->view->flame(Domain::Custom, analysis::Metric::Leaked, Direction::TopDown)->total(), 256u);
  EXPECT_EQ(s->view->flame(Domain::Heap, analysis::Metric::Allocated, Direction::TopDown)->total(), 1350u)
      << "mappings and pool blocks are not heap";
  // The Trees view's tables of each domain: the root's totals are the domain's.
  const auto A = static_cast<unsigned>(analysis::Metric::Allocated), L = static_cast<unsigned>(analysis::Metric::Leaked);
  for (Direction dir : {Direction::TopDown, Direction::BottomUp}) {
    const TreeTable* mt = s->view->table(Domain::Mmap, dir);
    ASSERT_TRUE(mt);
    EXPECT_EQ(mt->nodes[0].total[A], 65536u + 4096u);
    EXPECT_EQ(mt->nodes[0].total[L], 65536u);
    const TreeTable* ct = s->view->table(Domain::Custom, dir);
    ASSERT_TRUE(ct);
    EXPECT_EQ(ct->nodes[0].total[L], 256u);
  }

  const TimeRange w{34 * test::kMs, 38 * test::kMs};  // the domains follow the selection too
  l.set_window(w);
  ASSERT_TRUE(wait_for([&] { return l.idle() && l.snapshot()->view->window == w; }));
  s = l.snapshot();
  ASSERT_TRUE(s->view->leaks_of(Domain::Mmap));
  EXPECT_EQ(s->view->leaks_of(Domain::Mmap)->total_bytes, 0u) << "the mapping made in the range was unmapped";
  EXPECT_EQ(s->view->flame(Domain::Mmap, analysis::Metric::Allocated, Direction::TopDown)->total(), 4096u);
  EXPECT_EQ(s->view->flame(Domain::Custom, analysis::Metric::Allocated, Direction::TopDown)->total(), 512u);
}

TEST(Loader, MissingFileIsAnError) {
  TempDir d;
  Loader l;
  l.open(d.file("missing.mtide"));
  ASSERT_TRUE(wait_for([&] { return l.idle(); }));
  EXPECT_FALSE(l.snapshot()->error.empty());
  EXPECT_FALSE(l.snapshot()->loaded());
}

TEST(Loader, WindowRestrictsTheViewsButNotTheTimeline) {
  TempDir d;
  const std::string path = write_standard(d, "a.mtide");
  Loader l;
  l.open(path);
  ASSERT_TRUE(wait_for([&] { return l.idle(); }));
  const TimeRange w{5 * test::kMs, 15 * test::kMs};  // leaf_a's three allocations only
  l.want_metric(analysis::Metric::LiveAt);
  l.set_window(w);
  ASSERT_TRUE(wait_for([&] { return l.idle() && l.snapshot()->view->window == w; }));
  auto s = l.snapshot();
  ASSERT_TRUE(s->view->complete);
  EXPECT_EQ(s->view->model->heap().allocated_bytes, 300u);
  EXPECT_EQ(s->view->model->heap().at_bytes, 300u);  // all three live at the window's end
  EXPECT_EQ(s->view->flame(analysis::Metric::Allocated, Direction::TopDown)->total(), 300u);
  EXPECT_EQ(s->view->flame(analysis::Metric::LiveAt, Direction::TopDown)->total(), 300u);
  EXPECT_EQ(s->view->leaks->total_bytes, 300u);  // not freed by the window's end (as heaptrack_gui)
  EXPECT_EQ(s->base->heap().allocated_bytes, 1350u);  // the whole trace is kept for the timeline
  l.set_window({});
  ASSERT_TRUE(wait_for([&] { return l.idle() && l.snapshot()->view->window.empty(); }));
  EXPECT_EQ(l.snapshot()->view->model->heap().allocated_bytes, 1350u);
}

// On opening, the whole run's timeline is read without a replay: RSS, marks and the run's
// length as the replay gives them; no heap line without checkpoints.
TEST(Loader, TheTimelineIsReadAheadOfTheReplay) {
  TempDir d;
  const std::string path = write_standard(d, "a.mtide");
  const TimelineData quick = scan_timeline(path, 4096);
  analysis::AnalyzeResult r = analysis::analyze_file(path);
  ASSERT_TRUE(r.ok());
  const TimelineData full = make_timeline(*r.model);
  EXPECT_TRUE(quick.coarse);
  EXPECT_EQ(quick.duration, full.duration);
  EXPECT_EQ(quick.peak_rss, 8192u);
  ASSERT_EQ(quick.rss.size(), full.rss.size());
  for (std::size_t i = 0; i < quick.rss.size(); ++i) {
    EXPECT_EQ(quick.rss[i].time, full.rss[i].time);
    EXPECT_EQ(quick.rss[i].max, full.rss[i].max);
  }
  ASSERT_EQ(quick.markers.size(), 1u);
  EXPECT_EQ(quick.markers[0].time, full.markers[0].time);
  EXPECT_EQ(quick.markers[0].label, "phase two");
  EXPECT_TRUE(quick.heap.empty());
  EXPECT_EQ(scan_timeline(d.file("missing.mtide"), 4096).duration, 0u);
}

// A selection is replayed up to its end only: one at the start of a long file reads a small
// part of it, and its leaks are the blocks not freed by its end.
TEST(Loader, AWindowIsReadUpToItsEndOnly) {
  TempDir d;
  const std::string path = d.file("long.mtide");
  {
    test::Synthetic s(path);
    s.stack(1, 0, {0x1000});
    uint64_t t = 1000;
    // (Every record is in the process stream here: the tail a stopped window reads for the End
    // record, its last MiB, is all decoded. A recorder's events are in the threads' streams.)
    for (uint64_t i = 0; i < 1600000; ++i) {
      t += 50;
      s.malloc(t, 0x100000 + 64 * (i % 50000), 1 + (i * 2654435761u) % 4000, 1);
      if (i % 5000 == 4999) s.flush(t);  // (a watermark: the merge releases the events before it)
      if (i % 50000 == 49999)
        for (uint64_t k = 0; k < 50000; ++k) s.free(t + 1 + k, 0x100000 + 64 * k);
      if (i % 50000 == 49999) t += 50001;
    }
    s.end(t + 10);
  }
  Loader l;
  l.open(path);
  ASSERT_TRUE(wait_for([&] { return l.idle() && l.snapshot()->loaded(); }, 30s));
  const TimeRange w{0, 1 * test::kMs};  // the first 1 ms: 20,000 blocks, none freed by then
  l.set_window(w);
  ASSERT_TRUE(wait_for([&] { return l.idle() && l.snapshot()->view->window == w; }, 30s));
  auto s = l.snapshot();
  EXPECT_GT(s->view->bytes_read, 0u);
  EXPECT_LT(s->view->bytes_read, fs::file_size(path) / 2);
  EXPECT_GT(s->view->model->heap().allocations, 15000u);
  EXPECT_EQ(s->view->model->heap().leaked_blocks, s->view->model->heap().allocations);
  EXPECT_EQ(s->base->heap().leaked_blocks, 0u);
}

TEST(Loader, BaselineComparison) {
  TempDir d;
  const std::string a = write_standard(d, "a.mtide");
  const std::string b = d.file("b.mtide");
  {
    test::Synthetic s(b);
    s.stack(1, 0, {0x1000}).stack(5, 1, {0x5000});
    s.malloc(1 * test::kMs, 0x10000, 50, 5);
    s.end(5 * test::kMs);
  }
  Loader l;
  l.open(a);
  l.open_baseline(b);
  ASSERT_TRUE(wait_for([&] { return l.idle() && l.snapshot()->compare && l.snapshot()->compare->complete; }));
  auto c = l.snapshot()->compare;
  const unsigned A = static_cast<unsigned>(analysis::Metric::Allocated);
  ASSERT_TRUE(c->flames[kHeap][A][0]);
  const FlameTree& t = *c->flames[kHeap][A][0];
  EXPECT_EQ(t.before(t.nodes[0]), 50u);
  EXPECT_EQ(t.after(t.nodes[0]), 1350u);
  ASSERT_TRUE(c->sites[kHeap][A]);
  EXPECT_EQ(c->sites[kHeap][A]->size(), 3u);
  l.close_baseline();
  ASSERT_TRUE(wait_for([&] { return l.idle() && !l.snapshot()->compare; }));
}

TEST(Loader, BaselineComparisonFollowsTheSelection) {
  TempDir d;
  const std::string a = write_standard(d, "a.mtide");
  const std::string b = d.file("b.mtide");
  {
    test::Synthetic s(b);  // init at 1 ms, leaf_a at 2 ms and 11 ms
    s.stack(1, 0, {0x1000}).stack(2, 1, {0x2000}).stack(3, 2, {0x3000}).stack(5, 1, {0x5000});
    s.malloc(1 * test::kMs, 0x10000, 50, 5).malloc(2 * test::kMs, 0x20000, 100, 3).malloc(11 * test::kMs, 0x20100, 100, 3);
    s.end(20 * test::kMs);
  }
  Loader l;
  l.open(a);
  l.open_baseline(b);
  ASSERT_TRUE(wait_for([&] { return l.idle() && l.snapshot()->compare && l.snapshot()->compare->complete; }));
  const unsigned A = static_cast<unsigned>(analysis::Metric::Allocated);
  EXPECT_EQ(l.snapshot()->compare->flames[kHeap][A][0]->before(l.snapshot()->compare->flames[kHeap][A][0]->nodes[0]), 250u);

  const TimeRange w{5 * test::kMs, 15 * test::kMs};
  l.set_window(w);
  ASSERT_TRUE(wait_for([&] {
    auto s = l.snapshot();
    return l.idle() && s->view->window == w && s->compare && s->compare->complete && s->compare->window == w;
  }));
  auto c = l.snapshot()->compare;
  ASSERT_TRUE(c->flames[kHeap][A][0]);
  const FlameTree& t = *c->flames[kHeap][A][0];
  EXPECT_EQ(t.before(t.nodes[0]), 100u) << "the baseline's allocations in 5 ms .. 15 ms";
  EXPECT_EQ(t.after(t.nodes[0]), 300u) << "this trace's allocations in 5 ms .. 15 ms";
  EXPECT_EQ(c->model->heap().allocated_bytes, 100u);
  EXPECT_EQ(c->after->heap().allocated_bytes, 300u);

  l.set_window({});  // back to the whole traces
  ASSERT_TRUE(wait_for([&] {
    auto s = l.snapshot();
    return l.idle() && s->view->window.empty() && s->compare && s->compare->complete && s->compare->window.empty();
  }));
  const FlameTree& whole = *l.snapshot()->compare->flames[kHeap][A][0];
  EXPECT_EQ(whole.before(whole.nodes[0]), 250u);
  EXPECT_EQ(whole.after(whole.nodes[0]), 1350u);
}

TEST(Loader, BaselineComparisonOfTheOtherDomains) {
  TempDir d;
  const std::string a = d.file("a.mtide"), b = d.file("b.mtide");
  {
    test::Synthetic s(a);
    test::program_with_domains(s).end(40 * test::kMs);  // maps 64 KiB + 4 KiB from stack 6
  }
  {
    test::Synthetic s(b);
    test::standard_program(s);
    s.stack(6, 1, {0x6000}).alloc(33 * test::kMs, fmt::Api::Mmap, 0x7f0000000000, 8192, 6);
    s.end(40 * test::kMs);
  }
  Loader l;
  l.open(a);
  l.open_baseline(b);
  ASSERT_TRUE(wait_for([&] { return l.idle() && l.snapshot()->compare && l.snapshot()->compare->complete; }));
  const unsigned A = static_cast<unsigned>(analysis::Metric::Allocated);
  const unsigned M = static_cast<unsigned>(analysis::Domain::Mmap);
  EXPECT_FALSE(l.snapshot()->compare->flames[M][A][0]) << "the mappings are compared once a view selects them";
  l.want_domain(analysis::Domain::Mmap);
  ASSERT_TRUE(wait_for([&] {
    auto s = l.snapshot();
    return l.idle() && s->compare && s->compare->complete && s->compare->flames[M][A][0];
  }));
  auto c = l.snapshot()->compare;
  const FlameTree& t = *c->flames[M][A][0];
  EXPECT_EQ(t.before(t.nodes[0]), 8192u);
  EXPECT_EQ(t.after(t.nodes[0]), 65536u + 4096u);
  ASSERT_TRUE(c->sites[M][A]);
  ASSERT_EQ(c->sites[M][A]->size(), 1u) << "one mapping site: map_arena";
  EXPECT_EQ((*c->sites[M][A])[0].delta(), 65536 + 4096 - 8192);
  EXPECT_EQ(c->flames[kHeap][A][0]->after(c->flames[kHeap][A][0]->nodes[0]), 1350u) << "the heap's stays the heap's";
}

TEST(Loader, FollowsAFileStillBeingWritten) {
  TempDir d;
  const std::string path = d.file("live.mtide");
  test::Synthetic s(path, /*lock=*/true);  // holds flock like a running recorder
  s.stack(1, 0, {0x1000});
  // A live view shows what the watermarks release (docs/FORMAT.md section 8): after watermark
  // k+1, everything timed before watermark k. Two in a row release everything before them.
  s.malloc(1 * test::kMs, 0x1000, 10, 1).flush(2 * test::kMs).flush(2 * test::kMs);
  Loader::Options o;
  o.live_interval = 50ms;
  Loader l(o);
  l.open(path);
  ASSERT_TRUE(wait_for([&] { return l.snapshot()->loaded(); }));
  EXPECT_TRUE(l.snapshot()->live);
  EXPECT_EQ(l.snapshot()->base->heap().allocated_bytes, 10u);
  const uint64_t first_refreshes = l.snapshot()->refreshes;

  s.malloc(3 * test::kMs, 0x2000, 20, 1).flush(4 * test::kMs).flush(4 * test::kMs);
  ASSERT_TRUE(wait_for([&] { return l.snapshot()->base->heap().allocated_bytes == 30u; }, 5s))
      << "a live file must be re-read within a second";
  EXPECT_GT(l.snapshot()->refreshes, first_refreshes);
  EXPECT_TRUE(l.snapshot()->live);

  l.set_paused(true);
  std::this_thread::sleep_for(100ms);  // a refresh already running may still land
  const uint64_t paused_at = l.snapshot()->base->heap().allocated_bytes;
  s.malloc(5 * test::kMs, 0x3000, 40, 1).flush(6 * test::kMs);
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(l.snapshot()->base->heap().allocated_bytes, paused_at) << "paused: no refresh";
  l.set_paused(false);

  s.end(7 * test::kMs);  // the writer closes: one last refresh, then no longer live
  ASSERT_TRUE(wait_for([&] { return !l.snapshot()->live && l.snapshot()->base->complete; }, 5s));
  EXPECT_EQ(l.snapshot()->base->heap().allocated_bytes, 70u);
}

// 30,000 mallocs of stack 1 with sizes and steps that LZ4 cannot squeeze to nothing, then two
// watermarks; returns the time of the last and the bytes allocated at `from` or later.
uint64_t write_growing(test::Synthetic& s, uint64_t from, uint64_t& bytes_from) {
  s.stack(1, 0, {0x1000});
  uint64_t t = 1000;
  bytes_from = 0;
  for (uint64_t i = 0; i < 30000; ++i) {
    const uint64_t size = 1 + (i * 7919) % 997;
    t += 1 + (i * 104729) % 89;
    s.malloc(t, 0x100000 + 1024 * i, size, 1);
    if (t >= from) bytes_from += size;
  }
  s.flush(t + 1).flush(t + 1);
  return t;
}

TEST(Loader, LiveRefreshReadsOnlyWhatWasAppended) {
  TempDir d;
  const std::string path = d.file("growing.mtide");
  test::Synthetic s(path, /*lock=*/true);
  uint64_t total = 0;
  uint64_t t = write_growing(s, 0, total);
  Loader::Options o;
  o.live_interval = 50ms;
  Loader l(o);
  l.open(path);
  ASSERT_TRUE(wait_for([&] { return l.snapshot()->loaded() && l.snapshot()->base->heap().allocated_bytes == total; }))
      << l.snapshot()->base->heap().allocated_bytes << " of " << total << ", events " << l.snapshot()->base->events;
  EXPECT_TRUE(l.snapshot()->live);
  const uint64_t size = fs::file_size(path);

  t += 2;
  s.malloc(t, 0x10, 100, 1).flush(t + 1).flush(t + 1);
  ASSERT_TRUE(wait_for([&] { return l.snapshot()->base->heap().allocated_bytes == total + 100; }, 5s));
  EXPECT_GT(l.snapshot()->refresh_bytes, 0u);
  EXPECT_LT(l.snapshot()->refresh_bytes, size / 20) << "a refresh reads the new blocks, not the file";
  EXPECT_EQ(l.snapshot()->base->heap().leaked_bytes, total + 100);

  s.free(t + 2, 0x10);
  s.end(t + 3);  // the writer closes: the last refresh ends the replay
  ASSERT_TRUE(wait_for([&] { return !l.snapshot()->live && l.snapshot()->base->complete; }, 5s));
  EXPECT_EQ(l.snapshot()->base->heap().leaked_bytes, total);
  EXPECT_EQ(l.snapshot()->base->heap().frees, 1u);
}

TEST(Loader, ReadsAgainAFileReplacedOrCutShortWhileFollowed) {
  TempDir d;
  const std::string path = d.file("live.mtide");
  test::Synthetic first(path, /*lock=*/true);
  first.stack(1, 0, {0x1000});
  first.malloc(1 * test::kMs, 0x1000, 10, 1).flush(2 * test::kMs).flush(2 * test::kMs);
  Loader::Options o;
  o.live_interval = 50ms;
  Loader l(o);
  l.open(path);
  ASSERT_TRUE(wait_for([&] { return l.snapshot()->loaded() && l.snapshot()->base->heap().allocated_bytes == 10u; }));
  EXPECT_TRUE(l.snapshot()->live);
  auto replaced_warning = [&] {
    for (const std::string& w : l.snapshot()->base->warnings)
      if (w.find("replaced") != std::string::npos) return true;
    return false;
  };
  EXPECT_FALSE(replaced_warning());

  // A new recording takes the path (as `memtide run -o` does: the old file is removed first).
  const std::string next = d.file("next.mtide");
  test::Synthetic second(next, /*lock=*/true);
  second.stack(1, 0, {0x2000});
  second.malloc(1 * test::kMs, 0x5000, 77, 1).flush(2 * test::kMs).flush(2 * test::kMs);
  fs::rename(next, path);
  ASSERT_TRUE(wait_for([&] { return l.snapshot()->loaded() && l.snapshot()->base->heap().allocated_bytes == 77u; }, 5s))
      << "still showing " << l.snapshot()->base->heap().allocated_bytes << " bytes of the replaced recording";
  EXPECT_TRUE(replaced_warning());
  EXPECT_TRUE(l.snapshot()->live);

  // The new recording goes on and is followed from where the second read stopped.
  second.malloc(3 * test::kMs, 0x6000, 23, 1).flush(4 * test::kMs).flush(4 * test::kMs);
  ASSERT_TRUE(wait_for([&] { return l.snapshot()->base->heap().allocated_bytes == 100u; }, 5s));

  // Cut short: only the file header is left. Nothing that was read is in the file any more.
  fs::resize_file(path, 32);
  ASSERT_TRUE(wait_for([&] { return l.snapshot()->loaded() && l.snapshot()->base->heap().allocations == 0u; }, 5s))
      << l.snapshot()->base->heap().allocations << " allocations still shown";
}

TEST(Loader, LiveRefreshWithASelectionReadsOnlyWhatWasAppended) {
  TempDir d;
  const std::string path = d.file("growing.mtide");
  test::Synthetic s(path, /*lock=*/true);
  const uint64_t from = 500000;  // the selection: from here to well past the end
  uint64_t in_range = 0;
  uint64_t t = write_growing(s, from, in_range);
  Loader::Options o;
  o.live_interval = 50ms;
  Loader l(o);
  l.open(path);
  ASSERT_TRUE(wait_for([&] { return l.snapshot()->loaded() && l.snapshot()->live; }));
  const TimeRange w{from, 10 * test::kMs};
  l.set_window(w);
  auto window_bytes = [&] {
    auto v = l.snapshot()->view;
    return v && v->window == w ? v->model->heap().allocated_bytes : UINT64_MAX;
  };
  ASSERT_TRUE(wait_for([&] { return window_bytes() == in_range; })) << window_bytes() << " of " << in_range;
  const uint64_t size = fs::file_size(path);

  t += 2;
  s.malloc(t, 0x10, 100, 1).flush(t + 1).flush(t + 1);
  ASSERT_TRUE(wait_for([&] { return window_bytes() == in_range + 100; }, 5s)) << window_bytes();
  EXPECT_GT(l.snapshot()->refresh_bytes, 0u);
  EXPECT_LT(l.snapshot()->refresh_bytes, size / 10)
      << "a refresh with a selection reads the new blocks for both replays, not the file";

  s.end(t + 3);  // the writer closes: the last refresh ends both replays
  ASSERT_TRUE(wait_for([&] { return !l.snapshot()->live && l.snapshot()->base->complete; }, 5s));
  EXPECT_EQ(window_bytes(), in_range + 100);
  EXPECT_EQ(l.snapshot()->view->model->heap().leaked_bytes, in_range + 100);
}

TEST(Settings, RecentListDedupesAndCaps) {
  std::vector<std::string> r;
  add_recent(r, "/a/x.mtide");
  add_recent(r, "/a/y.mtide");
  add_recent(r, "/a/x.mtide");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0], "/a/x.mtide");
  for (int i = 0; i < 40; ++i) add_recent(r, "/t/" + std::to_string(i));
  EXPECT_EQ(r.size(), kMaxRecent);
  EXPECT_EQ(r[0], "/t/39");
}

TEST(Settings, SaveAndLoadRoundTrip) {
  TempDir d;
  Settings s;
  s.scale = 1.5f;
  s.dark = false;
  s.recent = {"/x/a.mtide", "/x/b.mtide"};
  const std::string dir = d.file("conf/memtide");
  ASSERT_TRUE(save_settings(dir, s));
  const Settings back = load_settings(dir);
  EXPECT_FLOAT_EQ(back.scale, 1.5f);
  EXPECT_FALSE(back.dark);
  EXPECT_EQ(back.recent, s.recent);
  EXPECT_TRUE(load_settings(d.file("nowhere")).recent.empty());
}

TEST(Settings, ConfigDirFollowsXdg) {
  const char* old = std::getenv("XDG_CONFIG_HOME");
  const std::string saved = old ? old : "";
  ::setenv("XDG_CONFIG_HOME", "/tmp/xdg-test", 1);
  EXPECT_EQ(config_dir(), "/tmp/xdg-test/memtide");
  if (old)
    ::setenv("XDG_CONFIG_HOME", saved.c_str(), 1);
  else
    ::unsetenv("XDG_CONFIG_HOME");
}

TEST(FrameStats, Percentiles) {
  FrameRing r(8);
  EXPECT_EQ(r.percentile(50), 0);
  for (int i = 1; i <= 10; ++i) r.add(i);  // the ring keeps 3..10
  EXPECT_EQ(r.size(), 8u);
  EXPECT_EQ(r.total(), 10u);
  EXPECT_EQ(r.percentile(50), 6);
  EXPECT_EQ(r.percentile(100), 10);
  EXPECT_EQ(r.percentile(0), 3);
  EXPECT_EQ(r.max(), 10);
}

}  // namespace
}  // namespace memtide::viewer

namespace memtide::viewer {
namespace {

TEST(FileBrowser, ListsDirectoriesFirstAndMarksTraces) {
  TempDir d;
  fs::create_directories(d.path / "sub");
  std::ofstream(d.path / "b.mtide") << "x";
  std::ofstream(d.path / "a.txt") << "y";
  std::ofstream(d.path / ".hidden") << "z";
  std::string error;
  const auto v = list_directory(d.path.string(), false, error);
  EXPECT_TRUE(error.empty());
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].name, "sub");
  EXPECT_TRUE(v[0].is_dir);
  EXPECT_EQ(v[1].name, "a.txt");
  EXPECT_FALSE(v[1].is_trace);
  EXPECT_EQ(v[2].name, "b.mtide");
  EXPECT_TRUE(v[2].is_trace);
  EXPECT_EQ(v[2].size, 1u);
  EXPECT_EQ(list_directory(d.path.string(), true, error).size(), 4u);
  list_directory((d.path / "missing").string(), false, error);
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace memtide::viewer
