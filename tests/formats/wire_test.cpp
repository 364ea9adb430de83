// Primitive encodings: LEB128 varints (checked cursor and the decoder's unchecked fast path),
// zigzag.
#include <gtest/gtest.h>

#include <vector>

#include "formats/decoder.h"
#include "formats/wire.h"

namespace memtide {
namespace {

// Decodes with both readers; they must agree. Returns false when the bytes are invalid.
bool decode_both(const std::vector<uint8_t>& bytes, uint64_t& out, std::size_t& used) {
  wire::Cursor c(bytes.data(), bytes.data() + bytes.size());
  uint64_t a = 0;
  const bool ok_cursor = c.get_varint(a);
  std::vector<uint8_t> padded = bytes;
  padded.resize(bytes.size() + wire::kMaxVarint, 0x80);  // the fast path reads ahead
  const uint8_t* p = padded.data();
  uint64_t b = 0;
  bool ok_fast = fmt::detail::varint_fast(p, b);
  // The fast path may only succeed within the real bytes.
  if (ok_fast && static_cast<std::size_t>(p - padded.data()) > bytes.size()) ok_fast = false;
  EXPECT_EQ(ok_cursor, ok_fast);
  if (ok_cursor && ok_fast) {
    EXPECT_EQ(a, b);
    EXPECT_EQ(c.offset(), static_cast<std::size_t>(p - padded.data()));
  }
  out = a;
  used = c.offset();
  return ok_cursor;
}

std::vector<uint8_t> encode(uint64_t v) {
  uint8_t buf[wire::kMaxVarint];
  return {buf, wire::put_varint(buf, v)};
}

TEST(Varint, RoundTripsEdgeValues) {
  const uint64_t values[] = {0, 1, 127, 128, 255, 300, 16383, 16384, (1ull << 32) - 1, 1ull << 32,
                             (1ull << 56) - 1, 1ull << 56, (1ull << 63) - 1, 1ull << 63, UINT64_MAX};
  for (uint64_t v : values) {
    const auto bytes = encode(v);
    uint64_t out = 0;
    std::size_t used = 0;
    ASSERT_TRUE(decode_both(bytes, out, used)) << v;
    EXPECT_EQ(out, v);
    EXPECT_EQ(used, bytes.size());
  }
}

TEST(Varint, EncodedLengths) {
  EXPECT_EQ(encode(0).size(), 1u);
  EXPECT_EQ(encode(127).size(), 1u);
  EXPECT_EQ(encode(128).size(), 2u);
  EXPECT_EQ(encode(UINT64_MAX).size(), 10u);
}

TEST(Varint, RejectsElevenBytes) {
  std::vector<uint8_t> b(10, 0x80);
  b.push_back(0x00);
  uint64_t out;
  std::size_t used;
  EXPECT_FALSE(decode_both(b, out, used));
}

TEST(Varint, RejectsBitsPastSixtyFour) {
  std::vector<uint8_t> b(9, 0xff);
  b.push_back(0x02);  // the 10th byte may only be 0 or 1
  uint64_t out;
  std::size_t used;
  EXPECT_FALSE(decode_both(b, out, used));
  b.back() = 0x01;
  ASSERT_TRUE(decode_both(b, out, used));
  EXPECT_EQ(out, UINT64_MAX);
}

TEST(Varint, AcceptsOverlongZeroPadding) {
  // 0x80 0x00 is a two-byte encoding of 0: valid LEB128, writers just never produce it.
  uint64_t out;
  std::size_t used;
  ASSERT_TRUE(decode_both({0x80, 0x00}, out, used));
  EXPECT_EQ(out, 0u);
  EXPECT_EQ(used, 2u);
}

TEST(Varint, RejectsTruncated) {
  uint64_t out;
  std::size_t used;
  EXPECT_FALSE(decode_both({}, out, used));
  EXPECT_FALSE(decode_both({0x80}, out, used));
  EXPECT_FALSE(decode_both({0xff, 0xff, 0xff}, out, used));
}

TEST(Zigzag, RoundTripsAndOrders) {
  const int64_t values[] = {0, -1, 1, -2, 2, INT64_MAX, INT64_MIN, -4096, 4096};
  for (int64_t v : values) EXPECT_EQ(wire::unzigzag(wire::zigzag(v)), v) << v;
  EXPECT_EQ(wire::zigzag(0), 0u);
  EXPECT_EQ(wire::zigzag(-1), 1u);
  EXPECT_EQ(wire::zigzag(1), 2u);
  EXPECT_EQ(wire::zigzag(INT64_MIN), UINT64_MAX);
}

TEST(Cursor, BytesMustFitAndFailureSticks) {
  const uint8_t b[] = {3, 'a', 'b'};
  wire::Cursor c(b, b + sizeof b);
  const uint8_t* d;
  std::size_t n;
  EXPECT_FALSE(c.get_bytes(d, n));
  EXPECT_TRUE(c.failed());
}

}  // namespace
}  // namespace memtide
