// EventDecoder's fast path with BMI2 (see event_block_fast.h): each varint is one bzhi (its bytes)
// and one pext (their 7-bit groups) instead of the portable path's ten masks and shifts.
//
// Only the functions below are built for BMI2, with a target attribute rather than -mbmi2 for
// the file: with the flag, every inline function this file instantiates from the headers
// (std::vector, PodArray, ...) would be built for BMI2 too, and the linker keeps one copy of
// each, possibly this one, for the whole program; the fuzz build also compiles all formats
// sources in one command without per-file flags. The rest of the build stays baseline x86-64.
#include <cstddef>
#include <cstdint>

#include "formats/event_block.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define MEMTIDE_FAST_TARGET __attribute__((target("bmi,bmi2")))
#else
#define MEMTIDE_FAST_TARGET
#endif
#include "formats/event_block_fast.h"

namespace memtide::fmt::detail {

#if defined(__x86_64__)
namespace {

struct Bmi2Varints {
  [[gnu::always_inline]] MEMTIDE_FAST_TARGET static inline bool get(const uint8_t* p, uint64_t v[4], unsigned len[4]) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
    uint32_t stops =
        ~(static_cast<uint32_t>(_mm_movemask_epi8(lo)) | static_cast<uint32_t>(_mm_movemask_epi8(hi)) << 16);
    // The last byte of each varint (32 when there is no such stop: the checks below fail).
    const unsigned e0 = _tzcnt_u32(stops);
    stops = _blsr_u32(stops);
    const unsigned e1 = _tzcnt_u32(stops);
    stops = _blsr_u32(stops);
    const unsigned e2 = _tzcnt_u32(stops);
    stops = _blsr_u32(stops);
    const unsigned e3 = _tzcnt_u32(stops);
    // Four stops, each varint at most 8 bytes (so the loads below stay within the 32 bytes).
    if ((e3 > 31) | (e0 > 7) | (e1 - e0 > 8) | (e2 - e1 > 8) | (e3 - e2 > 8)) return false;
    constexpr uint64_t kGroups = 0x7f7f7f7f7f7f7f7full;
    v[0] = _pext_u64(_bzhi_u64(fast_load64(p), 8 * (e0 + 1)), kGroups);
    v[1] = _pext_u64(_bzhi_u64(fast_load64(p + e0 + 1), 8 * (e1 - e0)), kGroups);
    v[2] = _pext_u64(_bzhi_u64(fast_load64(p + e1 + 1), 8 * (e2 - e1)), kGroups);
    v[3] = _pext_u64(_bzhi_u64(fast_load64(p + e2 + 1), 8 * (e3 - e2)), kGroups);
    len[0] = e0 + 1;
    len[1] = e1 + 1;
    len[2] = e2 + 1;
    len[3] = e3 + 1;
    return true;
  }
};

MEMTIDE_FAST_TARGET const uint8_t* fast_events_bmi2(const uint8_t* p, const uint8_t* end, StreamRegs& r,
                                                    MergedEvent* out, std::size_t room, std::size_t& written) {
  return fast_events_run<Bmi2Varints>(p, end, r, out, room, written);
}

}  // namespace

FastEventsFn bmi2_fast_events() { return fast_events_bmi2; }

bool cpu_has_fast_bmi2() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  if (!(b & bit_BMI) || !(b & bit_BMI2)) return false;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
  const bool amd = b == signature_AMD_ebx && c == signature_AMD_ecx && d == signature_AMD_edx;
  if (!amd) return true;
  // AMD: pext is microcoded before Zen 3 (family 19h).
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  unsigned family = (a >> 8) & 0xf;
  if (family == 0xf) family += (a >> 20) & 0xff;
  return family >= 0x19;
}
#else
FastEventsFn bmi2_fast_events() { return nullptr; }
bool cpu_has_fast_bmi2() { return false; }
#endif

}  // namespace memtide::fmt::detail
