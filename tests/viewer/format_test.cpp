#include <gtest/gtest.h>

#include "viewer/format.h"

namespace memtide::viewer {
namespace {

TEST(FormatBytes, SmallSizesInBytes) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1), "1 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
}

TEST(FormatBytes, PowersOf1024WithThreeDigits) {
  EXPECT_EQ(format_bytes(1024), "1.00 KiB");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(10 * 1024 + 512), "10.5 KiB");
  EXPECT_EQ(format_bytes(200 * 1024), "200 KiB");
  EXPECT_EQ(format_bytes(uint64_t{3} << 20), "3.00 MiB");
  EXPECT_EQ(format_bytes(uint64_t{5} << 30), "5.00 GiB");
  EXPECT_EQ(format_bytes(uint64_t{2} << 40), "2.00 TiB");
}

TEST(FormatBytes, NeverPrints1024OfAUnit) {
  EXPECT_EQ(format_bytes(1024 * 1024 - 1), "1.00 MiB");
  EXPECT_EQ(format_bytes((uint64_t{1} << 30) - 1), "1.00 GiB");
}

TEST(FormatBytes, DeltaHasASign) {
  EXPECT_EQ(format_bytes_delta(0), "0 B");
  EXPECT_EQ(format_bytes_delta(2048), "+2.00 KiB");
  EXPECT_EQ(format_bytes_delta(-512), "-512 B");
  EXPECT_EQ(format_bytes_delta(INT64_MIN), "-8.00 EiB");
}

TEST(FormatDuration, PicksTheUnit) {
  EXPECT_EQ(format_duration(0), "0 s");
  EXPECT_EQ(format_duration(850), "850 ns");
  EXPECT_EQ(format_duration(12'000), "12.0 us");
  EXPECT_EQ(format_duration(250'000'000), "250 ms");
  EXPECT_EQ(format_duration(1'500'000'000), "1.50 s");
  EXPECT_EQ(format_duration(12'340'000'000), "12.3 s");
  EXPECT_EQ(format_duration(200'000'000'000), "3 min 20 s");
  EXPECT_EQ(format_duration(7'260'000'000'000), "2 h 1 min");
}

TEST(FormatDuration, RoundingMovesToTheNextUnit) {
  EXPECT_EQ(format_duration(999'999), "1.00 ms");
  EXPECT_EQ(format_duration(999'999'999), "1.00 s");
}

TEST(FormatTimeTick, UsesTheStepsUnitAndDecimals) {
  EXPECT_EQ(format_time_tick(2'000'000'000, 1'000'000'000), "2 s");
  EXPECT_EQ(format_time_tick(2'500'000'000, 500'000'000), "2.5 s");
  EXPECT_EQ(format_time_tick(500'000'000, 500'000'000), "0.5 s");
  EXPECT_EQ(format_time_tick(40'000'000, 20'000'000), "40 ms");
  EXPECT_EQ(format_time_tick(1'500, 500), "1.5 us");
}

TEST(FormatCount, ThousandsSeparators) {
  EXPECT_EQ(format_count(0), "0");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count(1000), "1,000");
  EXPECT_EQ(format_count(1234567), "1,234,567");
}

TEST(FormatCount, DeltaHasASign) {
  EXPECT_EQ(format_count_delta(0), "0");
  EXPECT_EQ(format_count_delta(1234), "+1,234");
  EXPECT_EQ(format_count_delta(-7), "-7");
  EXPECT_EQ(format_count_delta(INT64_MIN), "-9,223,372,036,854,775,808");
}

TEST(FormatShare, Percentages) {
  EXPECT_EQ(format_share(0, 0), "0 %");
  EXPECT_EQ(format_share(1, 1), "100 %");
  EXPECT_EQ(format_share(1, 8), "12.5 %");
  EXPECT_EQ(format_share(1, 200), "0.50 %");
  EXPECT_EQ(format_share(1, 1'000'000), "<0.01 %");
}

TEST(NiceStep, OneTwoFive) {
  EXPECT_EQ(nice_step(1), 1u);
  EXPECT_EQ(nice_step(3), 5u);
  EXPECT_EQ(nice_step(7), 10u);
  EXPECT_EQ(nice_step(150), 200u);
  EXPECT_EQ(nice_step(2'000'000'001), 5'000'000'000u);
  EXPECT_EQ(nice_step_bytes(1000), 1024u);
  EXPECT_EQ(nice_step_bytes(3 << 20), uint64_t{4} << 20);
}

}  // namespace
}  // namespace memtide::viewer
