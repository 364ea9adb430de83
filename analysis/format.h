// Numbers as people read them, for every reader (the CLI's text, the viewer, the SVG
// flamegraph): sizes in binary units (B, KiB, MiB, ...), durations, counts with thousands
// separators. Pure functions.
//
// The readers have always printed sizes with slightly different digits; each keeps its own
// style, so that their outputs stay as they were:
//   Rounded  the viewer: three significant digits, rounded before the unit and the digits are
//            chosen ("1.00 MiB" for 1023.9 KiB, "10.0 KiB" for 9.996 KiB);
//   Text     the CLI's reports: three significant digits of the unrounded value ("1024 KiB",
//            "10.00 KiB" for those);
//   Fixed2   the SVG flamegraph: two decimals, up to TiB ("1.50 KiB").
#pragma once

#include <cstdint>
#include <string>

namespace memtide::analysis {

enum class BytesStyle : uint8_t { Rounded, Text, Fixed2 };

// "0 B", "1023 B", "1.00 KiB", "12.5 MiB", "1.23 GiB"; the digits as `style` says (above).
std::string format_bytes(uint64_t bytes, BytesStyle style = BytesStyle::Rounded);
// A signed difference: "+1.00 KiB", "-512 B", "0 B".
std::string format_bytes_delta(int64_t delta);

// Rounded: "0 s", "850 ns", "12.0 us", "250 ms", "1.50 s", "3 min 20 s", "2 h 5 min" (the viewer).
// Fixed3: "850 ns", "12.000 us", "1.234 s" (the CLI's reports).
enum class DurationStyle : uint8_t { Rounded, Fixed3 };
std::string format_duration(uint64_t ns, DurationStyle style = DurationStyle::Rounded);

// "1,234,567".
std::string format_count(uint64_t n);
// A signed difference of counts: "+1,234", "-7", "0".
std::string format_count_delta(int64_t delta);

}  // namespace memtide::analysis
