// Sizes in bytes as every memtide option takes them (the recorder's MEMTIDE_MAX_SIZE, the
// limits of `memtide check`): one grammar, one meaning.
//   4096        bytes (a bare number; also 4096B)
//   500KB 500MB 2GB 1TB       decimal: 10^3, 10^6, 10^9, 10^12 bytes
//   64KiB 10MiB 2GiB 1TiB     binary: 2^10, 2^20, 2^30, 2^40 bytes
//   1.5GiB      a fraction with a unit (rounded to the nearest byte)
// Units are case-insensitive; no space between number and unit. A unit letter alone (64k, 2G)
// is refused: it means 1000s to some and 1024s to others.
// Header-only, allocation-free and without floating point: the recorder parses its options
// inside the host process before its allocator is usable.
#pragma once

#include <cstdint>

namespace memtide::fmt {

// Parses `s`. Returns nullptr on success (the size in `out`), else a static description of
// the problem.
inline const char* parse_size(const char* s, uint64_t& out) {
  constexpr const char* kExpected = "expected a size such as 4096, 500MB (10^6 bytes each) or 10GiB (2^30)";
  if (!s || *s < '0' || *s > '9') return kExpected;
  uint64_t whole = 0;
  for (; *s >= '0' && *s <= '9'; ++s) {
    if (whole > (UINT64_MAX - 9) / 10) return "out of range";
    whole = whole * 10 + static_cast<uint64_t>(*s - '0');
  }
  uint64_t frac = 0, frac_scale = 1;  // the digits after the point, as frac / frac_scale
  if (*s == '.') {
    ++s;
    if (*s < '0' || *s > '9') return kExpected;
    for (; *s >= '0' && *s <= '9'; ++s) {
      if (frac_scale < 1000000000000000000ull) {  // 18 digits are plenty
        frac = frac * 10 + static_cast<uint64_t>(*s - '0');
        frac_scale *= 10;
      }
    }
  }
  auto lower = [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c); };
  uint64_t unit = 1;
  const char c = lower(*s);
  if (c == 'k' || c == 'm' || c == 'g' || c == 't') {
    const int power = c == 'k' ? 1 : c == 'm' ? 2 : c == 'g' ? 3 : 4;
    ++s;
    const bool binary = lower(*s) == 'i';
    if (binary) ++s;
    if (lower(*s) != 'b') return "a unit letter alone is ambiguous: write KB, MB, GB (10^3, 10^6, 10^9) or KiB, MiB, GiB (2^10, 2^20, 2^30)";
    ++s;
    for (int i = 0; i < power; ++i) unit *= binary ? 1024 : 1000;
  } else if (c == 'b') {
    ++s;
  }
  if (*s) return kExpected;
  if (frac_scale > 1 && unit == 1) return "a fraction of a byte (fractions go with a unit: 1.5GiB)";
  if (whole > UINT64_MAX / unit) return "out of range";
  uint64_t bytes = whole * unit;
  if (frac) {
    // frac / frac_scale * unit, rounded (the product in 128 bits).
    const unsigned __int128 part = (static_cast<unsigned __int128>(frac) * unit + frac_scale / 2) / frac_scale;
    if (part > UINT64_MAX - bytes) return "out of range";
    bytes += static_cast<uint64_t>(part);
  }
  out = bytes;
  return nullptr;
}

}  // namespace memtide::fmt
