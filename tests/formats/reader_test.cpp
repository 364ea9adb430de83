// FileReader and decoder on broken input: open errors, truncation at every byte, flipped
// bytes, hostile lengths and counts, unknown records, version rules, resynchronisation.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <random>

#include "formats/checkpoint.h"
#include "formats/decoder.h"
#include "formats/encoder.h"
#include "formats/reader.h"
#include "tests/formats/test_util.h"

namespace memtide {
namespace {

using namespace fmt;

std::vector<uint8_t> file_header() {
  std::vector<uint8_t> h(kFileHeaderSize);
  encode_file_header(h.data(), 0);
  return h;
}

// A block around `raw` exactly as the recorder would write it.
std::vector<uint8_t> block(uint32_t stream, const std::vector<uint8_t>& raw, uint64_t base_time = 0) {
  BlockHeader h;
  h.stream = stream;
  h.base_time = base_time;
  std::vector<uint8_t> out(block_bound(raw.size()));
  out.resize(encode_block(h, raw.data(), raw.size(), out.data(), out.size()));
  return out;
}

// A header with arbitrary fields and valid checksums, followed by `payload` as stored.
std::vector<uint8_t> crafted_block(uint8_t kind, uint8_t codec, uint32_t stored, uint32_t raw,
                                   const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> b(kBlockHeaderSize);
  wire::store_le<uint32_t>(b.data(), kBlockMagic);
  b[4] = kind;
  b[5] = codec;
  wire::store_le<uint32_t>(b.data() + 8, stored);
  wire::store_le<uint32_t>(b.data() + 12, raw);
  wire::store_le<uint32_t>(b.data() + 20, checksum32(payload.data(), payload.size()));
  wire::store_le<uint32_t>(b.data() + 44, checksum32(b.data(), 44));
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

std::vector<uint8_t> concat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::vector<uint8_t> alloc_bytes(uint64_t dt, int64_t daddr, uint64_t size, uint64_t stack) {
  uint8_t b[kMaxAllocRecord];
  return {b, encode_alloc(b, Api::Malloc, dt, daddr, size, stack)};
}

// Payload bytes of a length-prefixed record with the given tag and body.
std::vector<uint8_t> prefixed(uint8_t tag, const std::vector<uint8_t>& body) {
  std::vector<uint8_t> out{tag};
  uint8_t len[wire::kMaxVarint];
  out.insert(out.end(), len, wire::put_varint(len, body.size()));
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

std::vector<uint8_t> varints(std::initializer_list<uint64_t> vs) {
  std::vector<uint8_t> out;
  for (uint64_t v : vs) {
    uint8_t b[wire::kMaxVarint];
    out.insert(out.end(), b, wire::put_varint(b, v));
  }
  return out;
}

struct Decoded {
  ReadResult result;
  std::vector<std::string> lines;
};

Decoded decode_memory(const std::vector<uint8_t>& file) {
  Decoded d;
  d.result = test::decode_all(file, d.lines);
  return d;
}

// ---------------------------------------------------------------------------------------
// Opening
// ---------------------------------------------------------------------------------------

TEST(Open, MissingFile) {
  FileReader r;
  const OpenResult o = r.open(test::temp_path("does-not-exist"));
  EXPECT_EQ(o.error, OpenError::NotFound);
  EXPECT_EQ(o.message, "no such file");
}

TEST(Open, Directory) {
  FileReader r;
  EXPECT_EQ(r.open(testing::TempDir()).error, OpenError::IsDirectory);
}

TEST(Open, EmptyFile) {
  const auto path = test::temp_path("empty");
  test::write_bytes(path, {});
  FileReader r;
  const OpenResult o = r.open(path);
  EXPECT_EQ(o.error, OpenError::Empty);
  EXPECT_NE(o.message.find("empty"), std::string::npos);
}

TEST(Open, GarbageIsBadMagic) {
  FileReader r;
  const std::vector<uint8_t> junk = {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'};
  EXPECT_EQ(r.open_memory(junk).error, OpenError::BadMagic);
  std::vector<uint8_t> big(100, 0);
  EXPECT_EQ(r.open_memory(big).error, OpenError::BadMagic);
}

TEST(Open, ShortHeaderIsTruncated) {
  auto h = file_header();
  for (std::size_t n = 1; n < kFileHeaderSize; ++n) {
    FileReader r;
    EXPECT_EQ(r.open_memory(std::span(h.data(), n)).error, OpenError::TruncatedHeader) << n;
  }
}

TEST(Open, FutureMajorVersionRefused) {
  auto h = file_header();
  wire::store_le<uint16_t>(h.data() + 8, kVersionMajor + 1);
  FileReader r;
  OpenResult o = r.open_memory(h);
  EXPECT_EQ(o.error, OpenError::UnsupportedVersion);
  EXPECT_NE(o.message.find("unsupported format version " + std::to_string(kVersionMajor + 1) + "." +
                            std::to_string(kVersionMinor)),
            std::string::npos)
      << o.message;
  // Also when the checksum is right: the major decides first.
  test::fix_file_header_checksum(h);
  EXPECT_EQ(r.open_memory(h).error, OpenError::UnsupportedVersion);
  wire::store_le<uint16_t>(h.data() + 8, 0);
  test::fix_file_header_checksum(h);
  EXPECT_EQ(r.open_memory(h).error, OpenError::UnsupportedVersion);
}

TEST(Open, BadHeaderChecksum) {
  auto h = file_header();
  h[16] ^= 1;  // flags
  FileReader r;
  EXPECT_EQ(r.open_memory(h).error, OpenError::BadChecksum);
}

TEST(Open, HeaderSizeOutOfRange) {
  for (uint32_t size : {0u, 31u, 1u << 20}) {
    auto h = file_header();
    wire::store_le<uint32_t>(h.data() + 12, size);
    test::fix_file_header_checksum(h);
    FileReader r;
    EXPECT_EQ(r.open_memory(h).error, OpenError::BadHeader) << size;
  }
}

TEST(Open, NewerMinorWarnsAndReads) {
  std::vector<std::string> expected;
  auto file = test::sample_trace(&expected);
  wire::store_le<uint16_t>(file.data() + 10, kVersionMinor + 3);
  test::fix_file_header_checksum(file);
  FileReader r;
  ASSERT_TRUE(r.open_memory(file).ok());
  ASSERT_EQ(r.warnings().size(), 1u);
  EXPECT_NE(r.warnings()[0].find("newer"), std::string::npos);
  const Decoded d = decode_memory(file);
  EXPECT_TRUE(d.result.end_of_file());
  EXPECT_EQ(d.lines, expected);
}

TEST(Open, LargerHeaderIsSkipped) {
  std::vector<std::string> expected;
  auto file = test::sample_trace(&expected);
  wire::store_le<uint32_t>(file.data() + 12, kFileHeaderSize + 16);
  test::fix_file_header_checksum(file);
  file.insert(file.begin() + kFileHeaderSize, 16, 0xAB);
  const Decoded d = decode_memory(file);
  EXPECT_TRUE(d.result.end_of_file()) << d.result.message;
  EXPECT_EQ(d.lines, expected);
}

// ---------------------------------------------------------------------------------------
// Truncation
// ---------------------------------------------------------------------------------------

TEST(Truncation, CutAtEveryByteOfLastBlock) {
  std::vector<std::string> all;
  const auto file = test::sample_trace(&all);
  const auto offs = test::block_offsets(file);
  ASSERT_GE(offs.size(), 3u);
  const uint64_t last = offs.back();
  std::vector<std::string> before;
  test::decode_all(std::vector<uint8_t>(file.begin(), file.begin() + static_cast<long>(last)), before);
  ASSERT_LT(before.size(), all.size());

  for (uint64_t cut = last; cut < file.size(); ++cut) {
    const std::vector<uint8_t> part(file.begin(), file.begin() + static_cast<long>(cut));
    const Decoded d = decode_memory(part);
    EXPECT_EQ(d.lines, before) << "cut at " << cut;
    if (cut == last) {
      EXPECT_TRUE(d.result.end_of_file()) << cut;
    } else {
      EXPECT_EQ(d.result.status, ReadStatus::Truncated) << cut;
      EXPECT_EQ(d.result.offset, last) << cut;
      const bool in_header = cut - last < kBlockHeaderSize;
      EXPECT_NE(d.result.message.find(in_header ? "inside the block header" : "inside the block payload"),
                std::string::npos)
          << d.result.message;
    }
  }
}

TEST(Truncation, CutFileOnDiskReportsOffset) {
  const auto file = test::sample_trace();
  const auto offs = test::block_offsets(file);
  const uint64_t last = offs.back();
  const auto path = test::temp_path("cut.mtide");
  for (uint64_t cut : {last + 1, last + kBlockHeaderSize, static_cast<uint64_t>(file.size() - 1)}) {
    test::write_bytes(path, std::vector<uint8_t>(file.begin(), file.begin() + static_cast<long>(cut)));
    FileReader r;
    ASSERT_TRUE(r.open(path).ok());
    RecordDecoder dec;
    test::LogVisitor v;
    const ReadResult res = read_records(r, dec, v);
    EXPECT_EQ(res.status, ReadStatus::Truncated);
    EXPECT_EQ(res.offset, last);
    EXPECT_EQ(r.offset(), last) << "a truncated block must not be consumed";
  }
}

// ---------------------------------------------------------------------------------------
// Flipped bytes
// ---------------------------------------------------------------------------------------

TEST(Corruption, FlippedHeaderByteIsCorruptAtThatBlock) {
  std::vector<std::string> all;
  const auto file = test::sample_trace(&all);
  const auto offs = test::block_offsets(file);
  const uint64_t target = offs[1];
  std::vector<std::string> before;
  test::decode_all(std::vector<uint8_t>(file.begin(), file.begin() + static_cast<long>(target)), before);
  for (uint64_t i = 0; i < kBlockHeaderSize; ++i) {
    for (uint8_t bit : {0x01, 0x80}) {
      auto bad = file;
      bad[target + i] ^= bit;
      const Decoded d = decode_memory(bad);
      EXPECT_EQ(d.result.status, ReadStatus::Corrupt) << "byte " << i;
      EXPECT_EQ(d.result.offset, target) << "byte " << i;
      EXPECT_EQ(d.lines, before) << "byte " << i;
    }
  }
}

TEST(Corruption, FlippedPayloadByteIsCorruptAtThatBlock) {
  const auto file = test::sample_trace();
  const auto offs = test::block_offsets(file);
  for (std::size_t k = 0; k < offs.size(); ++k) {
    const uint64_t start = offs[k] + kBlockHeaderSize;
    const uint64_t end = k + 1 < offs.size() ? offs[k + 1] : file.size();
    for (uint64_t i = start; i < end; ++i) {
      auto bad = file;
      bad[i] ^= 0x10;
      const Decoded d = decode_memory(bad);
      EXPECT_EQ(d.result.status, ReadStatus::Corrupt) << i;
      EXPECT_EQ(d.result.offset, offs[k]) << i;
      EXPECT_NE(d.result.message.find("payload checksum mismatch"), std::string::npos) << d.result.message;
    }
  }
}

TEST(Corruption, RandomBytesNeverCrash) {
  std::mt19937 rng(12345);
  const auto good = test::sample_trace();
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> f = i % 2 ? file_header() : std::vector<uint8_t>(good.begin(), good.begin() + 100);
    const std::size_t n = rng() % 400;
    for (std::size_t k = 0; k < n; ++k) f.push_back(static_cast<uint8_t>(rng()));
    if (i % 3 == 0) f.insert(f.end(), good.begin() + kFileHeaderSize, good.end());
    const Decoded d = decode_memory(f);
    EXPECT_FALSE(d.result.ok());
  }
}

TEST(Corruption, MutatedValidTracesNeverCrash) {
  // Mutations with checksums recomputed, so the decoder itself sees hostile payloads.
  std::mt19937 rng(99);
  std::vector<uint8_t> raw;
  for (int i = 0; i < 50; ++i) {
    auto a = alloc_bytes(static_cast<uint64_t>(i), 16, 32, 1);
    raw.insert(raw.end(), a.begin(), a.end());
    auto m = prefixed(tag_of(RecordType::StackDef), varints({1, 0, 2, 10, 20}));
    raw.insert(raw.end(), m.begin(), m.end());
  }
  for (int i = 0; i < 3000; ++i) {
    auto p = raw;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) p[rng() % p.size()] = static_cast<uint8_t>(rng());
    const Decoded d = decode_memory(concat({file_header(), block(1, p)}));
    EXPECT_TRUE(d.result.end_of_file() || d.result.status == ReadStatus::Corrupt);
  }
}

// ---------------------------------------------------------------------------------------
// Block header checks
// ---------------------------------------------------------------------------------------

TEST(BlockHeader, UnknownKindAndCodec) {
  const std::vector<uint8_t> payload{1, 2, 3};
  Decoded d = decode_memory(concat({file_header(), crafted_block(1, 0, 3, 3, payload)}));
  EXPECT_EQ(d.result.status, ReadStatus::Corrupt);
  EXPECT_NE(d.result.message.find("unknown block kind 1"), std::string::npos);
  d = decode_memory(concat({file_header(), crafted_block(0, 7, 3, 3, payload)}));
  EXPECT_NE(d.result.message.find("unknown block codec 7"), std::string::npos);
}

TEST(BlockHeader, SizesOverLimitAreRefusedBeforeReading) {
  Decoded d = decode_memory(concat({file_header(), crafted_block(0, 1, kMaxBlockPayload + 1, 10, {})}));
  EXPECT_EQ(d.result.status, ReadStatus::Corrupt);
  EXPECT_NE(d.result.message.find("stored size"), std::string::npos);
  d = decode_memory(concat({file_header(), crafted_block(0, 1, 10, 0xFFFFFFFFu, {})}));
  EXPECT_EQ(d.result.status, ReadStatus::Corrupt);
  EXPECT_NE(d.result.message.find("raw size"), std::string::npos);
}

TEST(BlockHeader, StoredBlockSizesMustAgree) {
  const Decoded d = decode_memory(concat({file_header(), crafted_block(0, 0, 3, 4, {1, 2, 3})}));
  EXPECT_EQ(d.result.status, ReadStatus::Corrupt);
}

TEST(BlockHeader, Lz4SizeMismatchIsCorrupt) {
  std::vector<uint8_t> raw(1000, 0);
  auto a = alloc_bytes(1, 1, 1, 1);
  for (std::size_t i = 0; i + a.size() <= raw.size(); i += a.size()) std::copy(a.begin(), a.end(), raw.begin() + static_cast<long>(i));
  auto b = block(1, raw);
  ASSERT_EQ(b[5], static_cast<uint8_t>(Codec::Lz4));
  for (uint32_t claimed : {999u, 1001u, 5u}) {
    auto bad = b;
    wire::store_le<uint32_t>(bad.data() + 12, claimed);
    wire::store_le<uint32_t>(bad.data() + 44, checksum32(bad.data(), 44));
    const Decoded d = decode_memory(concat({file_header(), bad}));
    EXPECT_EQ(d.result.status, ReadStatus::Corrupt) << claimed;
    EXPECT_NE(d.result.message.find("LZ4"), std::string::npos) << d.result.message;
  }
}

TEST(BlockHeader, MaximalLz4RatioReadsBack) {
  // 4 MiB of zero-delta allocations compress about 255:1: the size plausibility check must
  // let the real thing through.
  std::vector<uint8_t> raw;
  const auto a = alloc_bytes(0, 0, 0, 0);
  while (raw.size() + a.size() <= (4u << 20)) raw.insert(raw.end(), a.begin(), a.end());
  const auto b = block(1, raw);
  EXPECT_GT(raw.size() / (b.size() - kBlockHeaderSize), 200u);
  const Decoded d = decode_memory(concat({file_header(), b}));
  EXPECT_TRUE(d.result.end_of_file()) << d.result.message;
  EXPECT_EQ(d.lines.size(), raw.size() / a.size());
}

TEST(BlockHeader, ImpossibleLz4RatioIsRefused) {
  const Decoded d = decode_memory(concat({file_header(), crafted_block(0, 1, 10, 1 << 20, std::vector<uint8_t>(10, 0))}));
  EXPECT_EQ(d.result.status, ReadStatus::Corrupt);
  EXPECT_NE(d.result.message.find("cannot come from 10 bytes of LZ4"), std::string::npos) << d.result.message;
}

TEST(BlockHeader, EmptyBlockIsFine) {
  const Decoded d = decode_memory(concat({file_header(), block(1, {}), block(2, alloc_bytes(1, 1, 1, 1))}));
  EXPECT_TRUE(d.result.end_of_file());
  EXPECT_EQ(d.lines.size(), 1u);
}

// ---------------------------------------------------------------------------------------
// Records: limits, unknown tags, extensions
// ---------------------------------------------------------------------------------------

Decoded decode_payload(const std::vector<uint8_t>& raw) { return decode_memory(concat({file_header(), block(1, raw)})); }

TEST(Records, StackDefFrameLimit) {
  auto body = varints({1, 0, kMaxStackDefFrames + 1});
  body.resize(body.size() + kMaxStackDefFrames + 1, 2);
  const auto raw = concat({alloc_bytes(1, 1, 1, 1), prefixed(tag_of(RecordType::StackDef), body)});
  const Decoded d = decode_payload(raw);
  EXPECT_EQ(d.result.status, ReadStatus::Corrupt);
  EXPECT_EQ(d.result.offset, kFileHeaderSize);
  EXPECT_EQ(d.result.position, alloc_bytes(1, 1, 1, 1).size());
  EXPECT_NE(d.result.message.find("more than 4096 frames"), std::string::npos) << d.result.message;
  EXPECT_NE(d.result.message.find("payload position 5"), std::string::npos) << d.result.message;
  EXPECT_EQ(d.lines.size(), 1u);
}

TEST(Records, ModuleSegmentLimit) {
  auto body = varints({1, 1, 0});
  body.push_back(0);  // empty path
  body.push_back(0);  // empty build id
  auto n = varints({kMaxSegments + 1});
  body.insert(body.end(), n.begin(), n.end());
  const Decoded d = decode_payload(prefixed(tag_of(RecordType::ModuleLoad), body));
  EXPECT_EQ(d.result.status, ReadStatus::Corrupt);
  EXPECT_NE(d.result.message.find("segments"), std::string::npos);
}

TEST(Records, LengthPastBlockEnd) {
  auto raw = prefixed(tag_of(RecordType::Marker), varints({1, 3, 'a', 'b', 'c'}));
  raw.pop_back();
  raw[1] = 10;  // claims more than there is
  const Decoded d = decode_payload(raw);
  EXPECT_EQ(d.result.status, ReadStatus::Corrupt);
  EXPECT_NE(d.result.message.find("length prefix"), std::string::npos);
}

TEST(Records, StringPastRecordEnd) {
  // The label claims 9 bytes but the record holds 3: must not read into the next record.
  const auto raw = concat({prefixed(tag_of(RecordType::Marker), varints({1, 9, 'a', 'b', 'c'})), alloc_bytes(1, 1, 1, 1)});
  const Decoded d = decode_payload(raw);
  EXPECT_EQ(d.result.status, ReadStatus::Corrupt);
  EXPECT_EQ(d.result.position, 0u);
  EXPECT_NE(d.result.message.find("marker record"), std::string::npos) << d.result.message;
}

TEST(Records, HostileCounts) {
  // argc and symbol counts far beyond the record: refused without walking them.
  const auto pi = concat({varints({1, 1, 1, 1, 4096}), {0}, varints({0, 0, 0}), {0, 0}, varints({UINT64_MAX})});
  EXPECT_EQ(decode_payload(prefixed(tag_of(RecordType::ProcessInfo), pi)).result.status, ReadStatus::Corrupt);
  EXPECT_EQ(decode_payload(prefixed(tag_of(RecordType::Symbols), varints({1, 1ull << 40}))).result.status,
            ReadStatus::Corrupt);
}

TEST(Records, TruncatedAllocAtBlockEnd) {
  auto raw = alloc_bytes(1, 100000, 123456789, 5);
  for (std::size_t n = 1; n < raw.size(); ++n) {
    const Decoded d = decode_payload(std::vector<uint8_t>(raw.begin(), raw.begin() + static_cast<long>(n)));
    EXPECT_EQ(d.result.status, ReadStatus::Corrupt) << n;
    EXPECT_EQ(d.result.position, 0u);
  }
}

TEST(Records, UnknownTagIsSkippedAndReported) {
  const auto raw = concat({alloc_bytes(1, 0x1000, 8, 1), prefixed(0x30, {9, 8, 7}), prefixed(0x3E, {}),
                           alloc_bytes(1, 16, 8, 1)});
  const Decoded d = decode_payload(raw);
  EXPECT_TRUE(d.result.end_of_file()) << d.result.message;
  ASSERT_EQ(d.lines.size(), 4u);
  EXPECT_EQ(d.lines[1], "unknown s=1 tag=48 payload=090807");
  EXPECT_EQ(d.lines[2], "unknown s=1 tag=62 payload=");
  EXPECT_EQ(d.lines[3], "alloc s=1 time=2 addr=4112 size=8 stack=1 weight=0 api=malloc");
}

TEST(Records, TrailingFieldsOfNewerMinorAreSkipped) {
  // A Marker with its 2.1 field (sampling) and two more, then a Watermark with one extra field:
  // both read, registers intact.
  const auto raw = concat({prefixed(tag_of(RecordType::Marker), concat({varints({5, 2, 'h', 'i'}), varints({77, 88, 99})})),
                           prefixed(tag_of(RecordType::Watermark), varints({5, 1234})), alloc_bytes(1, 1, 1, 1)});
  const Decoded d = decode_payload(raw);
  EXPECT_TRUE(d.result.end_of_file()) << d.result.message;
  ASSERT_EQ(d.lines.size(), 3u);
  EXPECT_EQ(d.lines[0], "marker s=1 time=5 label='hi' sampling=77");
  EXPECT_EQ(d.lines[1], "watermark s=1 time=10");
  EXPECT_EQ(d.lines[2], "alloc s=1 time=11 addr=1 size=1 stack=1 weight=0 api=malloc");
}

TEST(Records, AllocFreeWithApiUnknownToThisReader) {
  std::vector<uint8_t> raw{static_cast<uint8_t>(kTagAllocBase + 30), 1, 2, 3, 4,
                           static_cast<uint8_t>(kTagFreeBase + 31), 1, 0};
  const Decoded d = decode_payload(raw);
  EXPECT_TRUE(d.result.end_of_file());
  ASSERT_EQ(d.lines.size(), 2u);
  EXPECT_EQ(d.lines[0], "alloc s=1 time=1 addr=1 size=3 stack=4 weight=0 api=?");
  EXPECT_EQ(d.lines[1], "free s=1 time=2 addr=1 length=0 api=?");
}

TEST(Records, SampleWeightAppliesToNextAllocOnly) {
  const auto raw = concat({prefixed(tag_of(RecordType::SampleWeight), varints({4096})), alloc_bytes(1, 1, 8, 1),
                           alloc_bytes(1, 1, 8, 1)});
  const Decoded d = decode_payload(raw);
  ASSERT_EQ(d.lines.size(), 3u);
  EXPECT_NE(d.lines[1].find("weight=4096"), std::string::npos);
  EXPECT_NE(d.lines[2].find("weight=0"), std::string::npos);
}

TEST(Records, RegistersStartFromBlockHeader) {
  const Decoded d = decode_memory(concat({file_header(), block(1, alloc_bytes(5, -16, 1, 1), 1000)}));
  ASSERT_EQ(d.lines.size(), 1u);
  EXPECT_EQ(d.lines[0], "alloc s=1 time=1005 addr=18446744073709551600 size=1 stack=1 weight=0 api=malloc");
}

// ---------------------------------------------------------------------------------------
// Navigation: skip, resync
// ---------------------------------------------------------------------------------------

TEST(Navigation, SkipReadsHeadersOnly) {
  const auto file = test::sample_trace();
  FileReader r;
  ASSERT_TRUE(r.open_memory(file).ok());
  BlockRef ref;
  std::size_t n = 0;
  ReadResult res;
  while ((res = r.skip(ref)).ok()) ++n;
  EXPECT_TRUE(res.end_of_file());
  EXPECT_EQ(n, test::block_offsets(file).size());
  // A payload that would run past the end is Truncated even though it is not read.
  FileReader t;
  const std::vector<uint8_t> cut(file.begin(), file.end() - 1);
  ASSERT_TRUE(t.open_memory(cut).ok());
  while ((res = t.skip(ref)).ok()) {
  }
  EXPECT_EQ(res.status, ReadStatus::Truncated);
}

TEST(Navigation, ResyncFindsNextBlockAfterCorruptHeader) {
  std::vector<std::string> all;
  auto file = test::sample_trace(&all);
  const auto offs = test::block_offsets(file);
  ASSERT_GE(offs.size(), 3u);
  file[offs[1] + 2] ^= 0xFF;  // magic of the second block
  FileReader r;
  ASSERT_TRUE(r.open_memory(file).ok());
  Block b;
  ASSERT_TRUE(r.next(b).ok());
  const ReadResult bad = r.next(b);
  ASSERT_EQ(bad.status, ReadStatus::Corrupt);
  EXPECT_EQ(bad.offset, offs[1]);
  ASSERT_TRUE(r.resync());
  EXPECT_EQ(r.offset(), offs[2]);
  std::size_t rest = 0;
  while (r.next(b).ok()) ++rest;
  EXPECT_EQ(rest, offs.size() - 2);
}

TEST(Navigation, ResyncFailsOnGarbageTail) {
  auto file = concat({file_header(), std::vector<uint8_t>(300, 0x4D)});
  FileReader r;
  ASSERT_TRUE(r.open_memory(file).ok());
  Block b;
  EXPECT_EQ(r.next(b).status, ReadStatus::Corrupt);
  EXPECT_FALSE(r.resync());
  EXPECT_EQ(r.offset(), kFileHeaderSize);
}

// Files of the previous major (1.3: no short Alloc/Free forms) read as before, without a warning.
TEST(Open, PreviousMajorVersionIsRead) {
  std::vector<std::string> want;
  auto bytes = test::sample_trace(&want);
  wire::store_le<uint16_t>(bytes.data() + 8, 1);
  wire::store_le<uint16_t>(bytes.data() + 10, 3);
  test::fix_file_header_checksum(bytes);
  fmt::FileReader r;
  ASSERT_TRUE(r.open_memory(bytes).ok());
  EXPECT_EQ(r.info().version_major, 1);
  EXPECT_TRUE(r.warnings().empty());
  std::vector<std::string> got;
  EXPECT_TRUE(test::decode_all(bytes, got).end_of_file());
  EXPECT_EQ(got, want);
}


// Checkpoint heads that cannot be right (each record's checksum valid: crafted, or written by a
// broken recorder) are left out with a warning each, the others kept: a head whose time goes back
// (a window from it would start after the events it has to replay, and read as empty), and one
// whose live-block counts its data blocks could not hold (a reader would reserve for them).
TEST(Checkpoints, HeadsThatCannotBeRightAreLeftOutAndSaid) {
  auto head = [](uint64_t seq, uint64_t time, uint64_t data_blocks, uint64_t heap_blocks) {
    fmt::CheckpointHead h;
    h.seq = seq;
    h.time = time;
    h.offset = 1000 * seq;
    h.data_blocks = data_blocks;
    h.blocks[0] = heap_blocks;
    return h;
  };
  std::vector<fmt::CheckpointHead> heads{head(1, 100, 1, 10), head(2, 50, 1, 10), head(3, 200, 1, uint64_t{1} << 60),
                                         head(4, 300, 0, 0), head(5, 400, 2, 5'000'000), head(6, 299, 1, 1)};
  std::vector<std::string> warnings;
  fmt::drop_unusable_checkpoints(heads, &warnings);
  std::vector<uint64_t> kept;
  for (const auto& h : heads) kept.push_back(h.seq);
  EXPECT_EQ(kept, (std::vector<uint64_t>{1, 4, 5}));
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_EQ(warnings[0], "checkpoint 2 (offset 2000): its time is before the previous checkpoint's; not used");
  EXPECT_EQ(warnings[1], "checkpoint 3 (offset 3000): it counts more live blocks than its data blocks can hold; not used");
  EXPECT_EQ(warnings[2], "checkpoint 6 (offset 6000): its time is before the previous checkpoint's; not used");
  // Counts that overflow when added up are no way around it.
  std::vector<fmt::CheckpointHead> wrap{head(1, 1, 1, 0)};
  wrap[0].blocks[0] = wrap[0].blocks[1] = uint64_t{1} << 63;
  fmt::drop_unusable_checkpoints(wrap, nullptr);
  EXPECT_TRUE(wrap.empty());
}

}  // namespace
}  // namespace memtide
