#include "viewer/format.h"

#include <cinttypes>
#include <cstdio>

namespace memtide::viewer {
namespace {

std::string printf_string(const char* fmt, double v, const char* unit) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v, unit);
  return buf;
}

// Three significant digits: 1.23, 12.3, 123.
const char* digits_format(double v) { return v < 9.995 ? "%.2f %s" : v < 99.95 ? "%.1f %s" : "%.0f %s"; }

}  // namespace

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static const char* const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes) / 1024.0;
  int u = 0;
  // 1023.9 KiB would print as "1024 KiB": move up a unit before rounding can reach 1024.
  while (v >= 1023.5 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  return printf_string(digits_format(v), v, units[u]);
}

std::string format_bytes_delta(int64_t delta) {
  if (delta == 0) return "0 B";
  const uint64_t mag = delta < 0 ? 0 - static_cast<uint64_t>(delta) : static_cast<uint64_t>(delta);
  return (delta < 0 ? "-" : "+") + format_bytes(mag);
}

std::string format_duration(uint64_t ns) {
  if (ns == 0) return "0 s";
  if (ns < 1000) return std::to_string(ns) + " ns";
  const double v = static_cast<double>(ns);
  if (ns < 999'500) return printf_string(digits_format(v / 1e3), v / 1e3, "us");
  if (ns < 999'500'000) return printf_string(digits_format(v / 1e6), v / 1e6, "ms");
  if (ns < 99'950'000'000ull) return printf_string(digits_format(v / 1e9), v / 1e9, "s");
  const uint64_t s = (ns + 500'000'000) / 1'000'000'000;
  char buf[64];
  if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%" PRIu64 " min %" PRIu64 " s", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%" PRIu64 " h %" PRIu64 " min", s / 3600, s / 60 % 60);
  }
  return buf;
}

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

std::string format_count(uint64_t n) {
  std::string digits = std::to_string(n), out;
  out.reserve(digits.size() + digits.size() / 3);
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string format_count_delta(int64_t delta) {
  if (delta == 0) return "0";
  const uint64_t mag = delta < 0 ? 0 - static_cast<uint64_t>(delta) : static_cast<uint64_t>(delta);
  return (delta < 0 ? "-" : "+") + format_count(mag);
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
