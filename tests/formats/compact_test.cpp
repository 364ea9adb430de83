// AddressCompactor (formats/encoder.h): the short forms of Alloc and Free (format 1.4) decode
// to the very records the full forms give, through decode_block and through EventDecoder's
// two fast paths, and they make a busy stream's payload smaller.
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

// A payload as the recorder writes it: allocator traffic that reuses freed addresses (LIFO
// mostly), frees of recent blocks mostly, every API, munmap with lengths, and other records
// (StackDef, Watermark, SampleWeight) in between.
std::vector<uint8_t> allocator_payload(std::mt19937_64& rng, std::size_t records) {
  std::vector<uint8_t> out;
  std::vector<uint64_t> live, freed;
  uint64_t addr = kBaseAddr, bump = kBaseAddr + 0x1000;
  uint8_t buf[256];
  auto put = [&](uint8_t* end) { out.insert(out.end(), buf, end); };
  const Api alloc_apis[] = {Api::Malloc, Api::Malloc, Api::New, Api::New, Api::NewArray, Api::Calloc, Api::Realloc, Api::Mmap};
  const Api free_apis[] = {Api::Free, Api::Free, Api::Delete, Api::Delete, Api::DeleteArray, Api::Realloc, Api::Munmap};
  for (std::size_t i = 0; i < records; ++i) {
    const unsigned kind = static_cast<unsigned>(rng() % 40);
    if (kind == 0) {
      RecordBuilder b(buf, sizeof buf, RecordType::Watermark);
      b.varint(rng() % 100);
      put(buf + b.finish());
    } else if (kind == 1) {
      RecordBuilder b(buf, sizeof buf, RecordType::SampleWeight);
      b.varint(1 + rng() % 100000);
      put(buf + b.finish());
    } else if (kind == 2) {
      RecordBuilder b(buf, sizeof buf, RecordType::StackDef);
      b.varint(1 + rng() % 50).varint(0).varint(2).varint(0x401000 + rng() % 4096).varint(0x402000);
      put(buf + b.finish());
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
      put(encode_alloc(buf, api, rng() % 3 == 0 ? rng() % 5000 : 0, static_cast<int64_t>(a - addr), 1 + rng() % 300, stack));
      addr = a;
      live.push_back(a);
    } else {
      const std::size_t back = std::min<std::size_t>(live.size() - 1, rng() % 4 == 0 ? rng() % 50 : rng() % 2);
      const uint64_t a = live[live.size() - 1 - back];
      live.erase(live.end() - 1 - static_cast<std::ptrdiff_t>(back));
      const Api api = free_apis[rng() % std::size(free_apis)];
      put(encode_free(buf, api, rng() % 3 == 0 ? rng() % 5000 : 0, static_cast<int64_t>(a - addr), api == Api::Munmap ? 4096 : 0));
      addr = a;
      freed.push_back(a);
    }
  }
  return out;
}

Block block_of(const std::vector<uint8_t>& payload) {
  Block b;
  b.offset = 4096;
  b.header.stream = 3;
  b.header.base_time = 1000;
  b.header.base_addr = kBaseAddr;
  b.payload = std::span<const uint8_t>(payload.data(), payload.size());
  return b;
}

// One compactor for every payload of a test: its tables carry over from call to call, as in
// the recorder's writer, and must not leak into the next block.
AddressCompactor& compactor() {
  static AddressCompactor c;
  return c;
}

std::vector<uint8_t> compacted(const std::vector<uint8_t>& in) {
  std::vector<uint8_t> out(in.size() + 1, 0xEE);
  const std::size_t n = compactor().compact(in.data(), in.size(), kBaseAddr, out.data());
  EXPECT_LE(n, in.size());
  EXPECT_EQ(out[in.size()], 0xEE) << "wrote past the room it was given";
  out.resize(n);
  return out;
}

struct Decoded {
  std::vector<std::string> lines;
  ReadResult result;
};
Decoded decode_lines(const std::vector<uint8_t>& payload) {
  DecodeScratch scratch;
  test::LogVisitor v;
  Decoded d;
  d.result = decode_block(block_of(payload), scratch, v);
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

TEST(CompactAddresses, ShortFormsDecodeToTheSameRecords) {
  std::mt19937_64 rng(2024);
  for (int round = 0; round < 60; ++round) {
    const std::vector<uint8_t> full = allocator_payload(rng, 1 + rng() % 4000);
    const std::vector<uint8_t> small = compacted(full);
    const std::string what = "round " + std::to_string(round);
    const Decoded a = decode_lines(full), b = decode_lines(small);
    ASSERT_TRUE(a.result.ok()) << what << ": " << a.result.message;
    ASSERT_TRUE(b.result.ok()) << what << ": " << b.result.message;
    ASSERT_EQ(a.lines, b.lines) << what;
    for (auto impl : {EventDecoder::Impl::Portable, EventDecoder::Impl::Bmi2}) {
      EventBlock x, y;
      EXPECT_EQ(decode_events(full, impl, x), decode_events(small, impl, y)) << what;
      EXPECT_EQ(x.immediate, y.immediate) << what;
      EXPECT_EQ(x.watermarks, y.watermarks) << what;
      ASSERT_EQ(x.wide.size(), y.wide.size()) << what;
      for (std::size_t i = 0; i < x.wide.size(); ++i) EXPECT_EQ(test::to_text(0, x.wide[i]), test::to_text(0, y.wide[i]));
      EXPECT_TRUE(y.result.ok()) << what;
    }
  }
}

TEST(CompactAddresses, StackDefsSplitIntoABlockOfTheirOwn) {
  // With a second output the StackDefs leave the payload, in their order; the rest is what
  // compact() gives without it less those records, and the two, stacks first, decode to the
  // same records as the payload (StackDefs untimed: the registers do not move over them).
  std::mt19937_64 rng(77);
  for (int round = 0; round < 30; ++round) {
    const std::vector<uint8_t> full = allocator_payload(rng, 1 + rng() % 4000);
    const std::string what = "round " + std::to_string(round);
    AddressCompactor plain, split;
    std::vector<uint8_t> whole(full.size()), events(full.size()), stacks(full.size());
    whole.resize(plain.compact(full.data(), full.size(), kBaseAddr, whole.data()));
    const auto r = split.compact(full.data(), full.size(), kBaseAddr, events.data(), stacks.data());
    events.resize(r.events);
    stacks.resize(r.stacks);
    EXPECT_FALSE(r.rest_has_stacks) << what;
    EXPECT_EQ(events.size() + stacks.size(), whole.size()) << what;

    const Decoded all = decode_lines(whole), ev = decode_lines(events), st = decode_lines(stacks);
    ASSERT_TRUE(ev.result.ok() && st.result.ok()) << what;
    std::vector<std::string> defs, rest;
    for (const auto& line : all.lines) (line.rfind("stack", 0) == 0 ? defs : rest).push_back(line);
    ASSERT_FALSE(defs.empty()) << what << ": the payload has StackDefs to move";
    EXPECT_EQ(st.lines, defs) << what;
    EXPECT_EQ(ev.lines, rest) << what;
  }
}

TEST(CompactAddresses, RecentAddressesTakeTheShortForms) {
  std::mt19937_64 rng(5);
  const std::vector<uint8_t> full = allocator_payload(rng, 20000);
  const std::vector<uint8_t> small = compacted(full);
  const std::size_t records = decode_lines(full).lines.size();
  // About half the records are Allocs or Frees of malloc/new/free/delete at a recent address.
  EXPECT_GT(short_records(small), records / 4);
  EXPECT_EQ(short_records(full), 0u);
  EXPECT_LT(small.size(), full.size() * 90 / 100) << full.size() << " -> " << small.size();
  // Compacting again changes nothing: a short record is copied with the rest as it is.
  EXPECT_EQ(compacted(small).size(), small.size());
}

TEST(CompactAddresses, HotAddressesAreShortWhereverTheHeapLies) {
  // Twelve hot addresses spread over 64 MiB, allocated and freed in turn (LIFO, as a size
  // class's free list hands them out) for 200 rounds: after the first round every address is
  // in its ring when it comes again, so every record but those of the first round can be
  // short. The same traffic at 64 heap positions: which addresses share a hash slot depends on
  // the position, and with one table a shared slot cost its two addresses their short forms in
  // some positions (a sqlite3 trace was 27% larger in one run of six).
  std::mt19937_64 rng(31);
  constexpr int kHot = 12, kRounds = 200;
  uint64_t offsets[kHot];
  for (auto& o : offsets) o = 16 * (rng() % (uint64_t{64} << 16));
  for (int place = 0; place < 64; ++place) {
    const uint64_t base = kBaseAddr + 4096 * (rng() % (uint64_t{1} << 24));
    std::vector<uint8_t> full;
    uint8_t buf[64];
    uint64_t reg = base;
    auto put = [&](bool alloc, uint64_t a) {
      uint8_t* e = alloc ? encode_alloc(buf, Api::Malloc, 0, static_cast<int64_t>(a - reg), 24, 3)
                         : encode_free(buf, Api::Free, 0, static_cast<int64_t>(a - reg), 0);
      full.insert(full.end(), buf, e);
      reg = a;
    };
    for (int round = 0; round < kRounds; ++round) {
      for (int i = 0; i < kHot; ++i) put(true, base + offsets[i]);
      for (int i = kHot - 1; i >= 0; --i) put(false, base + offsets[i]);
    }
    AddressCompactor c;
    std::vector<uint8_t> small(full.size());
    small.resize(c.compact(full.data(), full.size(), base, small.data()));
    // Allowed: the first round (its allocations find no freed address) and a few more.
    const std::size_t reuses = 2 * kHot * kRounds - kHot;
    EXPECT_GE(short_records(small), reuses - reuses / 200) << "heap at 0x" << std::hex << base;
  }
}

TEST(CompactAddresses, EveryRingPositionRoundTrips) {
  // 40 allocations, then frees of each of them from the oldest (which drops out of the ring)
  // to the newest, then allocations at every freed address in another order.
  std::vector<uint8_t> full;
  uint8_t buf[64];
  uint64_t reg = kBaseAddr;
  auto alloc = [&](uint64_t a, Api api) {
    full.insert(full.end(), buf, encode_alloc(buf, api, 1, static_cast<int64_t>(a - reg), 8, 1));
    reg = a;
  };
  auto release = [&](uint64_t a, Api api) {
    full.insert(full.end(), buf, encode_free(buf, api, 1, static_cast<int64_t>(a - reg), 0));
    reg = a;
  };
  for (uint64_t i = 0; i < 40; ++i) alloc(kBaseAddr + 64 * i, i % 2 ? Api::New : Api::Malloc);
  for (uint64_t i = 0; i < 40; ++i) release(kBaseAddr + 64 * ((i * 7) % 40), i % 3 ? Api::Free : Api::Delete);
  for (uint64_t i = 0; i < 40; ++i) alloc(kBaseAddr + 64 * ((i * 13) % 40), i % 2 ? Api::Malloc : Api::New);
  const std::vector<uint8_t> small = compacted(full);
  EXPECT_GT(short_records(small), 40u);
  const Decoded a = decode_lines(full), b = decode_lines(small);
  ASSERT_TRUE(b.result.ok()) << b.result.message;
  EXPECT_EQ(a.lines, b.lines);
}

TEST(CompactAddresses, VarintsOfEveryLengthAndBadOnes) {
  // Full Allocs and Frees over a few addresses with every field's varint 1 to 10 bytes long
  // (zero-padded: same value, longer encoding), sometimes 11 (invalid). The compacted payload
  // decodes to the same records, up to the same error.
  std::mt19937_64 rng(77);
  auto put_varint = [&](std::vector<uint8_t>& out, uint64_t v, unsigned len) {
    for (unsigned i = 0; i + 1 < len; ++i) {
      out.push_back(static_cast<uint8_t>(v & 0x7f) | 0x80);
      v >>= 7;
    }
    out.push_back(static_cast<uint8_t>(v & 0x7f));
  };
  for (int round = 0; round < 200; ++round) {
    std::vector<uint8_t> full;
    uint64_t reg = kBaseAddr;
    for (int i = 0; i < 200; ++i) {
      auto len = [&](uint64_t v) {
        unsigned min = 1;
        while (min < 10 && (v >> (7 * min))) ++min;
        return rng() % 6 == 0 ? min + static_cast<unsigned>(rng() % (11 - min)) : min;
      };
      const uint64_t a = kBaseAddr + 16 * (rng() % 24);
      const int64_t d = static_cast<int64_t>(a - reg);
      const uint64_t zd = (static_cast<uint64_t>(d) << 1) ^ static_cast<uint64_t>(d >> 63);
      const bool alloc = rng() % 2;
      full.push_back(alloc ? (rng() % 2 ? 0x40 : 0x4a) : (rng() % 2 ? 0x69 : 0x6e));
      const uint64_t dt = rng() % 300;
      put_varint(full, dt, round % 50 == 7 && i == 150 ? 11 : len(dt));
      put_varint(full, zd, len(zd));
      if (alloc) {
        put_varint(full, 24, len(24));
        put_varint(full, 5, len(5));
      }
      reg = a;
    }
    const std::vector<uint8_t> small = compacted(full);
    const Decoded x = decode_lines(full), y = decode_lines(small);
    EXPECT_EQ(x.lines, y.lines) << "round " << round;
    EXPECT_EQ(x.result.status, y.result.status) << "round " << round;
  }
}

TEST(CompactAddresses, EachBlockStartsWithEmptyRings) {
  // Block 1 allocates; block 2 frees those blocks: its rings are empty at its start, so its first
  // Frees keep their full form even though the compactor saw the addresses a block ago.
  std::vector<uint8_t> one, two;
  uint8_t buf[64];
  uint64_t reg = kBaseAddr;
  for (uint64_t i = 0; i < 8; ++i) {
    one.insert(one.end(), buf, encode_alloc(buf, Api::Malloc, 1, static_cast<int64_t>(kBaseAddr + 32 * i - reg), 8, 1));
    reg = kBaseAddr + 32 * i;
  }
  const uint64_t base_two = reg;
  for (uint64_t i = 0; i < 8; ++i) {
    two.insert(two.end(), buf, encode_free(buf, Api::Free, 1, static_cast<int64_t>(kBaseAddr + 32 * i - reg), 0));
    reg = kBaseAddr + 32 * i;
  }
  AddressCompactor c;
  std::vector<uint8_t> out(one.size());
  EXPECT_EQ(c.compact(one.data(), one.size(), kBaseAddr, out.data()), one.size());
  out.assign(two.size(), 0);
  EXPECT_EQ(c.compact(two.data(), two.size(), base_two, out.data()), two.size());
  EXPECT_EQ(out, two);
}

TEST(CompactAddresses, ABrokenRecordAndWhatFollowsAreCopiedAsTheyAre) {
  std::mt19937_64 rng(9);
  for (int round = 0; round < 100; ++round) {
    std::vector<uint8_t> full = allocator_payload(rng, 1 + rng() % 300);
    full.resize(rng() % full.size() + 1);  // cut anywhere, maybe inside a record
    const std::vector<uint8_t> small = compacted(full);
    const Decoded a = decode_lines(full), b = decode_lines(small);
    EXPECT_EQ(a.lines, b.lines) << "round " << round;
    EXPECT_EQ(a.result.status, b.result.status) << "round " << round;
  }
}

}  // namespace
}  // namespace memtide
