// The short forms of Alloc and Free (format 2.0): a run of records written with RecentIndex
// (formats/records.h), as the recorder writes a chunk, decodes to the very records the full
// forms give, through decode_block and through EventDecoder's two fast paths, and is smaller; cut
// into blocks by cut_block (formats/encoder.h), as the writer takes a chunk in pieces, each
// block decodes on its own to its part of the same records.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "formats/decoder.h"
#include "formats/encoder.h"
#include "formats/merge.h"
#include "tests/formats/test_util.h"

namespace memtide {
namespace {

using namespace fmt;

constexpr uint64_t kBaseAddr = 0x5500'0000'0000;

// The same records in two payloads: `full` in the full forms only, `run` as the recorder writes
// a chunk (short forms where its RecentIndex finds the address), and where each record starts in
// `run` (record boundaries) and where the writer may cut it (not between a SampleWeight and its
// Alloc, which a block keeps together).
struct Payloads {
  std::vector<uint8_t> full, run;
  std::vector<std::size_t> starts, cuts;
  RecentIndex recent;
  uint64_t reg = kBaseAddr;  // the addr register

  Payloads() { recent.start_block(); }
  bool weight_pending = false;

  void start() {
    if (!weight_pending) cuts.push_back(run.size());
    starts.push_back(run.size());
  }
  void other(const uint8_t* rec, std::size_t n) {
    start();
    weight_pending |= rec[0] == tag_of(RecordType::SampleWeight);
    full.insert(full.end(), rec, rec + n);
    run.insert(run.end(), rec, rec + n);
  }
  void alloc(Api api, uint64_t dt, uint64_t a, uint64_t size, uint64_t stack) {
    uint8_t buf[kMaxAllocRecord];
    start();
    weight_pending = false;
    full.insert(full.end(), buf, encode_alloc(buf, api, dt, static_cast<int64_t>(a - reg), size, stack));
    run.insert(run.end(), buf, encode_alloc(buf, recent, api, dt, a, reg, size, stack));
    reg = a;
  }
  void release(Api api, uint64_t dt, uint64_t a, uint64_t length = 0) {
    uint8_t buf[kMaxFreeRecord];
    start();
    full.insert(full.end(), buf, encode_free(buf, api, dt, static_cast<int64_t>(a - reg), length));
    run.insert(run.end(), buf, encode_free(buf, recent, api, dt, a, reg, length));
    reg = a;
  }
};

// Allocator traffic that reuses freed addresses (LIFO mostly), frees of recent blocks mostly,
// every API, munmap with lengths, and other records (StackDef, Watermark, SampleWeight) in
// between.
Payloads allocator_payload(std::mt19937_64& rng, std::size_t records) {
  Payloads out;
  std::vector<uint64_t> live, freed;
  uint64_t bump = kBaseAddr + 0x1000;
  uint8_t buf[256];
  const Api alloc_apis[] = {Api::Malloc, Api::Malloc, Api::New, Api::New, Api::NewArray, Api::Calloc, Api::Realloc, Api::Mmap};
  const Api free_apis[] = {Api::Free, Api::Free, Api::Delete, Api::Delete, Api::DeleteArray, Api::Realloc, Api::Munmap};
  for (std::size_t i = 0; i < records; ++i) {
    const unsigned kind = static_cast<unsigned>(rng() % 40);
    if (kind == 0) {
      RecordBuilder b(buf, sizeof buf, RecordType::Watermark);
      b.varint(rng() % 100);
      out.other(buf, b.finish());
    } else if (kind == 1) {
      RecordBuilder b(buf, sizeof buf, RecordType::SampleWeight);
      b.varint(1 + rng() % 100000);
      out.other(buf, b.finish());
    } else if (kind == 2) {
      RecordBuilder b(buf, sizeof buf, RecordType::StackDef);
      b.varint(1 + rng() % 50).varint(0).varint(2).varint(0x401000 + rng() % 4096).varint(0x402000);
      out.other(buf, b.finish());
    } else if (kind < 22 || live.empty()) {
      uint64_t a;
      if (!freed.empty() && rng() % 10 < 8) {
        const std::size_t back = std::min<std::size_t>(freed.size() - 1, rng() % 4 == 0 ? rng() % 40 : rng() % 3);
        a = freed[freed.size() - 1 - back];
        freed.erase(freed.end() - 1 - static_cast<std::ptrdiff_t>(back));
      } else {
        a = bump;
        bump += 16 * (1 + rng() % 64);
      }
      const Api api = alloc_apis[rng() % std::size(alloc_apis)];
      const uint64_t stack = rng() % 8 == 0 ? (uint64_t{1} << 33) + rng() % 1000 : rng() % 3000;  // some wide ids
      out.alloc(api, rng() % 3 == 0 ? rng() % 5000 : 0, a, 1 + rng() % 300, stack);
      live.push_back(a);
    } else {
      const std::size_t back = std::min<std::size_t>(live.size() - 1, rng() % 4 == 0 ? rng() % 50 : rng() % 2);
      const uint64_t a = live[live.size() - 1 - back];
      live.erase(live.end() - 1 - static_cast<std::ptrdiff_t>(back));
      const Api api = free_apis[rng() % std::size(free_apis)];
      out.release(api, rng() % 3 == 0 ? rng() % 5000 : 0, a, api == Api::Munmap ? 4096 : 0);
      freed.push_back(a);
    }
  }
  return out;
}

Block block_of(const std::vector<uint8_t>& payload, uint64_t base_time = 1000, uint64_t base_addr = kBaseAddr) {
  Block b;
  b.offset = 4096;
  b.header.stream = 3;
  b.header.base_time = base_time;
  b.header.base_addr = base_addr;
  b.payload = std::span<const uint8_t>(payload.data(), payload.size());
  return b;
}

// `in` cut by cut_block with the state `st` into a payload of its own.
std::vector<uint8_t> cut(const uint8_t* in, std::size_t n, RunState& st, bool whole = true) {
  std::vector<uint8_t> out(cut_bound(n) + 1, 0xEE);
  const CutResult r = cut_block(in, n, st, out.data(), nullptr, whole);
  EXPECT_LE(r.events, cut_bound(n));
  EXPECT_EQ(out[cut_bound(n)], 0xEE) << "wrote past the room it was given";
  out.resize(r.events);
  return out;
}

struct Decoded {
  std::vector<std::string> lines;
  ReadResult result;
};
Decoded decode_lines(const std::vector<uint8_t>& payload, uint64_t base_time = 1000, uint64_t base_addr = kBaseAddr) {
  DecodeScratch scratch;
  test::LogVisitor v;
  Decoded d;
  d.result = decode_block(block_of(payload, base_time, base_addr), scratch, v);
  d.lines = std::move(v.lines);
  return d;
}

// The events EventDecoder makes of a payload, as text (the side records compared whole).
std::vector<std::string> decode_events(const std::vector<uint8_t>& payload, EventDecoder::Impl impl, EventBlock& b) {
  EventDecoder d(impl);
  d.decode(block_of(payload), b);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < b.events.size(); ++i) {
    const MergedEvent& e = b.events[i];
    out.push_back(std::to_string(e.time) + " " + std::to_string(e.addr) + " " + std::to_string(e.size) + " " +
                  std::to_string(e.stack) + " " + std::to_string(e.tag));
  }
  return out;
}

// Tags of the Allocs and Frees of a payload, walking it by the record layouts.
std::size_t short_records(const std::vector<uint8_t>& payload) {
  struct Count : NullVisitor {};
  std::size_t n = 0;
  const uint8_t* p = payload.data();
  const uint8_t* const end = p + payload.size();
  StreamRegs r;
  DecodeScratch scratch;
  Count v;
  while (p < end) {
    n += *p >= kTagAllocRecent;
    if (decode_record(p, end, r, 0, scratch, v) != DecodeError::None) break;
  }
  return n;
}

TEST(ShortForms, ARunDecodesToTheSameRecords) {
  std::mt19937_64 rng(2024);
  for (int round = 0; round < 60; ++round) {
    const Payloads pl = allocator_payload(rng, 1 + rng() % 4000);
    const std::string what = "round " + std::to_string(round);
    const Decoded a = decode_lines(pl.full), b = decode_lines(pl.run);
    ASSERT_TRUE(a.result.ok()) << what << ": " << a.result.message;
    ASSERT_TRUE(b.result.ok()) << what << ": " << b.result.message;
    ASSERT_EQ(a.lines, b.lines) << what;
    for (auto impl : {EventDecoder::Impl::Portable, EventDecoder::Impl::Bmi2}) {
      EventBlock x, y;
      EXPECT_EQ(decode_events(pl.full, impl, x), decode_events(pl.run, impl, y)) << what;
      EXPECT_EQ(x.immediate, y.immediate) << what;
      EXPECT_EQ(x.watermarks, y.watermarks) << what;
      ASSERT_EQ(x.wide.size(), y.wide.size()) << what;
      for (std::size_t i = 0; i < x.wide.size(); ++i) EXPECT_EQ(test::to_text(0, x.wide[i]), test::to_text(0, y.wide[i]));
      EXPECT_TRUE(y.result.ok()) << what;
    }
  }
}

TEST(ShortForms, ARunCutAnywhereDecodesBlockByBlock) {
  // A run cut at record boundaries into pieces, each made a block by cut_block with the state
  // the one before left: each block decodes on its own (empty rings, its base registers) to
  // its part of the records, the last may be cut without reading past its first records, and
  // the state after the whole run is the run's.
  std::mt19937_64 rng(4242);
  for (int round = 0; round < 80; ++round) {
    const Payloads pl = allocator_payload(rng, 1 + rng() % 3000);
    const std::string what = "round " + std::to_string(round);
    std::vector<std::size_t> cuts;
    const std::size_t pieces = 1 + rng() % (round % 4 == 0 ? 60 : 6);
    for (std::size_t i = 1; i < pieces; ++i) cuts.push_back(pl.cuts[rng() % pl.cuts.size()]);
    cuts.push_back(pl.run.size());
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());

    RunState st;
    st.time = 1000;
    st.addr = kBaseAddr;
    std::vector<std::string> lines;
    std::size_t from = 0, expanded = 0;
    for (std::size_t i = 0; i < cuts.size(); ++i) {
      const bool last = i + 1 == cuts.size();
      const uint64_t base_time = st.time, base_addr = st.addr;
      const std::vector<uint8_t> block = cut(pl.run.data() + from, cuts[i] - from, st, /*whole=*/!last || rng() % 2);
      expanded += block.size() - (cuts[i] - from);
      Decoded d = decode_lines(block, base_time, base_addr);
      ASSERT_TRUE(d.result.ok()) << what << ", piece " << i << ": " << d.result.message;
      lines.insert(lines.end(), d.lines.begin(), d.lines.end());
      from = cuts[i];
    }
    EXPECT_EQ(lines, decode_lines(pl.full).lines) << what;
    if (cuts.size() > 1 && round % 4 == 0) {
      EXPECT_GT(expanded, 0u) << what << ": some record named an address before its piece";
    }
  }
}

TEST(ShortForms, TheRunsStateFollowsItsRecords) {
  std::mt19937_64 rng(8);
  for (int round = 0; round < 20; ++round) {
    const Payloads pl = allocator_payload(rng, 1 + rng() % 2000);
    RunState st;
    st.addr = kBaseAddr;
    const std::vector<uint8_t> same = cut(pl.run.data(), pl.run.size(), st);
    EXPECT_EQ(same, pl.run) << "a run's first piece has nothing to change";
    EXPECT_EQ(st.addr, pl.reg);
    StreamRegs r;
    r.addr = kBaseAddr;
    DecodeScratch scratch;
    NullVisitor v;
    for (const uint8_t* p = pl.run.data(); p < pl.run.data() + pl.run.size();)
      ASSERT_EQ(decode_record(p, pl.run.data() + pl.run.size(), r, 0, scratch, v), DecodeError::None);
    EXPECT_EQ(st.time, r.time);
    for (unsigned ring = 0; ring < 2; ++ring)
      for (unsigned k = 0; k < kRingSize; ++k) EXPECT_EQ(st.rings.get(ring, k), r.ring.get(ring, k)) << ring << " " << k;
  }
}

TEST(ShortForms, StackDefsSplitIntoABlockOfTheirOwn) {
  // With a second output the StackDefs leave the payload, in their order; the two, stacks
  // first, decode to the same records as the payload (StackDefs untimed: the registers do not
  // move over them).
  std::mt19937_64 rng(77);
  for (int round = 0; round < 30; ++round) {
    const Payloads pl = allocator_payload(rng, 1 + rng() % 4000);
    const std::string what = "round " + std::to_string(round);
    RunState st;
    st.time = 1000;
    st.addr = kBaseAddr;
    std::vector<uint8_t> events(cut_bound(pl.run.size())), stacks(pl.run.size());
    const CutResult r = cut_block(pl.run.data(), pl.run.size(), st, events.data(), stacks.data(), /*whole=*/false);
    events.resize(r.events);
    stacks.resize(r.stacks);
    EXPECT_FALSE(r.rest_unread) << what;
    EXPECT_EQ(events.size() + stacks.size(), pl.run.size()) << what;

    const Decoded all = decode_lines(pl.full), ev = decode_lines(events), sd = decode_lines(stacks);
    ASSERT_TRUE(ev.result.ok() && sd.result.ok()) << what;
    std::vector<std::string> defs, rest;
    for (const auto& line : all.lines) (line.rfind("stack", 0) == 0 ? defs : rest).push_back(line);
    ASSERT_FALSE(defs.empty()) << what << ": the payload has StackDefs to move";
    EXPECT_EQ(sd.lines, defs) << what;
    EXPECT_EQ(ev.lines, rest) << what;
  }
}

TEST(ShortForms, RecentAddressesTakeTheShortForms) {
  std::mt19937_64 rng(5);
  const Payloads pl = allocator_payload(rng, 20000);
  const std::size_t records = decode_lines(pl.full).lines.size();
  // About half the records are Allocs or Frees of malloc/new/free/delete at a recent address.
  EXPECT_GT(short_records(pl.run), records / 4);
  EXPECT_EQ(short_records(pl.full), 0u);
  EXPECT_LT(pl.run.size(), pl.full.size() * 90 / 100) << pl.full.size() << " -> " << pl.run.size();
}

TEST(ShortForms, HotAddressesAreShortWhereverTheHeapLies) {
  // Twelve hot addresses spread over 64 MiB, allocated and freed in turn (LIFO, as a size
  // class's free list hands them out) for 200 rounds: after the first round every address is
  // in its ring when it comes again, so every record but those of the first round can be
  // short. The same traffic at 64 heap positions: which addresses share a table entry depends
  // on the position, and with one table a shared entry cost its two addresses their short
  // forms in some positions.
  std::mt19937_64 rng(31);
  constexpr int kHot = 12, kRounds = 200;
  uint64_t offsets[kHot];
  for (auto& o : offsets) o = 16 * (rng() % (uint64_t{64} << 16));
  for (int place = 0; place < 64; ++place) {
    const uint64_t base = kBaseAddr + 4096 * (rng() % (uint64_t{1} << 24));
    Payloads pl;
    pl.reg = base;
    for (int round = 0; round < kRounds; ++round) {
      for (int i = 0; i < kHot; ++i) pl.alloc(Api::Malloc, 0, base + offsets[i], 24, 3);
      for (int i = kHot - 1; i >= 0; --i) pl.release(Api::Free, 0, base + offsets[i]);
    }
    // Allowed: the first round (its allocations find no freed address) and a few more.
    const std::size_t reuses = 2 * kHot * kRounds - kHot;
    EXPECT_GE(short_records(pl.run), reuses - reuses / 200) << "heap at 0x" << std::hex << base;
  }
}

TEST(ShortForms, EveryRingPositionRoundTrips) {
  // 40 allocations, then frees of each of them from the oldest (which drops out of the ring)
  // to the newest, then allocations at every freed address in another order.
  Payloads pl;
  for (uint64_t i = 0; i < 40; ++i) pl.alloc(i % 2 ? Api::New : Api::Malloc, 1, kBaseAddr + 64 * i, 8, 1);
  for (uint64_t i = 0; i < 40; ++i) pl.release(i % 3 ? Api::Free : Api::Delete, 1, kBaseAddr + 64 * ((i * 7) % 40));
  for (uint64_t i = 0; i < 40; ++i) pl.alloc(i % 2 ? Api::Malloc : Api::New, 1, kBaseAddr + 64 * ((i * 13) % 40), 8, 1);
  EXPECT_GT(short_records(pl.run), 40u);
  const Decoded a = decode_lines(pl.full), b = decode_lines(pl.run);
  ASSERT_TRUE(b.result.ok()) << b.result.message;
  EXPECT_EQ(a.lines, b.lines);
}

TEST(ShortForms, EachRunStartsWithEmptyRings) {
  // A run allocates; the next run (start_block: the recorder's next chunk) frees those blocks:
  // its rings are empty at its start, so its Frees keep their full form although the index saw
  // the addresses a run ago, and it decodes on its own.
  Payloads pl;
  for (uint64_t i = 0; i < 8; ++i) pl.alloc(Api::Malloc, 1, kBaseAddr + 32 * i, 8, 1);
  const uint64_t base_two = pl.reg;
  pl.full.clear();
  pl.run.clear();
  pl.recent.start_block();
  for (uint64_t i = 0; i < 8; ++i) pl.release(Api::Free, 1, kBaseAddr + 32 * i);
  EXPECT_EQ(short_records(pl.run), 0u);
  EXPECT_EQ(pl.run, pl.full);
  EXPECT_EQ(decode_lines(pl.run, 1000, base_two).lines.size(), 8u);
}

TEST(ShortForms, ABrokenRecordAndWhatFollowsAreCopiedAsTheyAre) {
  std::mt19937_64 rng(9);
  for (int round = 0; round < 100; ++round) {
    Payloads pl = allocator_payload(rng, 1 + rng() % 300);
    const std::size_t keep = rng() % pl.run.size() + 1;  // cut anywhere, maybe inside a record
    const bool inside = !std::binary_search(pl.starts.begin(), pl.starts.end(), keep) && keep != pl.run.size();
    RunState st;
    st.time = 1000;
    st.addr = kBaseAddr;
    std::vector<uint8_t> out(cut_bound(keep));
    const CutResult r = cut_block(pl.run.data(), keep, st, out.data(), nullptr, /*whole=*/true);
    out.resize(r.events);
    EXPECT_EQ(r.rest_unread, inside) << "round " << round;
    const std::vector<uint8_t> head(pl.run.begin(), pl.run.begin() + static_cast<std::ptrdiff_t>(keep));
    EXPECT_EQ(out, head) << "round " << round;
  }
}

}  // namespace
}  // namespace memtide
