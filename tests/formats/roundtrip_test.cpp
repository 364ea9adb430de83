// Every record type written with TraceWriter reads back with all fields equal, through the
// template and the virtual decode paths.
#include <gtest/gtest.h>

#include <random>

#include "formats/decoder.h"
#include "formats/writer.h"
#include "tests/formats/test_util.h"

namespace memtide {
namespace {

using namespace fmt;
using test::LogVisitor;

TEST(RoundTrip, EveryRecordTypeTemplatePath) {
  std::vector<std::string> expected;
  const auto file = test::sample_trace(&expected);
  std::vector<std::string> got;
  const ReadResult r = test::decode_all(file, got);
  EXPECT_TRUE(r.end_of_file()) << r.message;
  EXPECT_EQ(got, expected);
}

TEST(RoundTrip, EveryRecordTypeVirtualPath) {
  std::vector<std::string> expected;
  const auto file = test::sample_trace(&expected);
  FileReader reader;
  ASSERT_TRUE(reader.open_memory(file).ok());
  RecordDecoder dec;
  test::VirtualLogVisitor v;
  RecordVisitor& base = v;
  const ReadResult r = read_records(reader, dec, base);
  EXPECT_TRUE(r.end_of_file()) << r.message;
  EXPECT_EQ(v.log.lines, expected);
}

TEST(RoundTrip, SampleCoversEveryRecordType) {
  std::vector<std::string> expected;
  test::sample_trace(&expected);
  for (unsigned t = 0; t < kRecordTypeCount; ++t) {
    const std::string name(record_type_name(static_cast<RecordType>(t)));
    bool found = false;
    for (const auto& l : expected) found |= l.rfind(name + " ", 0) == 0;
    EXPECT_TRUE(found) << name;
  }
}

TEST(RoundTrip, ExtremeValuesAndLimits) {
  std::vector<uint8_t> file;
  std::vector<std::string> expected;
  TraceWriter w;
  w.open_memory(file);
  // Addresses far apart in both directions, sizes at the varint limit.
  const Alloc a1{1, UINT64_MAX, UINT64_MAX, UINT64_MAX, 0, Api::Custom};
  const Alloc a2{2, 0, 0, 0, 0, Api::Malloc};
  const Free f1{UINT64_MAX, 0x8000000000000000ull, 0, Api::DeleteArrayAligned};
  w.append(3, a1);
  w.append(3, a2);
  w.append(3, f1);
  expected = {test::to_text(3, a1), test::to_text(3, a2), test::to_text(3, f1)};
  // The largest stack definition and module.
  std::vector<uint64_t> ips(kMaxStackDefFrames);
  std::mt19937_64 rng(7);
  for (auto& ip : ips) ip = rng();
  const StackDef sd{100, 99, kMaxStackDefFrames, ips.data()};
  w.append(4, sd);
  expected.push_back(test::to_text(4, sd));
  ModuleLoad ml;
  ml.time = 5;
  ml.module_id = 1ull << 40;
  ml.path = "";
  ml.nseg = kMaxSegments;
  for (uint32_t i = 0; i < kMaxSegments; ++i) ml.segments[i] = {i * 4096ull, 4096, static_cast<uint8_t>(i & 7)};
  w.append(4, ml);
  expected.push_back(test::to_text(4, ml));
  w.close();

  std::vector<std::string> got;
  EXPECT_TRUE(test::decode_all(file, got).end_of_file());
  EXPECT_EQ(got, expected);
}

TEST(RoundTrip, RegistersCarryAcrossManySmallBlocks) {
  std::vector<uint8_t> file;
  std::vector<std::string> expected;
  TraceWriter w;
  TraceWriter::Options o;
  o.block_bytes = 64;  // a block every few records
  w.open_memory(file, o);
  std::mt19937_64 rng(1);
  uint64_t t[3] = {10, 10, 10};
  for (int i = 0; i < 3000; ++i) {
    const uint32_t s = static_cast<uint32_t>(rng() % 3);
    t[s] += rng() % 1000;
    if (rng() % 2) {
      const Alloc a{t[s], 0x7f0000000000ull + (rng() % (1 << 30)), rng() % 100000, rng() % 50, 0, Api::Malloc};
      w.append(s, a);
      expected.push_back(test::to_text(s, a));
    } else {
      const Free f{t[s], 0x7f0000000000ull + (rng() % (1 << 30)), 0, Api::Free};
      w.append(s, f);
      expected.push_back(test::to_text(s, f));
    }
  }
  w.close();
  EXPECT_GT(w.blocks_written(), 100u);
  // File order is per-stream flush order, so compare per stream.
  std::vector<std::string> got;
  EXPECT_TRUE(test::decode_all(file, got).end_of_file());
  for (const char* s : {"s=0 ", "s=1 ", "s=2 "}) {
    std::vector<std::string> e, g;
    for (const auto& l : expected)
      if (l.find(s) != std::string::npos) e.push_back(l);
    for (const auto& l : got)
      if (l.find(s) != std::string::npos) g.push_back(l);
    EXPECT_EQ(g, e) << s;
  }
  EXPECT_EQ(got.size(), expected.size());
}

TEST(RoundTrip, CompressedAndStoredBlocks) {
  // A compressible block goes out as LZ4, a tiny one raw; both must read back.
  std::vector<uint8_t> file;
  TraceWriter w;
  w.open_memory(file);
  for (int i = 0; i < 1000; ++i) w.append(1, Alloc{static_cast<uint64_t>(i), 0x1000, 16, 1, 0, Api::Malloc});
  w.flush(1);
  w.append(2, Free{1, 0x10, 0, Api::Free});
  w.close();
  FileReader r;
  ASSERT_TRUE(r.open_memory(file).ok());
  Block b;
  ASSERT_TRUE(r.next(b).ok());
  EXPECT_EQ(b.header.codec, Codec::Lz4);
  ASSERT_TRUE(r.next(b).ok());
  EXPECT_EQ(b.header.codec, Codec::None);
  EXPECT_TRUE(r.next(b).end_of_file());
}

TEST(RoundTrip, WriterRejectsTimeGoingBackwards) {
  std::vector<uint8_t> file;
  TraceWriter w;
  w.open_memory(file);
  w.append(1, Alloc{100, 1, 1, 1, 0, Api::Malloc});
  EXPECT_THROW(w.append(1, Free{99, 1, 0, Api::Free}), std::invalid_argument);
  // Other streams have their own clocks.
  EXPECT_NO_THROW(w.append(2, Free{50, 1, 0, Api::Free}));
}

TEST(RoundTrip, FileWriterWritesSameBytesAsMemoryWriter) {
  const std::string path = test::temp_path("same.mtide");
  std::vector<uint8_t> mem;
  for (int pass = 0; pass < 2; ++pass) {
    TraceWriter w;
    if (pass == 0)
      w.open_memory(mem);
    else
      w.open(path);
    w.append(1, Alloc{5, 0x1000, 10, 1, 0, Api::Calloc});
    w.append(1, Free{6, 0x1000, 0, Api::Free});
    w.end(End{7, EndReason::Exit, 0, 1, 1, 0});
    w.close();
  }
  EXPECT_EQ(test::read_bytes(path), mem);
}

}  // namespace
}  // namespace memtide
