// EventMerger: global time order across interleaved streams, watermark-bounded buffering,
// untimed records first, SampleWeight kept with its Alloc.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <regex>

#include "formats/merge.h"
#include "formats/writer.h"
#include "tests/formats/test_util.h"

namespace memtide {
namespace {

using namespace fmt;

struct Merged {
  ReadResult result;
  std::vector<std::string> lines;
  MergeStats stats;
};

Merged merge(const std::vector<uint8_t>& file, MergeOptions opt = {}) {
  Merged m;
  FileReader r;
  EXPECT_TRUE(r.open_memory(file).ok());
  EventMerger merger(opt);
  test::LogVisitor v;
  m.result = read_merged(r, merger, v);
  m.lines = std::move(v.lines);
  m.stats = merger.stats();
  return m;
}

// The same with every block of a thread's stream queued undecoded (add_pending), as the
// report's reader does in a file with block hints; the other blocks decoded at once.
Merged merge_pending(const std::vector<uint8_t>& file, std::vector<ReadResult>* errors = nullptr) {
  Merged m;
  FileReader r;
  EXPECT_TRUE(r.open_memory(file).ok());
  EventMerger merger;
  test::LogVisitor v;
  Block b;
  for (;;) {
    m.result = r.next(b);
    if (!m.result.ok()) break;
    if (b.header.stream != 0) {
      merger.add_pending(b, v);
    } else {
      m.result = merger.add_block(b, v);
      if (!m.result.ok()) break;
    }
  }
  merger.finish(v);
  if (errors) *errors = merger.take_errors();
  m.lines = std::move(v.lines);
  m.stats = merger.stats();
  return m;
}

// A file of one block of stream 1: an Alloc (of `alloc_size` bytes), then a Marker whose
// length runs past the block's end.
std::vector<uint8_t> file_with_a_bad_record(std::size_t& alloc_size) {
  std::vector<uint8_t> raw;
  uint8_t rec[kMaxAllocRecord];
  raw.insert(raw.end(), rec, encode_alloc(rec, Api::Malloc, 5, 0x100, 8, 1));
  alloc_size = raw.size();
  raw.push_back(tag_of(RecordType::Marker));
  raw.push_back(50);  // length past the end
  std::vector<uint8_t> file(kFileHeaderSize);
  encode_file_header(file.data(), 0);
  BlockHeader h;
  h.stream = 1;
  std::vector<uint8_t> blk(block_bound(raw.size()));
  blk.resize(encode_block(h, raw.data(), raw.size(), blk.data(), blk.size()));
  file.insert(file.end(), blk.begin(), blk.end());
  return file;
}

// Stream 2 defines stack 7 and uses it at t=50; stream 1 allocates at t=20 from a later block
// and, with `used_by_1`, uses stack 7 at t=60.
std::vector<uint8_t> stack_defined_by_stream_2(bool used_by_1) {
  std::vector<uint8_t> file;
  TraceWriter w;
  w.open_memory(file);
  const uint64_t ips[] = {0x400000, 0x400100};
  w.append(2, StackDef{6, 0, 2, ips});
  w.append(2, Alloc{50, 0x100, 8, 7, 0, Api::Malloc});
  w.flush(2);
  w.append(1, Alloc{20, 0x200, 8, 1, 0, Api::Malloc});  // earlier time, later block
  if (used_by_1) w.append(1, Alloc{60, 0x300, 8, 7, 0, Api::Malloc});
  w.close();
  return file;
}

// Time of a timed line, or -1 for untimed ones.
int64_t time_of(const std::string& line) {
  static const std::regex re(" time=(\\d+)");
  std::smatch m;
  return std::regex_search(line, m, re) ? std::stoll(m[1]) : -1;
}

std::vector<std::string> timed_only(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const auto& l : lines)
    if (time_of(l) >= 0) out.push_back(l);
  return out;
}

std::size_t index_of(const std::vector<std::string>& lines, const std::string& prefix) {
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (lines[i].rfind(prefix, 0) == 0) return i;
  return lines.size();
}

// A multi-threaded-looking trace: `streams` threads, each with increasing times; every
// `wm_every` ns of simulated time, all pending blocks are flushed in a random stream order and
// a watermark follows. Blocks are also flushed early at random to interleave them.
std::vector<uint8_t> interleaved_trace(unsigned streams, unsigned events, uint64_t wm_every, uint32_t seed) {
  std::vector<uint8_t> file;
  TraceWriter w;
  TraceWriter::Options o;
  o.block_bytes = 1 << 20;  // flushed by hand below
  w.open_memory(file, o);
  std::mt19937 rng(seed);
  std::vector<uint64_t> clock(streams + 1, 0);
  uint64_t now = 0, next_wm = wm_every;
  for (unsigned i = 0; i < events; ++i) {
    now += rng() % 50;
    const uint32_t s = 1 + rng() % streams;
    clock[s] = std::max(clock[s], now);
    // Equal times across streams happen: ties must keep file order.
    const uint64_t t = clock[s];
    if (rng() % 2)
      w.append(s, Alloc{t, 0x10000 + (rng() % 64) * 16, 1 + rng() % 100, rng() % 4, 0, Api::Malloc});
    else
      w.append(s, Free{t, 0x10000 + (rng() % 64) * 16, 0, Api::Free});
    if (rng() % 16 == 0) w.flush(s);
    if (now >= next_wm) {
      std::vector<uint32_t> order(streams);
      for (unsigned k = 0; k < streams; ++k) order[k] = k + 1;
      std::shuffle(order.begin(), order.end(), rng);
      for (uint32_t k : order) w.flush(k);
      w.watermark(now + 1);
      next_wm = now + wm_every;
    }
  }
  w.end(End{now + 10, EndReason::Exit, 0, 0, 0, 0});
  w.close();
  return file;
}

// Finely interleaved streams with equal times across them: the merger's two-stream loop
// (two_way) and its heap of heads both run, with two streams (no third to bound them) and more.
TEST(Merge, InterleavedStreamsComeOutInStableTimeOrder) {
  for (unsigned streams : {2u, 3u, 4u}) {
    for (uint32_t seed = 1; seed <= 5; ++seed) {
      SCOPED_TRACE("streams " + std::to_string(streams) + ", seed " + std::to_string(seed));
      const auto file = interleaved_trace(streams, 5000, 2000, seed);
      std::vector<std::string> file_order;
      ASSERT_TRUE(test::decode_all(file, file_order).end_of_file());
      auto expected = timed_only(file_order);
      std::stable_sort(expected.begin(), expected.end(),
                       [](const std::string& a, const std::string& b) { return time_of(a) < time_of(b); });
      const Merged m = merge(file);
      EXPECT_TRUE(m.result.end_of_file());
      EXPECT_NE(timed_only(file_order), expected) << "the trace should need merging";
      EXPECT_EQ(m.lines, expected) << "seed " << seed;
      EXPECT_EQ(m.stats.out_of_order, 0u);
      EXPECT_EQ(m.stats.forced_releases, 0u);
    }
  }
}

// Blocks queued undecoded come out in the same order as decoded ones, and the window holds
// their wire bytes instead of 32 bytes per event.
TEST(Merge, PendingBlocksComeOutLikeDecodedOnes) {
  for (unsigned streams : {1u, 2u, 4u}) {
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      SCOPED_TRACE("streams " + std::to_string(streams) + ", seed " + std::to_string(seed));
      const auto file = interleaved_trace(streams, 40000, 200000, seed);  // windows of ~8000 events
      const Merged eager = merge(file);
      const Merged pending = merge_pending(file);
      EXPECT_TRUE(pending.result.end_of_file());
      EXPECT_EQ(pending.lines, eager.lines);
      EXPECT_EQ(pending.stats.released, eager.stats.released);
      EXPECT_EQ(pending.stats.out_of_order, 0u);
      EXPECT_LT(pending.stats.peak_buffered_bytes * 3, eager.stats.peak_buffered_bytes);
    }
  }
}

// A bad record in a pending block shows when the block is decoded: the records before it are
// delivered, the error is kept for take_errors().
TEST(Merge, APendingBlocksErrorIsKeptForTakeErrors) {
  std::size_t alloc_size = 0;
  const std::vector<uint8_t> file = file_with_a_bad_record(alloc_size);
  std::vector<ReadResult> errors;
  const Merged m = merge_pending(file, &errors);
  EXPECT_TRUE(m.result.end_of_file());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].status, ReadStatus::Corrupt);
  EXPECT_EQ(errors[0].position, alloc_size);
  ASSERT_EQ(m.lines.size(), 1u);
  EXPECT_EQ(m.lines[0], "alloc s=1 time=5 addr=256 size=8 stack=1 weight=0 api=malloc");
}

// An untimed record found in a pending block still reaches the consumer, before the block's
// events.
TEST(Merge, APendingBlocksUntimedRecordsStillArrive) {
  const Merged m = merge_pending(stack_defined_by_stream_2(false));
  const std::size_t def = index_of(m.lines, "stack s=2");
  ASSERT_LT(def, m.lines.size());
  EXPECT_LT(def, index_of(m.lines, "alloc s=2 time=50"));
  EXPECT_LT(index_of(m.lines, "alloc s=1 time=20"), index_of(m.lines, "alloc s=2 time=50"));
  EXPECT_EQ(m.lines.size(), 3u);
}

TEST(Merge, FreeBeforeReallocationByAnotherThread) {
  // Thread 1 frees 0x5000 at t=10, thread 2 gets the same address at t=11. Thread 2's block
  // reaches the file first: file order has the alloc before the free.
  std::vector<uint8_t> file;
  TraceWriter w;
  w.open_memory(file);
  w.append(1, Alloc{5, 0x5000, 64, 1, 0, Api::Malloc});
  w.watermark(6);
  w.append(2, Alloc{11, 0x5000, 32, 2, 0, Api::Malloc});
  w.flush(2);
  w.append(1, Free{10, 0x5000, 0, Api::Free});
  w.flush(1);
  w.watermark(20);
  w.append(2, Free{30, 0x5000, 0, Api::Free});
  w.watermark(40);
  w.close();

  std::vector<std::string> file_order;
  test::decode_all(file, file_order);
  ASSERT_LT(index_of(file_order, "alloc s=2 time=11"), index_of(file_order, "free s=1 time=10"));

  const Merged m = merge(file);
  const std::vector<std::string> expected = {
      "alloc s=1 time=5 addr=20480 size=64 stack=1 weight=0 api=malloc",
      "watermark s=0 time=6",
      "free s=1 time=10 addr=20480 length=0 api=free",
      "alloc s=2 time=11 addr=20480 size=32 stack=2 weight=0 api=malloc",
      "watermark s=0 time=20",
      "free s=2 time=30 addr=20480 length=0 api=free",
      "watermark s=0 time=40",
  };
  EXPECT_EQ(m.lines, expected);
}

TEST(Merge, TiesKeepFileOrder) {
  std::vector<uint8_t> file;
  TraceWriter w;
  w.open_memory(file);
  w.append(3, Alloc{7, 0x30, 1, 0, 0, Api::Malloc});
  w.flush(3);
  w.append(1, Alloc{7, 0x10, 1, 0, 0, Api::Malloc});
  w.flush(1);
  w.append(2, Alloc{7, 0x20, 1, 0, 0, Api::Malloc});
  w.close();
  const Merged m = merge(file);
  ASSERT_EQ(m.lines.size(), 3u);
  EXPECT_EQ(m.lines[0].substr(0, 9), "alloc s=3");
  EXPECT_EQ(m.lines[1].substr(0, 9), "alloc s=1");
  EXPECT_EQ(m.lines[2].substr(0, 9), "alloc s=2");
}

TEST(Merge, StackDefReachesConsumerBeforeAllocsUsingIt) {
  const Merged m = merge(stack_defined_by_stream_2(true));
  const std::size_t def = index_of(m.lines, "stack s=2");
  ASSERT_LT(def, m.lines.size());
  EXPECT_LT(def, index_of(m.lines, "alloc s=2 time=50"));
  EXPECT_LT(def, index_of(m.lines, "alloc s=1 time=60"));
  EXPECT_LT(index_of(m.lines, "alloc s=1 time=20"), index_of(m.lines, "alloc s=2 time=50"));
}

TEST(Merge, SampleWeightTravelsWithItsAlloc) {
  std::vector<uint8_t> file;
  TraceWriter w;
  w.open_memory(file);
  w.append(1, Alloc{30, 0x100, 8, 1, 4096, Api::Malloc});
  w.flush(1);
  w.append(2, Alloc{10, 0x200, 8, 1, 0, Api::Malloc});
  w.append(2, Alloc{40, 0x300, 8, 1, 512, Api::Malloc});
  w.close();
  const Merged m = merge(file);
  const std::vector<std::string> expected = {
      "alloc s=2 time=10 addr=512 size=8 stack=1 weight=0 api=malloc",
      "sample_weight s=1 weight=4096",
      "alloc s=1 time=30 addr=256 size=8 stack=1 weight=4096 api=malloc",
      "sample_weight s=2 weight=512",
      "alloc s=2 time=40 addr=768 size=8 stack=1 weight=512 api=malloc",
  };
  EXPECT_EQ(m.lines, expected);
}

TEST(Merge, SampleWeightsThatApplyToNothingStillArrive) {
  std::vector<uint8_t> file;
  TraceWriter w;
  w.open_memory(file);
  w.append(1, SampleWeight{1});  // overridden by the next one
  w.append(1, SampleWeight{0});  // an explicit zero weight still applies
  w.append(1, Alloc{10, 0x100, 8, 1, 0, Api::Malloc});
  w.append(1, SampleWeight{3});  // last in its block
  w.close();
  std::vector<std::string> file_order;
  test::decode_all(file, file_order);
  const Merged m = merge(file);
  auto a = file_order, b = m.lines;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
  const std::size_t alloc = index_of(m.lines, "alloc s=1");
  ASSERT_GT(alloc, 0u);
  EXPECT_EQ(m.lines[alloc - 1], "sample_weight s=1 weight=0");
  EXPECT_EQ(m.lines[alloc], "alloc s=1 time=10 addr=256 size=8 stack=1 weight=0 api=malloc");
}

TEST(Merge, LateRecordsAreCountedNotFatal) {
  // A writer that breaks the watermark promise: stream 2's record at t=10 arrives after the
  // merger has already released t=50. It is still delivered, and counted.
  std::vector<uint8_t> file;
  TraceWriter w;
  w.open_memory(file);
  w.append(1, Alloc{50, 0x100, 8, 1, 0, Api::Malloc});
  w.watermark(100);
  w.watermark(200);
  w.append(2, Alloc{10, 0x200, 8, 1, 0, Api::Malloc});
  w.watermark(300);
  w.close();
  const Merged m = merge(file);
  EXPECT_TRUE(m.result.end_of_file());
  EXPECT_EQ(m.stats.out_of_order, 1u);
  EXPECT_EQ(m.lines.size(), 5u);
  EXPECT_EQ(index_of(m.lines, "alloc s=1 time=50"), 0u);
}

// Counts deliveries, to see that records come out before the end of the file.
struct CountingVisitor : NullVisitor {
  uint64_t allocs = 0, frees = 0;
  void on_alloc(uint32_t, const Alloc&) { ++allocs; }
  void on_free(uint32_t, const Free&) { ++frees; }
};

TEST(Merge, WatermarksBoundTheBuffer) {
  const auto file = interleaved_trace(4, 200000, 5000, 42);
  FileReader r;
  ASSERT_TRUE(r.open_memory(file).ok());
  EventMerger m;
  CountingVisitor v;
  Block b;
  uint64_t delivered_before_end = 0;
  while (r.next(b).ok()) {
    ASSERT_TRUE(m.add_block(b, v).ok());
    delivered_before_end = v.allocs + v.frees;
  }
  m.finish(v);
  EXPECT_EQ(v.allocs + v.frees, 200000u);
  EXPECT_GT(delivered_before_end, 190000u);
  // The window between watermarks holds a few hundred events: a few KiB, not the trace.
  EXPECT_LT(m.stats().peak_buffered_bytes, file.size() / 20);
  EXPECT_EQ(m.buffered_bytes(), 0u);
}

// A watermark vouches for the records before the *previous* one; in a file whose watermarks
// are exact (kFileFlagExactWatermarks) for those before itself, at once. Same order either way.
TEST(Merge, ExactWatermarksReleaseWhatTheyVouchForAtOnce) {
  std::vector<uint8_t> file;
  TraceWriter w;
  w.open_memory(file);
  for (uint64_t t = 1; t <= 10; ++t) w.append(1 + t % 2, Alloc{t, 0x100 + t, 8, 1, 0, Api::Malloc});
  w.flush(1);
  w.flush(2);
  w.watermark(11);
  for (uint64_t t = 12; t <= 20; ++t) w.append(1 + t % 2, Alloc{t, 0x100 + t, 8, 1, 0, Api::Malloc});
  w.flush(1);
  w.flush(2);
  w.watermark(21);
  w.close();
  for (const bool exact : {false, true}) {
    FileReader r;
    ASSERT_TRUE(r.open_memory(file).ok());
    MergeOptions o;
    o.exact_watermarks = exact;
    EventMerger m(o);
    test::LogVisitor v;
    std::vector<std::size_t> after_block;  // timed records delivered after each block
    Block b;
    while (r.next(b).ok()) {
      ASSERT_TRUE(m.add_block(b, v).ok());
      after_block.push_back(timed_only(v.lines).size());
    }
    ASSERT_EQ(after_block.size(), 6u);  // two event blocks and a watermark, twice
    // The first watermark: all 10 at once when exact, none before the second otherwise.
    EXPECT_EQ(after_block[2], exact ? 10u : 0u) << exact;
    // The second: everything before 21 (19 allocations and the first watermark, a timed record
    // too) when exact; what was before 11 otherwise.
    EXPECT_EQ(after_block[5], exact ? 20u : 10u) << exact;
    m.finish(v);
    const auto timed = timed_only(v.lines);
    EXPECT_EQ(timed.size(), 21u);
    EXPECT_TRUE(std::is_sorted(timed.begin(), timed.end(),
                               [](const std::string& a, const std::string& b) { return time_of(a) < time_of(b); }));
    EXPECT_EQ(m.stats().out_of_order, 0u);
  }
}

TEST(Merge, WithoutWatermarksEverythingWaitsForFinish) {
  std::vector<uint8_t> file;
  TraceWriter w;
  w.open_memory(file);
  for (uint64_t t = 0; t < 100; ++t) w.append(1 + t % 2, Alloc{t, 0x100 + t, 8, 1, 0, Api::Malloc});
  w.close();
  FileReader r;
  ASSERT_TRUE(r.open_memory(file).ok());
  EventMerger m;
  CountingVisitor v;
  Block b;
  while (r.next(b).ok()) m.add_block(b, v);
  EXPECT_EQ(v.allocs, 0u);
  m.finish(v);
  EXPECT_EQ(v.allocs, 100u);
}

TEST(Merge, BufferLimitForcesReleaseAndKeepsEveryRecord) {
  const auto file = interleaved_trace(3, 20000, UINT64_MAX / 4, 3);  // no watermarks
  MergeOptions opt;
  opt.max_buffered_bytes = 4096;
  const Merged m = merge(file, opt);
  EXPECT_GT(m.stats.forced_releases, 0u);
  std::vector<std::string> file_order;
  test::decode_all(file, file_order);
  auto a = timed_only(file_order), b = m.lines;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
}

TEST(Merge, CorruptBlockKeepsRecordsBeforeTheError) {
  std::size_t alloc_size = 0;
  const std::vector<uint8_t> file = file_with_a_bad_record(alloc_size);
  const Merged m = merge(file);
  EXPECT_EQ(m.result.status, ReadStatus::Corrupt);
  EXPECT_EQ(m.result.position, alloc_size);
  ASSERT_EQ(m.lines.size(), 1u);
  EXPECT_EQ(m.lines[0], "alloc s=1 time=5 addr=256 size=8 stack=1 weight=0 api=malloc");
}

TEST(Merge, SampleTraceMergesCompletely) {
  std::vector<std::string> file_order;
  const auto file = test::sample_trace(&file_order);
  const Merged m = merge(file);
  EXPECT_TRUE(m.result.end_of_file());
  auto a = file_order, b = m.lines;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
  EXPECT_EQ(m.lines.front().rfind("process", 0), 0u);
}

}  // namespace
}  // namespace memtide
