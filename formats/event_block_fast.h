// EventDecoder's fast path (internal to formats/event_block*.cpp): a run of consecutive Allocs and
// Frees decoded straight into MergedEvents, with two ways of extracting the varints.
//
//   - event_block.cpp: the portable extraction (SSE2 masks and shifts), the reference;
//   - event_block_bmi2.cpp: the same run with BMI2 (pext, bzhi), chosen at run time when the CPU has
//     it and executes pext fast (EventDecoder::Impl).
//
// Everything here is in an anonymous namespace on purpose: each including file compiles its
// own copy with its own target (MEMTIDE_FAST_TARGET, defined before the include), and an inline
// function with external linkage would be merged by the linker across the two, so that code
// built for BMI2 could end up running on a CPU without it. The helpers below therefore do not
// call the inline functions of wire.h either.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "formats/decoder.h"
#include "formats/event_block.h"

#ifndef MEMTIDE_FAST_TARGET
#error "define MEMTIDE_FAST_TARGET (the target attribute of the fast path, or nothing) before the include"
#endif

namespace memtide::fmt::detail {

// event_block_bmi2.cpp: the BMI2 run, or nullptr when this build has none (not x86-64).
FastEventsFn bmi2_fast_events();
// Whether the CPU has BMI1 and BMI2 and its pext is not microcoded (AMD before Zen 3 takes
// hundreds of cycles for one: the portable path is faster there).
bool cpu_has_fast_bmi2();

namespace {

[[gnu::always_inline]] MEMTIDE_FAST_TARGET inline uint64_t fast_load64(const uint8_t* p) {
  uint64_t v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

// The event tag (event_block.h: 0x40 + api for an Alloc, 0x60 + api for a Free) of each wire tag of
// the fast path (0x40..0xFF).
inline constexpr auto kFastEventTag = [] {
  struct Table {
    uint8_t t[256] = {};
    constexpr uint8_t operator[](uint8_t i) const { return t[i]; }
  } x;
  for (unsigned tag = kTagAllocBase; tag < 256; ++tag) {
    const auto g = static_cast<uint8_t>(tag);
    x.t[tag] = is_alloc_recent_tag(g)  ? static_cast<uint8_t>(kTagAllocBase + static_cast<uint8_t>(recent_alloc_api(g)))
               : is_free_recent_tag(g) ? static_cast<uint8_t>(kTagFreeBase + static_cast<uint8_t>(recent_free_api(g)))
                                       : g;
  }
  return x;
}();

// `Varints::get(p, v, len)`: the first four varints at `p` (32 readable bytes), each of at most
// 8 bytes: v[k] their values, len[k] the bytes taken by varints 0..k; false when they do not
// fit. (For a Free the varints past its end are garbage, unused.)
// The FastEventsFn of event_block.h with the varint extraction `Varints`.
template <class Varints>
[[gnu::always_inline]] MEMTIDE_FAST_TARGET inline const uint8_t* fast_events_run(const uint8_t* p, const uint8_t* end,
                                                                                 StreamRegs& r, MergedEvent* out,
                                                                                 std::size_t room, std::size_t& written) {
  uint64_t time = r.time, addr = r.addr;
  // The rings' slots stay in memory, their push counts in registers (AddrRings::get and push
  // with the ring chosen per record would go through memory for the count).
  uint64_t (&slot)[2][kRingSize] = r.ring.slot;
  uint32_t pushed_a = r.ring.pos[0], pushed_f = r.ring.pos[1];
  std::size_t n = 0;
  // Apart from the two-byte short Free below, without a branch on Alloc or Free, full or short
  // (they alternate unpredictably): four varints are decoded in every case. (That branch paid
  // on the churn and worker traces, where half of all records take it: their reports took
  // 13-17% less time; docs/ARCHITECTURE.md, "Decoded once".)
  while (n < room && static_cast<std::size_t>(end - p) > 4 * wire::kMaxVarint) {
    const uint8_t tag = *p;
    if (tag < kTagAllocBase) break;
    if (tag >= kTagFreeRecent && p[1] < 0x80) {
      // A short Free with a one-byte dt, half of the records of a typical trace (each freed
      // block recently allocated in the same thread): two bytes, no varint to extract.
      time += p[1];
      addr = slot[0][(pushed_a - 1 - (tag & (kRingSize - 1))) & (kRingSize - 1)];
      slot[1][pushed_f++ & (kRingSize - 1)] = addr;
      out[n++] = {time, addr, 0, 0, kFastEventTag[tag]};
      p += 2;
      continue;
    }
    uint64_t v[4];
    unsigned len[4];
    if (!Varints::get(p + 1, v, len)) break;
    const bool recent = tag >= kTagAllocRecent;
    const bool is_alloc = (tag < kTagFreeBase) | (recent & (tag < kTagFreeRecent));
    const bool munmap = tag == kTagFreeBase + static_cast<uint8_t>(Api::Munmap);
    // Full Alloc: dt, daddr, size, stack. Short Alloc: dt, size, stack. Full Free: dt, daddr
    // (munmap: length). Short Free: dt.
    const uint64_t size = recent ? v[1] : v[2];
    const uint64_t stack = recent ? v[2] : v[3];
    if (is_alloc && stack > UINT32_MAX) break;
    time += v[0];
    const uint64_t full = addr + ((v[1] >> 1) ^ (uint64_t{0} - (v[1] & 1)));  // unzigzag
    // A short Alloc takes its address from the Free ring (1), a short Free from the Alloc ring
    // (0); the record's address goes into the other one.
    const uint32_t from_pos = is_alloc ? pushed_f : pushed_a, to_pos = is_alloc ? pushed_a : pushed_f;
    addr = recent ? slot[is_alloc][(from_pos - 1 - (tag & (kRingSize - 1))) & (kRingSize - 1)] : full;
    slot[!is_alloc][to_pos & (kRingSize - 1)] = addr;
    pushed_a += is_alloc;
    pushed_f += !is_alloc;
    out[n++] = {time, addr, is_alloc || munmap ? size : 0, is_alloc ? static_cast<uint32_t>(stack) : 0u,
                kFastEventTag[tag]};
    p += 1 + len[is_alloc ? (recent ? 2 : 3) : (recent ? 0 : munmap ? 2 : 1)];
  }
  r.time = time;
  r.addr = addr;
  r.ring.pos[0] = pushed_a;
  r.ring.pos[1] = pushed_f;
  written = n;
  return p;
}

}  // namespace
}  // namespace memtide::fmt::detail
