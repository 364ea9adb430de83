// Human-readable numbers for the viewer: sizes, durations and counts as every reader writes
// them (analysis/format.h, in its Rounded style), plus what only the viewer draws: axis
// labels and steps, shares in percent. Pure functions, unit-tested in
// tests/viewer/format_test.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "analysis/format.h"

namespace memtide::viewer {

// "0 B", "1023 B", "1.00 KiB", "12.5 MiB", "1.23 GiB", "4.00 TiB"; three significant digits.
using analysis::format_bytes;
// "+1.00 KiB", "-512 B", "0 B".
using analysis::format_bytes_delta;
// "0 s", "850 ns", "12.0 us", "250 ms", "1.50 s", "12.3 s", "3 min 20 s".
using analysis::format_duration;
// "1,234,567"; "+1,234", "-7", "0".
using analysis::format_count;
using analysis::format_count_delta;
// Axis labels: the same units, with as few digits as the step between ticks needs.
std::string format_time_tick(uint64_t ns, uint64_t step_ns);
// "12.3 %", "0.01 %", "<0.01 %", "100 %".
std::string format_share(uint64_t part, uint64_t whole);

// A "nice" axis step (1, 2 or 5 times a power of ten, or of 1024 for sizes) not smaller than
// `raw`.
uint64_t nice_step(uint64_t raw);
uint64_t nice_step_bytes(uint64_t raw);

}  // namespace memtide::viewer
