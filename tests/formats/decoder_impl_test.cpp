// EventDecoder's two fast paths (portable and BMI2, formats/event_block_fast.h) produce identical
// EventBlocks: on random Alloc/Free payloads (full and short forms) with varints of every length, on payloads with
// bytes flipped (corrupt records at the same position, with the same message), on the sample
// trace and on every block of the fuzz seed corpus.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "formats/event_block.h"
#include "formats/wire.h"
#include "tests/formats/test_util.h"

namespace memtide {
namespace {

using namespace fmt;

void expect_same(const EventBlock& a, const EventBlock& b, const std::string& what) {
  ASSERT_EQ(a.events.size(), b.events.size()) << what;
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    const MergedEvent &x = a.events[i], &y = b.events[i];
    ASSERT_TRUE(x.time == y.time && x.addr == y.addr && x.size == y.size && x.stack == y.stack && x.tag == y.tag)
        << what << ": event " << i;
  }
  ASSERT_EQ(a.wide.size(), b.wide.size()) << what;
  for (std::size_t i = 0; i < a.wide.size(); ++i)
    EXPECT_EQ(test::to_text(0, a.wide[i]), test::to_text(0, b.wide[i])) << what;
  EXPECT_EQ(a.other, b.other) << what;
  EXPECT_EQ(a.immediate, b.immediate) << what;
  EXPECT_EQ(a.watermarks, b.watermarks) << what;
  EXPECT_EQ(a.result.status, b.result.status) << what;
  EXPECT_EQ(a.result.position, b.result.position) << what;
  EXPECT_EQ(a.result.message, b.result.message) << what;
}

// Where the CPU has no fast BMI2, EventDecoder::Impl::Bmi2 falls back to the portable path and
// a comparison would compare that path with itself: the tests that compare say so and skip.
constexpr const char* kNoBmi2 = "no fast BMI2 on this CPU: both decoders would be the portable one";

// Decodes `block` with both fast paths.
void decode_both(const Block& block, const std::string& what) {
  EventDecoder portable(EventDecoder::Impl::Portable), bmi2(EventDecoder::Impl::Bmi2);
  ASSERT_EQ(portable.impl(), EventDecoder::Impl::Portable);
  ASSERT_EQ(bmi2.impl(), EventDecoder::Impl::Bmi2);
  EventBlock a, b;
  portable.decode(block, a);
  bmi2.decode(block, b);
  expect_same(a, b, what);
}

// A value whose varint takes `bytes` bytes (1..10).
uint64_t value_of_length(std::mt19937_64& rng, unsigned bytes) {
  if (bytes >= 10) return rng() | (uint64_t{1} << 63);
  const uint64_t lo = bytes == 1 ? 0 : uint64_t{1} << (7 * (bytes - 1));
  const uint64_t hi = (uint64_t{1} << (7 * bytes)) - 1;
  return lo + rng() % (hi - lo + 1);
}

std::vector<uint8_t> random_payload(std::mt19937_64& rng, std::size_t records) {
  std::vector<uint8_t> out;
  uint8_t buf[64];
  auto varint = [&](uint8_t*& p) {
    // Mostly short varints, sometimes one of any length up to 10 bytes.
    const unsigned len = rng() % 4 == 0 ? 1 + rng() % 10 : 1 + rng() % 3;
    p = wire::put_varint(p, value_of_length(rng, len));
  };
  for (std::size_t i = 0; i < records; ++i) {
    uint8_t* p = buf;
    const unsigned kind = rng() % 20;
    if (kind == 0) {  // a SampleWeight
      *p++ = tag_of(RecordType::SampleWeight);
      uint8_t body[16];
      uint8_t* q = body;
      varint(q);
      p = wire::put_varint(p, static_cast<uint64_t>(q - body));
      std::memcpy(p, body, static_cast<std::size_t>(q - body));
      p += q - body;
    } else if (kind == 1) {  // a Watermark
      *p++ = tag_of(RecordType::Watermark);
      uint8_t body[16];
      uint8_t* q = wire::put_varint(body, rng() % 1000);
      p = wire::put_varint(p, static_cast<uint64_t>(q - body));
      std::memcpy(p, body, static_cast<std::size_t>(q - body));
      p += q - body;
    } else if (kind == 2) {  // a short Alloc (format 1.4): dt, size, stack
      *p++ = static_cast<uint8_t>(kTagAllocRecent + rng() % 64);
      for (int k = 0; k < 3; ++k) varint(p);
    } else if (kind == 3) {  // a short Free: dt
      *p++ = static_cast<uint8_t>(kTagFreeRecent + rng() % 64);
      varint(p);
    } else if (kind < 11) {  // an Alloc: dt, daddr, size, stack
      *p++ = static_cast<uint8_t>(kTagAllocBase + rng() % static_cast<unsigned>(Api::Count));
      for (int k = 0; k < 4; ++k) varint(p);
    } else {  // a Free (with a length for munmap)
      const bool munmap = rng() % 4 == 0;
      *p++ = static_cast<uint8_t>(kTagFreeBase +
                                  (munmap ? static_cast<unsigned>(Api::Munmap) : rng() % static_cast<unsigned>(Api::Count)));
      for (int k = 0; k < (munmap ? 3 : 2); ++k) varint(p);
    }
    out.insert(out.end(), buf, p);
  }
  return out;
}

Block block_of(const std::vector<uint8_t>& payload, uint32_t stream) {
  Block b;
  b.offset = 4096;
  b.header.stream = stream;
  b.header.base_time = 1000;
  b.header.base_addr = 0x10000;
  b.payload = std::span<const uint8_t>(payload.data(), payload.size());
  return b;
}

TEST(DecoderImpl, Bmi2IsChosenWhereAvailable) {
  EventDecoder d;
  EXPECT_EQ(d.impl(), EventDecoder::bmi2_available() ? EventDecoder::Impl::Bmi2 : EventDecoder::Impl::Portable);
  if (!EventDecoder::bmi2_available()) GTEST_SKIP() << "no BMI2 on this CPU: only the portable path runs";
}

TEST(DecoderImpl, RandomAllocsAndFreesDecodeIdentically) {
  if (!EventDecoder::bmi2_available()) GTEST_SKIP() << kNoBmi2;
  std::mt19937_64 rng(42);
  for (int round = 0; round < 200; ++round) {
    const std::vector<uint8_t> payload = random_payload(rng, 1 + rng() % 3000);
    decode_both(block_of(payload, round % 3), "round " + std::to_string(round));
  }
}

TEST(DecoderImpl, DamagedPayloadsDecodeIdentically) {
  if (!EventDecoder::bmi2_available()) GTEST_SKIP() << kNoBmi2;
  std::mt19937_64 rng(7);
  for (int round = 0; round < 400; ++round) {
    std::vector<uint8_t> payload = random_payload(rng, 1 + rng() % 500);
    const unsigned flips = 1 + rng() % 8;
    for (unsigned k = 0; k < flips; ++k) payload[rng() % payload.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    if (rng() % 4 == 0) payload.resize(rng() % payload.size());  // cut inside a record
    decode_both(block_of(payload, 1), "round " + std::to_string(round));
  }
}

// Every block of a trace image, with both decoders; the blocks compared (0 when the image does
// not open as a trace).
std::size_t decode_file_both(const std::vector<uint8_t>& bytes, const std::string& what) {
  FileReader r;
  if (!r.open_memory(bytes).ok()) return 0;
  Block b;
  std::size_t blocks = 0;
  for (int n = 0; n < 100000; ++n) {
    const ReadResult res = r.next(b);
    if (res.status == ReadStatus::Corrupt) continue;  // the reader resynchronises after a bad block
    if (!res.ok()) break;
    decode_both(b, what + " block at " + std::to_string(b.offset));
    ++blocks;
    if (::testing::Test::HasFatalFailure()) break;
  }
  return blocks;
}

TEST(DecoderImpl, SampleTraceDecodesIdentically) {
  if (!EventDecoder::bmi2_available()) GTEST_SKIP() << kNoBmi2;
  EXPECT_GT(decode_file_both(test::sample_trace(), "sample trace"), 0u) << "the sample trace has no block to compare";
}

TEST(DecoderImpl, CorpusDecodesIdentically) {
  if (!EventDecoder::bmi2_available()) GTEST_SKIP() << kNoBmi2;
  const std::filesystem::path dir(MEMTIDE_CORPUS_DIR);
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  // Some seeds are not traces at all (garbage, a cut header): those have no block to compare.
  std::size_t files = 0, compared = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    ++files;
    compared += decode_file_both(test::read_bytes(e.path().string()), e.path().filename().string()) != 0;
  }
  EXPECT_GE(files, 10u);
  EXPECT_GE(compared, 10u) << "too few seeds hold blocks to compare";
}

}  // namespace
}  // namespace memtide
