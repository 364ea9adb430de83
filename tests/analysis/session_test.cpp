// analysis::Session: a trace appended to a file in pieces and replayed piece by piece ends
// exactly where analyze_file on the whole file does, and each advance reads only the new bytes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>

#include "analysis/replay.h"
#include "formats/reader.h"
#include "formats/writer.h"
#include "model_equal.h"
#include "trace_builder.h"

namespace memtide::test {
namespace {

using analysis::Session;

// Three threads churning the heap, a custom pool and a few mappings, flushed and watermarked
// like the recorder does (a watermark after every flush of all streams), in small blocks.
// Streams 1..3 are numbered from `stream_base` + 1.
std::vector<uint8_t> churn_trace(bool with_end, int events = 60000, uint32_t stream_base = 0) {
  TraceBuilder b(1024);
  for (uint64_t s = 1; s <= 8; ++s) b.stack(0, s, 0, {0x1000 * s});
  std::mt19937_64 rng(12345);
  std::vector<uint64_t> live[4];  // per stream (1..3: heap, 0: custom and mappings)
  uint64_t t = 100, next_addr = 0x10000;  // t: since the start of the trace
  for (int i = 0; i < events; ++i) {
    t += 1 + rng() % 50;
    const uint32_t stream = 1 + static_cast<uint32_t>(rng() % 3);
    const unsigned kind = static_cast<unsigned>(rng() % 100);
    std::vector<uint64_t>& l = live[stream];
    if (kind < 3) {  // a mapping, sometimes unmapped in part
      const uint64_t addr = (next_addr += 0x100000);
      b.alloc(stream_base + stream, t, fmt::Api::Mmap, addr, 0x20000, 1 + rng() % 8);
      live[0].push_back(addr);
    } else if (kind < 5 && !live[0].empty()) {
      b.release(stream_base + stream, t, fmt::Api::Munmap, live[0].back(), rng() % 2 ? 0x20000 : 0x10000);
      live[0].pop_back();
    } else if (kind < 55 || l.empty()) {
      const fmt::Api api = kind % 7 == 0 ? fmt::Api::Custom : fmt::Api::Malloc;
      const uint64_t addr = (next_addr += 64);
      const uint64_t size = 1 + rng() % 4000;
      const uint64_t stack = 1 + rng() % 8;
      b.alloc(stream_base + stream, t, api, addr, size, stack);
      l.push_back(addr | (api == fmt::Api::Custom ? 1 : 0));
    } else {
      const std::size_t k = rng() % l.size();
      const uint64_t v = l[k];
      l[k] = l.back();
      l.pop_back();
      b.release(stream_base + stream, t, v & 1 ? fmt::Api::Custom : fmt::Api::Free, v & ~uint64_t{1});
    }
    if (i % 500 == 499) b.counters(t, 1000000 + (rng() % 1000) * 4096).flush().watermark(t);
  }
  return with_end ? b.end(t + 10) : b.close();
}

std::string temp_path(const char* name) {
  return "/tmp/memtide-session-test." + std::to_string(::getpid()) + "." + name + ".mtide";
}

void append_bytes(const std::string& path, const uint8_t* p, std::size_t n) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(n));
}

// File offsets where the blocks end.
std::vector<uint64_t> block_ends(const std::vector<uint8_t>& bytes) {
  fmt::FileReader r;
  EXPECT_TRUE(r.open_memory(bytes).ok());
  std::vector<uint64_t> ends;
  fmt::BlockRef ref;
  while (r.skip(ref).ok()) ends.push_back(r.offset());
  return ends;
}

// Writes `bytes` to a file in pieces ending at `cuts`, advancing a session after each, and
// compares the finished session with analyze_file on the whole file.
void replay_in_pieces(const std::vector<uint8_t>& bytes, std::vector<uint64_t> cuts, const analysis::ReplayOptions& o) {
  const std::string path = temp_path("pieces");
  std::remove(path.c_str());
  cuts.push_back(bytes.size());
  append_bytes(path, bytes.data(), 32);  // the file header
  Session s(o);
  ASSERT_EQ(s.open(path), "");
  uint64_t written = 32, events = 0;
  for (uint64_t cut : cuts) {
    ASSERT_GE(cut, written);
    append_bytes(path, bytes.data() + written, cut - written);
    written = cut;
    s.advance();
    std::unique_ptr<analysis::Model> snap = s.snapshot();
    EXPECT_GE(snap->events, events) << "at " << cut;  // a snapshot leaves the session as it was
    events = snap->events;
  }
  s.finish();
  std::unique_ptr<analysis::Model> live = s.snapshot();
  analysis::AnalyzeResult whole = analysis::analyze_file(path, o);
  ASSERT_TRUE(whole.ok());
  EXPECT_GT(whole.model->events, o.to ? 20000u : 50000u);  // (a window is replayed up to its end only)
  expect_same_model(*live, *whole.model);
  std::remove(path.c_str());
}

TEST(Session, PiecesCutAtBlockBoundariesEndLikeTheWholeFile) {
  const std::vector<uint8_t> bytes = churn_trace(true);
  const std::vector<uint64_t> ends = block_ends(bytes);
  ASSERT_GT(ends.size(), 100u);
  std::vector<uint64_t> cuts;
  for (std::size_t i = 3; i < ends.size(); i += ends.size() / 9) cuts.push_back(ends[i]);
  replay_in_pieces(bytes, cuts, {});
}

TEST(Session, PiecesCutInsideBlocksEndLikeTheWholeFile) {
  const std::vector<uint8_t> bytes = churn_trace(false);
  std::vector<uint64_t> cuts;
  for (uint64_t c = 40; c < bytes.size(); c += bytes.size() / 13 + 17) cuts.push_back(c);
  replay_in_pieces(bytes, cuts, {});
}

TEST(Session, WindowAndLiveAtFollowTheWholeFile) {
  const std::vector<uint8_t> bytes = churn_trace(true);
  analysis::ReplayOptions o;
  o.from = 200'000;
  o.to = 600'000;
  o.at = 900'000;
  std::vector<uint64_t> cuts;
  for (uint64_t c = 100; c < bytes.size(); c += bytes.size() / 7 + 3) cuts.push_back(c);
  replay_in_pieces(bytes, cuts, o);
}

// The replay takes the merged records from the reader thread in batches of 64K events, with
// those of streams numbered 2^24 and above (which do not fit a batch's event) on the side: the
// same trace with its threads renumbered so gives the same statistics, and one far longer than
// a batch replays to the same model in one piece and in many.
TEST(Session, StreamsNumberedPast2To24GiveTheSameStatistics) {
  const int kEvents = 300000;
  std::unique_ptr<analysis::Model> low = analyze(churn_trace(true, kEvents));
  std::unique_ptr<analysis::Model> high = analyze(churn_trace(true, kEvents, uint32_t{1} << 24));
  ASSERT_TRUE(low && high);
  EXPECT_EQ(low->events, high->events);
  EXPECT_GT(low->events, 250000u);
  for (unsigned d = 0; d < analysis::kDomainCount; ++d) {
    SCOPED_TRACE("domain " + std::to_string(d));
    const analysis::Totals &a = low->totals[d], &b = high->totals[d];
    EXPECT_EQ(a.allocations, b.allocations);
    EXPECT_EQ(a.allocated_bytes, b.allocated_bytes);
    EXPECT_EQ(a.frees, b.frees);
    EXPECT_EQ(a.freed_bytes, b.freed_bytes);
    EXPECT_EQ(a.peak_bytes, b.peak_bytes);
    EXPECT_EQ(a.peak_time, b.peak_time);
    EXPECT_EQ(a.leaked_bytes, b.leaked_bytes);
    EXPECT_EQ(a.leaked_blocks, b.leaked_blocks);
    EXPECT_EQ(low->anomalies.unknown_free_count[d], 0u);
    EXPECT_EQ(high->anomalies.unknown_free_count[d], 0u);
  }
  EXPECT_GT(low->heap().allocations, 100000u);
  EXPECT_EQ(low->peak_rss, high->peak_rss);
}

TEST(Session, ATraceOfManyBatchesEndsLikeTheWholeFile) {
  const std::vector<uint8_t> bytes = churn_trace(true, 300000);
  const std::vector<uint64_t> ends = block_ends(bytes);
  std::vector<uint64_t> cuts;
  for (std::size_t i = 5; i < ends.size(); i += ends.size() / 4) cuts.push_back(ends[i]);
  replay_in_pieces(bytes, cuts, {});
}

TEST(Session, SnapshotBeforeTheEndShowsWhatWasReplayedSoFar) {
  const std::vector<uint8_t> bytes = churn_trace(true);
  const std::vector<uint64_t> ends = block_ends(bytes);
  const uint64_t half = ends[ends.size() / 2];
  std::vector<uint8_t> first(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(half));
  Session s;
  ASSERT_EQ(s.open_memory(first), "");
  s.advance();
  std::unique_ptr<analysis::Model> m = s.snapshot();
  // The first half, up to its last watermark: what analyze_memory of the cut-off file sees,
  // less the events after that watermark (they wait for the next one).
  analysis::AnalyzeResult cut = analysis::analyze_memory(first);
  ASSERT_TRUE(cut.ok());
  EXPECT_FALSE(m->complete);
  EXPECT_GT(m->events, 0u);
  EXPECT_LE(m->events, cut.model->events);
  EXPECT_GT(m->events + 3000, cut.model->events);  // at most about one watermark interval behind
  EXPECT_GT(m->heap().peak_bytes, 0u);
  EXPECT_LE(m->heap().peak_bytes, cut.model->heap().peak_bytes);
  uint64_t leaked = 0;
  for (const auto& st : m->stacks[0]) leaked += st.m.leaked_bytes;
  EXPECT_EQ(leaked, m->heap().leaked_bytes);  // leaks = blocks live now, by stack
}

TEST(Session, AnAdvanceReadsOnlyTheAppendedBytes) {
  const std::vector<uint8_t> bytes = churn_trace(true);
  const std::vector<uint64_t> ends = block_ends(bytes);
  const std::string path = temp_path("bytes");
  std::remove(path.c_str());
  const uint64_t first = ends[ends.size() - 20];
  append_bytes(path, bytes.data(), first);
  Session s;
  ASSERT_EQ(s.open(path), "");
  const Session::Progress p0 = s.advance();
  EXPECT_EQ(s.offset(), first);
  EXPECT_EQ(p0.bytes, first - 32);
  // One more block: exactly its bytes are read.
  uint64_t before = s.bytes_read();
  const uint64_t second = ends[ends.size() - 19];
  append_bytes(path, bytes.data() + first, second - first);
  const Session::Progress p1 = s.advance();
  EXPECT_EQ(p1.blocks, 1u);
  EXPECT_EQ(s.bytes_read() - before, second - first);
  // Nothing new: nothing read.
  before = s.bytes_read();
  EXPECT_EQ(s.advance().blocks, 0u);
  EXPECT_EQ(s.bytes_read(), before);
  // Half a block: its header is read (and read again next time), not the rest.
  const uint64_t third = ends[ends.size() - 18];
  const uint64_t mid = second + (third - second) / 2;
  append_bytes(path, bytes.data() + second, mid - second);
  before = s.bytes_read();
  EXPECT_TRUE(s.advance().waiting);
  EXPECT_LE(s.bytes_read() - before, fmt::kBlockHeaderSize);
  append_bytes(path, bytes.data() + mid, third - mid);
  before = s.bytes_read();
  EXPECT_EQ(s.advance().blocks, 1u);
  EXPECT_EQ(s.bytes_read() - before, third - second);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace memtide::test
