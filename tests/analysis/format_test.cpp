// analysis/format.h: each reader's style of sizes and durations, as it has always printed them
// (the viewer's own cases: tests/viewer/format_test.cpp).
#include <gtest/gtest.h>

#include "analysis/format.h"

namespace memtide::analysis {
namespace {

TEST(Format, BytesBelowAKibiAreWholeBytesInEveryStyle) {
  for (BytesStyle s : {BytesStyle::Rounded, BytesStyle::Text, BytesStyle::Fixed2}) {
    EXPECT_EQ(format_bytes(0, s), "0 B");
    EXPECT_EQ(format_bytes(1023, s), "1023 B");
  }
}

TEST(Format, TheStylesDifferOnlyInTheirDigits) {
  EXPECT_EQ(format_bytes(1536, BytesStyle::Rounded), "1.50 KiB");
  EXPECT_EQ(format_bytes(1536, BytesStyle::Text), "1.50 KiB");
  EXPECT_EQ(format_bytes(1536, BytesStyle::Fixed2), "1.50 KiB");
  EXPECT_EQ(format_bytes(150 * 1024, BytesStyle::Text), "150 KiB");
  EXPECT_EQ(format_bytes(150 * 1024, BytesStyle::Fixed2), "150.00 KiB");
  // Just below a unit: the viewer rounds first, the reports keep the unit they found.
  EXPECT_EQ(format_bytes(1048552, BytesStyle::Rounded), "1.00 MiB");
  EXPECT_EQ(format_bytes(1048552, BytesStyle::Text), "1024 KiB");
  EXPECT_EQ(format_bytes(10236, BytesStyle::Rounded), "10.0 KiB");
  EXPECT_EQ(format_bytes(10236, BytesStyle::Text), "10.00 KiB");
  // The SVG stops at TiB.
  EXPECT_EQ(format_bytes(uint64_t{3} << 50, BytesStyle::Fixed2), "3072.00 TiB");
  EXPECT_EQ(format_bytes(uint64_t{3} << 50, BytesStyle::Text), "3.00 PiB");
}

TEST(Format, ReportDurationsHaveThreeDecimals) {
  EXPECT_EQ(format_duration(0, DurationStyle::Fixed3), "0 ns");
  EXPECT_EQ(format_duration(999, DurationStyle::Fixed3), "999 ns");
  EXPECT_EQ(format_duration(1500, DurationStyle::Fixed3), "1.500 us");
  EXPECT_EQ(format_duration(12'500'000, DurationStyle::Fixed3), "12.500 ms");
  EXPECT_EQ(format_duration(1'234'567'890, DurationStyle::Fixed3), "1.235 s");
  EXPECT_EQ(format_duration(1'234'567'890), "1.23 s");
}

TEST(Format, CountsHaveThousandsSeparators) {
  EXPECT_EQ(format_count(262734400), "262,734,400");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count_delta(-1234), "-1,234");
}

}  // namespace
}  // namespace memtide::analysis
