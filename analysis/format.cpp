#include "analysis/format.h"

#include <cinttypes>
#include <cstdio>
#include <limits>

namespace memtide::analysis {
namespace {

// When a size moves up a unit, the largest unit, and below which values it takes two or one
// decimals (none above).
struct BytesRule {
  double carry;
  int max_unit;
  double two_decimals_below, one_decimal_below;
};

constexpr double kAlways = std::numeric_limits<double>::infinity();

BytesRule rule_of(BytesStyle s) {
  switch (s) {
    // 1023.9 KiB would print as "1024 KiB": move up a unit before rounding can reach 1024, and
    // pick the digits by the rounded value.
    case BytesStyle::Rounded: return {1023.5, 6, 9.995, 99.95};
    case BytesStyle::Text: return {1024, 6, 10, 100};
    case BytesStyle::Fixed2: return {1024, 4, kAlways, kAlways};
  }
  return {1024, 6, 10, 100};
}

// Three significant digits: 1.23, 12.3, 123.
const char* digits_format(double v) { return v < 9.995 ? "%.2f %s" : v < 99.95 ? "%.1f %s" : "%.0f %s"; }

std::string printf_string(const char* fmt, double v, const char* unit) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v, unit);
  return buf;
}

uint64_t magnitude(int64_t d) { return d < 0 ? 0 - static_cast<uint64_t>(d) : static_cast<uint64_t>(d); }

}  // namespace

std::string format_bytes(uint64_t bytes, BytesStyle style) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  const BytesRule r = rule_of(style);
  double v = static_cast<double>(bytes) / 1024.0;
  int u = 1;
  while (v >= r.carry && u < r.max_unit) {
    v /= 1024.0;
    ++u;
  }
  return printf_string(v < r.two_decimals_below ? "%.2f %s" : v < r.one_decimal_below ? "%.1f %s" : "%.0f %s", v,
                       units[u]);
}

std::string format_bytes_delta(int64_t delta) {
  if (delta == 0) return "0 B";
  return (delta < 0 ? "-" : "+") + format_bytes(magnitude(delta));
}

std::string format_duration(uint64_t ns, DurationStyle style) {
  const double v = static_cast<double>(ns);
  if (style == DurationStyle::Fixed3) {
    if (ns >= 1'000'000'000u) return printf_string("%.3f %s", v / 1e9, "s");
    if (ns >= 1'000'000u) return printf_string("%.3f %s", v / 1e6, "ms");
    if (ns >= 1'000u) return printf_string("%.3f %s", v / 1e3, "us");
    return std::to_string(ns) + " ns";
  }
  if (ns == 0) return "0 s";
  if (ns < 1000) return std::to_string(ns) + " ns";
  if (ns < 999'500) return printf_string(digits_format(v / 1e3), v / 1e3, "us");
  if (ns < 999'500'000) return printf_string(digits_format(v / 1e6), v / 1e6, "ms");
  if (ns < 99'950'000'000ull) return printf_string(digits_format(v / 1e9), v / 1e9, "s");
  const uint64_t s = (ns + 500'000'000) / 1'000'000'000;
  char buf[64];
  if (s < 3600)
    std::snprintf(buf, sizeof buf, "%" PRIu64 " min %" PRIu64 " s", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%" PRIu64 " h %" PRIu64 " min", s / 3600, s / 60 % 60);
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
  return (delta < 0 ? "-" : "+") + format_count(magnitude(delta));
}

}  // namespace memtide::analysis
