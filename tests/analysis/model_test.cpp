// The replay on synthetic traces with exactly known answers.
#include <gtest/gtest.h>

#include "analysis/stacks.h"
#include "analysis/replay.h"
#include "tests/analysis/trace_builder.h"

namespace memtide::test {
namespace {

using analysis::Domain;
using analysis::Model;
using analysis::ReplayOptions;
using analysis::StackId;
using fmt::Api;
constexpr uint64_t S = TraceBuilder::kStart;

// Stack ids 2 and 3 are two call paths under node 1; 4 is a third one.
void add_stacks(TraceBuilder& b) {
  b.stack(1, 1, 0, {0x100}).stack(1, 2, 1, {0x200}).stack(1, 3, 1, {0x300}).stack(1, 4, 1, {0x400});
}

TEST(StackTable, ChainsAcrossChunksFarIdsAndCopies) {
  // A chain that crosses the boundaries of the table's chunks, a lone far id (its chunk alone
  // is allocated, not every id below it), one beyond the dense range, and a copy that holds
  // the same nodes independently of the original.
  constexpr std::size_t kChain = 40000;  // deeper than one chunk, within StackTable::kMaxDepth
  analysis::StackTable t;
  std::vector<uint64_t> ips(kChain);
  for (std::size_t i = 0; i < ips.size(); ++i) ips[i] = 0x400000 + 16 * i;
  t.define(1, 0, ips.data(), 4096);
  for (uint32_t first = 4097; first <= kChain; first += 4096)
    t.define(first, first - 1, ips.data() + first - 1, static_cast<uint32_t>(std::min<std::size_t>(4096, kChain + 1 - first)));
  const uint64_t far = analysis::StackTable::kDenseLimit - 3, sparse = analysis::StackTable::kDenseLimit + 5;
  const uint64_t far_ip[] = {0xABC}, sparse_ip[] = {0xDEF};
  t.define(far, kChain, far_ip, 1);
  t.define(sparse, far, sparse_ip, 1);
  EXPECT_EQ(t.size(), kChain + 2);
  EXPECT_LT(t.memory_bytes(), std::size_t{16} << 20) << "a far id allocates its own chunk, not every id below it";

  std::vector<uint64_t> frames;
  ASSERT_TRUE(t.frames(StackId(sparse), frames));
  ASSERT_EQ(frames.size(), kChain + 2);
  for (std::size_t i = 0; i < kChain; ++i) ASSERT_EQ(frames[i], ips[i]) << "frame " << i;
  EXPECT_EQ(frames[kChain], 0xABCu);
  EXPECT_EQ(frames[kChain + 1], 0xDEFu);
  EXPECT_FALSE(t.defined(StackId(kChain + 1)));
  EXPECT_FALSE(t.defined(StackId(far - 1)));
  EXPECT_EQ(t.parent(StackId(32768)), StackId(32767));

  analysis::StackTable copy = t;
  const uint64_t other[] = {0x1};
  t.define(kChain + 1, 5, other, 1);
  std::size_t visited = 0;
  copy.for_each([&](StackId id, const analysis::StackTable::Node& n) {
    ++visited;
    if (id.value <= kChain) {
      EXPECT_EQ(n.ip, ips[id.value - 1]);
    }
  });
  EXPECT_EQ(visited, kChain + 2);
  EXPECT_FALSE(copy.defined(StackId(kChain + 1)));
  EXPECT_TRUE(t.defined(StackId(kChain + 1)));
}

TEST(Leaks, GroupedByStackWithBytesBlocksAndAllocationTimes) {
  TraceBuilder b;
  add_stacks(b);
  b.malloc(1, 10, 0x1000, 100, 2).malloc(1, 20, 0x2000, 200, 2).malloc(1, 30, 0x3000, 50, 3).free(1, 40, 0x2000);
  b.malloc(2, 50, 0x4000, 25, 3);
  auto m = analyze(b.end(100));
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->complete);
  EXPECT_EQ(m->heap().leaked_bytes, 175u);
  EXPECT_EQ(m->heap().leaked_blocks, 3u);
  EXPECT_EQ(m->heap().allocations, 4u);
  EXPECT_EQ(m->heap().allocated_bytes, 375u);
  EXPECT_EQ(m->heap().frees, 1u);
  const auto* a = stack_metrics(*m, 2);
  const auto* c = stack_metrics(*m, 3);
  ASSERT_TRUE(a && c);
  EXPECT_EQ(a->leaked_bytes, 100u);
  EXPECT_EQ(a->leaked_blocks, 1u);
  EXPECT_EQ(a->first_leak_time, S + 10);
  EXPECT_EQ(a->last_leak_time, S + 10);
  EXPECT_EQ(c->leaked_bytes, 75u);
  EXPECT_EQ(c->leaked_blocks, 2u);
  EXPECT_EQ(c->first_leak_time, S + 30);
  EXPECT_EQ(c->last_leak_time, S + 50);
  EXPECT_EQ(m->duration(), 100u);
}

// The leak scan: roots, interior pointers, transitive reach, cycles, free heap memory, and a
// mapping that is heap because a live block lies in it.
void expect_scan_classes(bool words_in_address_order) {
  using fmt::ScanKind;
  TraceBuilder b;
  add_stacks(b);
  b.malloc(1, 1, 0x10000, 64, 2)    // A: a root points inside it
      .malloc(1, 2, 0x10100, 32, 2)  // B: A points to it
      .malloc(1, 3, 0x30200, 8, 2)   // F: a word of a mapping without live blocks points to it
      .malloc(1, 4, 0x20000, 16, 3)  // C and D point to each other, nothing else to them
      .malloc(1, 5, 0x20100, 16, 3)
      .malloc(1, 6, 0x30000, 48, 4)   // E: only free heap memory points to it
      .malloc(1, 7, 0x700010, 16, 4)  // G: lives in a mapping, which is therefore heap
      .malloc(1, 8, 0x30300, 24, 4)   // H: a word of that mapping outside G points to it
      .malloc(1, 9, 0x30400, 8, 4)
      .free(1, 10, 0x30400);  // freed: a pointer to it changes nothing
  b.scan_region(0, ScanKind::Heap, 0x10000, 0x40000)
      .scan_region(1, ScanKind::Root, 0x500000, 0x501000)
      .scan_region(2, ScanKind::Mapping, 0x600000, 0x601000)
      .scan_region(3, ScanKind::Mapping, 0x700000, 0x701000);
  if (words_in_address_order) {
    b.scan_refs({{0x10008, 0x10100}, {0x20000, 0x20100}, {0x20100, 0x20008}, {0x30100, 0x30000}})
        .scan_refs({{0x500000, 0x10010}, {0x500008, 0x30400}, {0x600010, 0x30200}, {0x700800, 0x30300}});
  } else {  // (not as the recorder writes them: the reader sorts them)
    b.scan_refs({{0x500000, 0x10010}, {0x500008, 0x30400}, {0x600010, 0x30200}, {0x700800, 0x30300}})
        .scan_refs({{0x10008, 0x10100}, {0x20000, 0x20100}, {0x20100, 0x20008}, {0x30100, 0x30000}});
  }
  b.scan_done(4, 1000, 8);
  auto m = analyze(b.end(100));
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->leak_scan.complete);
  EXPECT_EQ(m->heap().leaked_bytes, 224u);
  EXPECT_EQ(m->heap().reachable_bytes, 104u);  // A, B, F
  EXPECT_EQ(m->heap().reachable_blocks, 3u);
  EXPECT_EQ(m->heap().indirect_bytes, 32u);  // C, D
  EXPECT_EQ(m->heap().indirect_blocks, 2u);
  const auto* s2 = stack_metrics(*m, 2);
  const auto* s3 = stack_metrics(*m, 3);
  const auto* s4 = stack_metrics(*m, 4);
  ASSERT_TRUE(s2 && s3 && s4);
  EXPECT_EQ(s2->reachable_bytes, 104u);
  EXPECT_EQ(s2->indirect_bytes, 0u);
  EXPECT_EQ(s3->indirect_bytes, 32u);
  EXPECT_EQ(s3->reachable_bytes, 0u);
  EXPECT_EQ(s4->leaked_bytes, 88u);  // E, G, H: definite
  EXPECT_EQ(s4->reachable_bytes + s4->indirect_bytes, 0u);
}

TEST(LeakScan, ReachableIndirectAndDefiniteByStack) { expect_scan_classes(true); }
TEST(LeakScan, WordsOutOfAddressOrderGiveTheSameClasses) { expect_scan_classes(false); }

// glibc's lists point at free chunks' headers, which can lie in the last 8 bytes of the block
// before them: such a pointer keeps nothing alive; any other pointer inside a block does.
TEST(LeakScan, APointerToTheNextChunksHeaderKeepsNothingAlive) {
  TraceBuilder b;
  add_stacks(b);
  b.malloc(1, 1, 0x10000, 500, 2)   // the next chunk's header is at 0x10000 + 496
      .malloc(1, 2, 0x20000, 500, 3)  // the same, pointed to 8 bytes before that
      .malloc(1, 3, 0x30000, 24, 4);  // a pointer to its last 8 bytes, not 16-byte aligned
  b.scan_region(0, fmt::ScanKind::Root, 0x500000, 0x501000)
      .scan_refs({{0x500000, 0x10000 + 496}, {0x500008, 0x20000 + 488}, {0x500010, 0x30000 + 20}})
      .scan_done(1, 512, 3);
  auto m = analyze(b.end(100));
  ASSERT_TRUE(m);
  EXPECT_EQ(stack_metrics(*m, 2)->reachable_bytes, 0u);
  EXPECT_EQ(stack_metrics(*m, 3)->reachable_bytes, 500u);
  EXPECT_EQ(stack_metrics(*m, 4)->reachable_bytes, 24u);
}

// The kernel merges neighbouring anonymous mappings into one line of /proc/self/maps: a
// mapping the program made itself (an interpreter's object arena) may share a region with a
// chunk glibc mapped for a large block. Its words are roots all the same.
TEST(LeakScan, TheProgramsOwnMappingIsARootInsideARegionThatHoldsABlock) {
  TraceBuilder b;
  add_stacks(b);
  b.alloc(1, 1, Api::Mmap, 0x700000, 0x1000, 4)  // the program's mapping, at the start of the region
      .malloc(1, 2, 0x701010, 0x2000, 2)          // a large block glibc mapped right after it
      .malloc(1, 3, 0x10000, 64, 3);              // pointed to from the program's mapping only
  b.scan_region(0, fmt::ScanKind::Mapping, 0x700000, 0x704000)
      .scan_refs({{0x700100, 0x10000}, {0x702000, 0x10010}})
      .scan_done(1, 2048, 2);
  auto m = analyze(b.end(100));
  ASSERT_TRUE(m);
  EXPECT_EQ(stack_metrics(*m, 3)->reachable_bytes, 64u);
  EXPECT_EQ(stack_metrics(*m, 2)->reachable_bytes, 0u);  // nothing points to the large block
}

TEST(LeakScan, AnIncompleteScanClassifiesNothing) {
  TraceBuilder b;
  add_stacks(b);
  b.malloc(1, 1, 0x10000, 64, 2);
  b.scan_region(0, fmt::ScanKind::Root, 0x500000, 0x501000).scan_refs({{0x500000, 0x10000}});
  auto m = analyze(b.end(100));
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->leak_scan.present);
  EXPECT_FALSE(m->leak_scan.complete);
  EXPECT_EQ(m->heap().reachable_bytes, 0u);
  EXPECT_EQ(m->heap().leaked_bytes, 64u);
  bool warned = false;
  for (const auto& w : m->warnings) warned |= w.find("leak scan") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST(Peak, TimeBytesAndLiveBytesByStack) {
  TraceBuilder b;
  add_stacks(b);
  b.malloc(1, 10, 0x1000, 100, 2).malloc(1, 20, 0x2000, 200, 2).malloc(1, 30, 0x3000, 50, 3).free(1, 40, 0x2000);
  auto m = analyze(b.end(100));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->heap().peak_bytes, 350u);
  EXPECT_EQ(m->heap().peak_blocks, 3u);
  EXPECT_EQ(m->heap().peak_time, S + 30);
  EXPECT_EQ(stack_metrics(*m, 2)->peak_bytes, 300u);
  EXPECT_EQ(stack_metrics(*m, 2)->peak_blocks, 2u);
  EXPECT_EQ(stack_metrics(*m, 3)->peak_bytes, 50u);
}

TEST(Peak, StacksChangedBeforeAndAfterALaterHigherPeak) {
  TraceBuilder b;
  add_stacks(b);
  b.malloc(1, 1, 0xA1, 100, 2).malloc(1, 2, 0xB1, 100, 3).malloc(1, 3, 0xA2, 200, 2);  // 400: first peak
  b.free(1, 4, 0xA2).malloc(1, 5, 0xB2, 150, 3).free(1, 6, 0xA1);                       // 250
  b.malloc(1, 7, 0xC1, 390, 4);                                                          // 640: the peak
  b.free(1, 8, 0xC1).malloc(1, 9, 0xA3, 10, 2);
  auto m = analyze(b.end(10));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->heap().peak_bytes, 640u);
  EXPECT_EQ(m->heap().peak_time, S + 7);
  EXPECT_EQ(stack_metrics(*m, 2)->peak_bytes, 0u);
  EXPECT_EQ(stack_metrics(*m, 3)->peak_bytes, 250u);
  EXPECT_EQ(stack_metrics(*m, 3)->peak_blocks, 2u);
  EXPECT_EQ(stack_metrics(*m, 4)->peak_bytes, 390u);
  uint64_t sum = 0;
  for (const auto& s : m->stacks[0]) sum += s.m.peak_bytes;
  EXPECT_EQ(sum, m->heap().peak_bytes);
}

TEST(Temporaries, SameThreadNoAllocationInBetween) {
  TraceBuilder b;
  add_stacks(b);
  b.malloc(1, 1, 0x10, 10, 2).free(1, 2, 0x10);                            // temporary
  b.malloc(1, 3, 0x20, 20, 2).malloc(1, 4, 0x30, 30, 3).free(1, 5, 0x20);  // not: 0x30 came in between
  b.free(1, 6, 0x30);                                                      // temporary (frees may intervene)
  b.malloc(2, 7, 0x40, 40, 3).free(1, 8, 0x40);                            // not: freed by another thread
  b.malloc(2, 9, 0x50, 50, 4).malloc(1, 10, 0x60, 60, 2).free(2, 11, 0x50);  // temporary: other threads don't count
  auto m = analyze(b.end(20));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->heap().temporaries, 3u);
  EXPECT_EQ(m->heap().temporary_bytes, 90u);
  EXPECT_EQ(stack_metrics(*m, 2)->temp_count, 1u);
  EXPECT_EQ(stack_metrics(*m, 3)->temp_count, 1u);
  EXPECT_EQ(stack_metrics(*m, 4)->temp_count, 1u);
  EXPECT_EQ(stack_metrics(*m, 4)->temp_bytes, 50u);
}

std::vector<uint8_t> window_trace() {
  TraceBuilder b;
  add_stacks(b);
  b.malloc(1, 10, 0xA, 100, 2).malloc(1, 20, 0xB, 200, 2).malloc(1, 30, 0xC, 300, 3).free(1, 40, 0xB);
  b.malloc(1, 50, 0xD, 400, 3).free(1, 60, 0xA);
  return b.end(70);
}

// A window's figures are those of heaptrack_gui's time range: allocations made in it, and as
// leaked those not freed by its end (0xB, freed at 40, after the window, is one of them).
TEST(Windows, StatisticsCountOnlyAllocationsMadeInTheWindow) {
  ReplayOptions o;
  o.from = 15;
  o.to = 35;
  auto m = analyze(window_trace(), o);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->has_window());
  EXPECT_EQ(m->heap().allocations, 2u);
  EXPECT_EQ(m->heap().allocated_bytes, 500u);
  EXPECT_EQ(m->heap().frees, 0u);
  EXPECT_EQ(m->heap().leaked_bytes, 500u);
  EXPECT_EQ(m->heap().leaked_blocks, 2u);
  EXPECT_EQ(m->heap().peak_bytes, 500u);
  EXPECT_EQ(m->heap().peak_time, S + 30);
  EXPECT_EQ(stack_metrics(*m, 2)->alloc_bytes, 200u);
  EXPECT_EQ(stack_metrics(*m, 2)->leaked_bytes, 200u);
  EXPECT_EQ(stack_metrics(*m, 3)->leaked_bytes, 300u);
  EXPECT_TRUE(m->complete) << "the End record is read from the tail";
  EXPECT_EQ(m->last_time, S + 70);
  // Without an end the window runs to the end of the trace: 0xB's free is in it.
  o.to.reset();
  m = analyze(window_trace(), o);
  EXPECT_EQ(m->heap().allocations, 3u);
  EXPECT_EQ(m->heap().frees, 1u);
  EXPECT_EQ(m->heap().leaked_bytes, 700u);  // 0xC and 0xD
}

TEST(Windows, LiveAtAChosenTime) {
  ReplayOptions o;
  o.at = 45;
  auto m = analyze(window_trace(), o);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->heap().at_bytes, 400u);  // 0xA and 0xC
  EXPECT_EQ(m->heap().at_blocks, 2u);
  EXPECT_EQ(stack_metrics(*m, 2)->at_bytes, 100u);
  EXPECT_EQ(stack_metrics(*m, 3)->at_bytes, 300u);
  o.at = 55;
  m = analyze(window_trace(), o);
  EXPECT_EQ(m->heap().at_bytes, 800u);
}

TEST(Windows, MadeInWindowAndStillLiveAtLaterTime) {
  ReplayOptions o;
  o.from = 5;
  o.to = 25;
  o.at = 45;
  auto m = analyze(window_trace(), o);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->heap().at_bytes, 100u);  // 0xA; 0xB was freed at 40
  EXPECT_EQ(m->heap().at_blocks, 1u);
  EXPECT_EQ(stack_metrics(*m, 2)->at_bytes, 100u);
  // The window's own figures stand as at its end: both blocks, no free.
  EXPECT_EQ(m->heap().leaked_bytes, 300u);
  EXPECT_EQ(m->heap().frees, 0u);
  EXPECT_EQ(stack_metrics(*m, 2)->leaked_bytes, 300u);
  ReplayOptions no_at = o;
  no_at.at.reset();
  auto w = analyze(window_trace(), no_at);
  EXPECT_EQ(w->heap().leaked_bytes, 300u);
  EXPECT_EQ(w->heap().peak_bytes, m->heap().peak_bytes);
}

TEST(Anomalies, MismatchedApisAreCountedWithTheAllocationStack) {
  TraceBuilder b;
  add_stacks(b);
  b.alloc(1, 1, Api::NewArray, 0x10, 40, 2).release(1, 2, Api::Free, 0x10);      // new[] / free
  b.alloc(1, 3, Api::Malloc, 0x20, 8, 3).release(1, 4, Api::Delete, 0x20);        // malloc / delete
  b.alloc(1, 5, Api::New, 0x30, 8, 4).release(1, 6, Api::Delete, 0x30);           // fine
  b.alloc(1, 7, Api::Malloc, 0x40, 8, 4).release(1, 8, Api::Realloc, 0x40);       // fine
  b.alloc(1, 9, Api::NewArray, 0x50, 16, 2).release(1, 10, Api::Delete, 0x50);    // new[] / delete
  auto m = analyze(b.end(20));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->anomalies.mismatch_count, 3u);
  ASSERT_EQ(m->anomalies.mismatches.size(), 3u);
  const auto& x = m->anomalies.mismatches[0];
  EXPECT_EQ(x.stack, StackId(2));
  EXPECT_EQ(x.alloc_api, Api::NewArray);
  EXPECT_EQ(x.free_api, Api::Free);
  EXPECT_EQ(x.bytes, 40u);
  EXPECT_EQ(m->anomalies.mismatches[1].alloc_api, Api::Malloc);
  EXPECT_EQ(m->anomalies.mismatches[1].free_api, Api::Delete);
  EXPECT_EQ(m->anomalies.mismatches[2].free_api, Api::Delete);
  EXPECT_EQ(m->heap().leaked_bytes, 0u);  // the blocks are released all the same
}

TEST(Anomalies, FreesOfUnknownAddressesAndDoubleFrees) {
  TraceBuilder b;
  add_stacks(b);
  b.free(1, 1, 0xdead).free(1, 2, 0xdead);
  b.malloc(2, 3, 0x10, 8, 2).free(2, 4, 0x10).free(2, 5, 0x10);
  auto m = analyze(b.end(10));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->anomalies.unknown_free_count[0], 3u);
  ASSERT_EQ(m->anomalies.unknown_frees.size(), 2u);  // grouped by API and thread
  EXPECT_EQ(m->anomalies.unknown_frees[0].count, 2u);
  EXPECT_EQ(m->anomalies.unknown_frees[0].first_addr, 0xdeadu);
  EXPECT_EQ(m->anomalies.unknown_frees[1].count, 1u);
  EXPECT_EQ(m->heap().frees, 4u);  // every free record (no window)
}

TEST(Anomalies, AddressAllocatedTwiceDropsTheOldBlock) {
  TraceBuilder b;
  add_stacks(b);
  b.malloc(1, 1, 0x10, 100, 2).malloc(2, 2, 0x10, 50, 3);
  auto m = analyze(b.end(10));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->anomalies.double_allocs, 1u);
  EXPECT_EQ(m->heap().leaked_bytes, 50u);
  EXPECT_EQ(stack_metrics(*m, 2)->leaked_bytes, 0u);
  EXPECT_EQ(stack_metrics(*m, 3)->leaked_bytes, 50u);
}

// The replay's batches hold an event in 16 bytes (analysis/batches.h); what does not fit takes
// another way there and must count the same.
TEST(Batches, EventsBeyondTheCompactFormCountTheSame) {
  TraceBuilder b;
  add_stacks(b);
  const uint64_t high = 0x00ff'1234'5678'9a00;  // an address above 2^48
  const uint64_t huge = uint64_t{5} << 30;      // a size above 2^32
  b.malloc(1, 1, high, 64, 2).malloc(1, 2, 0x10, huge, 3).malloc(2000, 3, 0x20, 100, 4);  // stream 2000
  b.alloc(1, 4, static_cast<Api>(25), 0x30, 8, 2);                                          // an unknown api
  b.malloc(1, 5, 0x40, 10, 2).free(2000, 6, 0x20).free(1, 7, high);
  b.alloc(1, 8, Api::Mmap, 0x7000, 0x3000, 4).release(1, 9, Api::Munmap, 0x8000, 0x1000);  // a munmap's length
  // Watermarks, so that the events are merged on the reader thread and reach the replay in
  // batches (without, all of them would be released at the end, on the replay's own thread).
  b.watermark(20).watermark(21);
  auto m = analyze(b.end(30));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->anomalies.bad_records, 1u);
  EXPECT_EQ(m->heap().allocations, 4u);
  EXPECT_EQ(m->heap().allocated_bytes, 64 + huge + 100 + 10);
  EXPECT_EQ(m->heap().frees, 2u);
  EXPECT_EQ(m->heap().peak_bytes, 64 + huge + 100 + 10);
  EXPECT_EQ(m->heap().peak_time, S + 5);
  EXPECT_EQ(m->heap().leaked_bytes, huge + 10);
  EXPECT_EQ(m->heap().leaked_blocks, 2u);
  EXPECT_EQ(stack_metrics(*m, 3)->leaked_bytes, huge);
  EXPECT_EQ(stack_metrics(*m, 4)->alloc_bytes, 100u);
  EXPECT_EQ(stack_metrics(*m, 4)->leaked_bytes, 0u);
  EXPECT_EQ(m->anomalies.unknown_free_count[0], 0u);
  EXPECT_EQ(m->totals[static_cast<unsigned>(Domain::Mmap)].leaked_bytes, 0x2000u);  // the rest of the mapping
  const analysis::ThreadInfo* t2000 = nullptr;
  for (const analysis::ThreadInfo& t : m->threads)
    if (t.id.value == 2000) t2000 = &t;
  ASSERT_NE(t2000, nullptr);
  EXPECT_EQ(t2000->allocations, 1u);
  EXPECT_EQ(t2000->frees, 1u);
}

TEST(Realloc, FreeAndAllocAtTheSameTimeAndReallocToZero) {
  TraceBuilder b;
  add_stacks(b);
  b.malloc(1, 1, 0x10, 100, 2);
  b.release(1, 2, Api::Realloc, 0x10).alloc(1, 2, Api::Realloc, 0x80, 200, 3);
  b.release(1, 3, Api::Realloc, 0x80);  // realloc(p, 0)
  auto m = analyze(b.end(10));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->heap().allocations, 2u);
  EXPECT_EQ(m->heap().frees, 2u);
  EXPECT_EQ(m->alloc_api[static_cast<unsigned>(Api::Realloc)].calls, 1u);
  EXPECT_EQ(m->alloc_api[static_cast<unsigned>(Api::Realloc)].bytes, 200u);
  EXPECT_EQ(m->free_api[static_cast<unsigned>(Api::Realloc)].calls, 2u);
  EXPECT_EQ(m->heap().peak_bytes, 200u);
  EXPECT_EQ(m->heap().leaked_bytes, 0u);
  EXPECT_EQ(m->anomalies.mismatch_count, 0u);
}

TEST(Mmap, PartialMunmapLeavesOneMappingWithTheRest) {
  TraceBuilder b;
  add_stacks(b);
  b.alloc(1, 1, Api::Mmap, 0x10000, 0x3000, 2);
  b.release(1, 2, Api::Munmap, 0x11000, 0x1000);  // the middle page
  b.alloc(1, 3, Api::Mmap, 0x20000, 0x1000, 3).release(1, 4, Api::Munmap, 0x20000, 0x1000);
  b.release(1, 5, Api::Munmap, 0x50000, 0x1000);  // never mapped
  auto m = analyze(b.end(10));
  ASSERT_TRUE(m);
  const auto& t = m->totals[static_cast<unsigned>(Domain::Mmap)];
  EXPECT_EQ(t.allocations, 2u);
  EXPECT_EQ(t.allocated_bytes, 0x4000u);
  EXPECT_EQ(t.frees, 3u);  // every munmap record, the unknown one included (no window)
  EXPECT_EQ(t.freed_bytes, 0x2000u);
  EXPECT_EQ(t.leaked_bytes, 0x2000u);
  EXPECT_EQ(t.leaked_blocks, 1u);
  EXPECT_EQ(t.peak_bytes, 0x3000u);
  EXPECT_EQ(m->anomalies.unknown_free_count[static_cast<unsigned>(Domain::Mmap)], 1u);
  EXPECT_EQ(stack_metrics(*m, 2, Domain::Mmap)->leaked_bytes, 0x2000u);
  EXPECT_EQ(m->heap().allocations, 0u);  // kept apart from the heap
}

TEST(Mmap, MunmapSpanningBothPiecesReleasesTheMapping) {
  TraceBuilder b;
  add_stacks(b);
  b.alloc(1, 1, Api::Mmap, 0x10000, 0x3000, 2).release(1, 2, Api::Munmap, 0x11000, 0x1000);
  b.release(1, 3, Api::Munmap, 0x10000, 0x3000);
  auto m = analyze(b.end(10));
  ASSERT_TRUE(m);
  const auto& t = m->totals[static_cast<unsigned>(Domain::Mmap)];
  EXPECT_EQ(t.leaked_bytes, 0u);
  EXPECT_EQ(t.leaked_blocks, 0u);
  EXPECT_EQ(t.freed_bytes, 0x3000u);
}

TEST(Mmap, MremapMovesTheMapping) {
  TraceBuilder b;
  add_stacks(b);
  b.alloc(1, 1, Api::Mmap, 0x10000, 0x1000, 2);
  b.release(1, 2, Api::Mremap, 0x10000).alloc(1, 2, Api::Mremap, 0x40000, 0x4000, 3);
  auto m = analyze(b.end(10));
  ASSERT_TRUE(m);
  const auto& t = m->totals[static_cast<unsigned>(Domain::Mmap)];
  EXPECT_EQ(t.leaked_bytes, 0x4000u);
  EXPECT_EQ(t.leaked_blocks, 1u);
  EXPECT_EQ(stack_metrics(*m, 3, Domain::Mmap)->leaked_bytes, 0x4000u);
}

TEST(Custom, PoolBlocksAreADomainOfTheirOwn) {
  TraceBuilder b;
  add_stacks(b);
  b.malloc(1, 1, 0x1000, 4096, 2);  // the pool
  b.alloc(1, 2, Api::Custom, 0x1000, 32, 3).alloc(1, 3, Api::Custom, 0x1020, 32, 3).release(1, 4, Api::Custom, 0x1000);
  auto m = analyze(b.end(10));
  ASSERT_TRUE(m);
  const auto& c = m->totals[static_cast<unsigned>(Domain::Custom)];
  EXPECT_EQ(c.allocations, 2u);
  EXPECT_EQ(c.leaked_bytes, 32u);
  EXPECT_EQ(m->heap().leaked_bytes, 4096u);  // same address, different domain: no anomaly
  EXPECT_EQ(m->anomalies.double_allocs, 0u);
}

TEST(Stacks, DefinitionArrivingAfterTheAllocationThatUsesIt) {
  TraceBuilder b;
  b.stack(1, 1, 0, {0x100});
  b.malloc(2, 1, 0x10, 8, 7).flush();
  b.stack(3, 5, 1, {0x500, 0x600, 0x700});  // defines 5, 6, 7 in another stream, later in the file
  auto m = analyze(b.end(10));
  ASSERT_TRUE(m);
  std::vector<uint64_t> ips;
  EXPECT_TRUE(m->stack_table.frames(StackId(7), ips));
  EXPECT_EQ(ips, (std::vector<uint64_t>{0x100, 0x500, 0x600, 0x700}));
  EXPECT_EQ(m->anomalies.undefined_stacks, 0u);
}

TEST(Stacks, UndefinedStackIsCountedNotFatal) {
  TraceBuilder b;
  b.malloc(1, 1, 0x10, 8, 99);
  auto m = analyze(b.end(10));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->anomalies.undefined_stacks, 1u);
  EXPECT_EQ(m->heap().leaked_bytes, 8u);
}

TEST(Truncation, AnalysedUpToTheCutWithAWarning) {
  TraceBuilder b;
  add_stacks(b);
  b.malloc(1, 1, 0x10, 100, 2).flush();
  b.malloc(1, 2, 0x20, 200, 2).flush();
  std::vector<uint8_t> bytes = b.end(10);
  bytes.resize(bytes.size() - 5);  // the End block loses its tail
  auto m = analyze(bytes);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->truncated);
  EXPECT_FALSE(m->complete);
  EXPECT_FALSE(m->warnings.empty());
  EXPECT_EQ(m->heap().allocations, 2u);
  EXPECT_EQ(m->heap().leaked_bytes, 300u);
}

// A bad record in a block of a thread's stream (one the report decodes only when its merge
// reaches it): the records before it and every later block count, with a warning.
TEST(Truncation, ABadRecordLosesOnlyTheRestOfItsBlock) {
  TraceBuilder b;
  add_stacks(b);
  b.flush();
  b.malloc(1, 1, 0x10, 100, 2).bad_record(1).flush();
  b.malloc(1, 2, 0x20, 200, 2).malloc(2, 3, 0x30, 50, 2).flush();
  auto m = analyze(b.end(10));
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->corrupt);
  EXPECT_TRUE(m->complete);
  std::size_t skipped = 0;
  for (const auto& w : m->warnings) skipped += w.find("rest of the block skipped") != std::string::npos;
  EXPECT_EQ(skipped, 1u);
  EXPECT_EQ(m->heap().allocations, 3u);
  EXPECT_EQ(m->heap().leaked_bytes, 350u);
}

TEST(Truncation, NotATraceIsAnError) {
  std::vector<uint8_t> junk(100, 'x');
  auto r = analysis::analyze_memory(junk);
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.error.empty());
}

// The largest value a series kept.
uint64_t series_max(const analysis::Series& s) {
  uint64_t mx = 0;
  for (const auto& p : s.points()) mx = std::max(mx, p.max);
  return mx;
}

TEST(Series, DownsamplingKeepsThePeak) {
  TraceBuilder b;
  add_stacks(b);
  uint64_t t = 1;
  for (int i = 0; i < 20000; ++i) b.malloc(1, t++, 0x1000 + 16 * static_cast<uint64_t>(i), 10, 2);
  b.malloc(1, t, 0x900000, 1000000, 3).free(1, t + 1, 0x900000);
  t += 2;
  for (int i = 0; i < 20000; ++i) b.free(1, t++, 0x1000 + 16 * static_cast<uint64_t>(i));
  ReplayOptions o;
  o.series_points = 64;
  auto m = analyze(b.end(t + 1), o);
  ASSERT_TRUE(m);
  const auto& pts = m->heap_series.points();
  EXPECT_LE(pts.size(), 64u);
  const uint64_t mx = series_max(m->heap_series);
  EXPECT_EQ(mx, m->heap().peak_bytes);
  EXPECT_EQ(mx, 200000u + 1000000u);
  EXPECT_EQ(pts.back().last, 0u);
}

TEST(Series, MappedAndCustomLiveBytesOverTime) {
  TraceBuilder b;
  add_stacks(b);
  b.malloc(1, 1, 0x1000, 10, 2);
  b.alloc(1, 2, Api::Mmap, 0x10000, 0x3000, 2);
  b.release(1, 3, Api::Munmap, 0x11000, 0x1000);  // a partial unmap: 0x2000 left
  b.alloc(1, 4, Api::Mmap, 0x20000, 0x5000, 3);  // 0x7000: the peak
  b.release(1, 5, Api::Munmap, 0x20000, 0x5000);
  b.alloc(1, 6, Api::Custom, 0x900, 64, 4).release(1, 7, Api::Custom, 0x900);
  auto m = analyze(b.end(10));
  ASSERT_TRUE(m);
  const auto& pts = m->mmap_series.points();
  ASSERT_FALSE(pts.empty());
  const uint64_t mx = series_max(m->mmap_series);
  EXPECT_EQ(mx, 0x7000u);
  EXPECT_EQ(mx, m->totals[static_cast<unsigned>(Domain::Mmap)].peak_bytes);
  EXPECT_EQ(pts.back().last, 0x2000u);  // the rest of the first mapping
  ASSERT_FALSE(m->custom_series.points().empty());
  EXPECT_EQ(m->custom_series.points().back().last, 0u);
  EXPECT_EQ(series_max(m->custom_series), 64u);
}

TEST(Series, MappedSeriesKeepsItsPeakWhenDownsampled) {
  TraceBuilder b;
  add_stacks(b);
  uint64_t t = 1;
  for (int i = 0; i < 5000; ++i) b.alloc(1, t++, Api::Mmap, 0x100000 * (static_cast<uint64_t>(i) + 1), 0x1000, 2);
  b.alloc(1, t, Api::Mmap, 0x9000000000, 0x100000, 3).release(1, t + 1, Api::Munmap, 0x9000000000, 0x100000);
  t += 2;
  for (int i = 0; i < 5000; ++i) b.release(1, t++, Api::Munmap, 0x100000 * (static_cast<uint64_t>(i) + 1), 0x1000);
  ReplayOptions o;
  o.series_points = 32;
  auto m = analyze(b.end(t + 1), o);
  ASSERT_TRUE(m);
  const auto& pts = m->mmap_series.points();
  EXPECT_LE(pts.size(), 32u);
  EXPECT_EQ(series_max(m->mmap_series), 5000u * 0x1000 + 0x100000);
  EXPECT_EQ(pts.back().last, 0u);
}

TEST(Series, NoMappingsNoMappedSeries) {
  TraceBuilder b;
  add_stacks(b);
  b.malloc(1, 1, 0x1000, 10, 2);
  auto m = analyze(b.end(10));
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->mmap_series.points().empty());
  EXPECT_TRUE(m->custom_series.points().empty());
}

TEST(Counters, RssSeriesAndPeak) {
  TraceBuilder b;
  b.counters(1, 1000).counters(2, 5000).counters(3, 2000);
  auto m = analyze(b.end(10));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->peak_rss, 5000u);
  EXPECT_FALSE(m->rss_series.points().empty());
}

}  // namespace
}  // namespace memtide::test
