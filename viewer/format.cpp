#include "viewer/format.h"

#include <cinttypes>
#include <cstdio>

namespace memtide::viewer {

std::string format_time_tick(uint64_t ns, uint64_t step_ns) {
  char buf[64];
  const double v = static_cast<double>(ns);
  // Pick the unit of the step, and enough decimals to tell neighbouring ticks apart.
  auto decimals = [](uint64_t step, uint64_t unit) {
    int d = 0;
    for (uint64_t u = unit; d < 3 && step % u != 0; u /= 10) ++d;
    return d;
  };
  // A unit that keeps the labels short: seconds once ticks are 100 ms apart, and so on.
  if (step_ns >= 100'000'000 || ns >= 10'000'000'000ull) {
    std::snprintf(buf, sizeof buf, "%.*f s", decimals(step_ns, 1'000'000'000), v / 1e9);
  } else if (step_ns >= 100'000) {
    std::snprintf(buf, sizeof buf, "%.*f ms", decimals(step_ns, 1'000'000), v / 1e6);
  } else if (step_ns >= 100) {
    std::snprintf(buf, sizeof buf, "%.*f us", decimals(step_ns, 1'000), v / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%" PRIu64 " ns", ns);
  }
  return buf;
}

std::string format_share(uint64_t part, uint64_t whole) {
  if (whole == 0) return "0 %";
  if (part >= whole) return "100 %";
  const double p = 100.0 * static_cast<double>(part) / static_cast<double>(whole);
  if (part == 0) return "0 %";
  if (p < 0.01) return "<0.01 %";
  char buf[32];
  std::snprintf(buf, sizeof buf, p < 9.995 ? "%.2f %%" : "%.1f %%", p);
  return buf;
}

uint64_t nice_step(uint64_t raw) {
  if (raw <= 1) return 1;
  uint64_t p = 1;
  while (p <= UINT64_MAX / 10 && p * 10 <= raw) p *= 10;
  for (uint64_t m : {1, 2, 5, 10})
    if (p * m >= raw) return p * m;
  return p * 10;
}

uint64_t nice_step_bytes(uint64_t raw) {
  if (raw <= 1) return 1;
  uint64_t unit = 1;
  while (unit <= UINT64_MAX / 1024 && unit * 1024 <= raw) unit *= 1024;
  // Within a unit: 1, 2, 4, ..., 512 of it (powers of two read well in KiB/MiB).
  for (uint64_t m = 1; m <= 1024; m *= 2)
    if (unit * m >= raw) return unit * m;
  return unit * 1024;
}

}  // namespace memtide::viewer
