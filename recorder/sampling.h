// Sampled recording in the recorder: which allocations are recorded, and which frees.
//
// Allocations: each thread counts its allocated bytes down from an exponentially distributed
// draw (mean: the interval); an allocation that takes the count to zero or below is sampled and
// the count drawn again. Unsampled allocations cost a thread-local subtraction and a branch.
// Frees: only those of sampled blocks are recorded. The addresses of the live sampled blocks sit
// in a table behind a filter of 64 Ki one-byte counters (one per hash bucket, 64 KiB, mostly in
// cache): a free whose counter is zero, the common case, is not sampled and costs one load.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "recorder/base.h"

namespace memtide::rec::sampling {


// The mean interval in bytes; 0: exact recording (every event).
extern MT_HIDDEN std::atomic<uint64_t> g_interval;

struct ThreadSampler {
  int64_t left;     // bytes to the next sample point
  uint32_t epoch;   // g_epoch when `left` was drawn
  uint64_t rng;     // xorshift state
};
extern MT_TLS ThreadSampler tls_sampler;

// Sets the interval at start-up (from MEMTIDE_SAMPLE) and the seed (MEMTIDE_SAMPLE_SEED, 0:
// from the clock and the thread).
void configure(uint64_t interval, uint64_t seed);
// The program's memtide_sample(): switches between exact (0) and sampled recording at run time.
// Returns the interval in effect, which may differ from `interval` (clamped).
uint64_t set_interval(uint64_t interval);

MT_ALWAYS_INLINE bool active() { return g_interval.load(std::memory_order_relaxed) != 0; }

uint64_t take_slow(size_t size);
// In sampled mode: 0 when an allocation of `size` bytes at `p` is not sampled, else the bytes
// it stands for (its SampleWeight). A failed allocation (null) holds no sample point: it is
// looked at only when it would have crossed one, and its bytes are then given back.
MT_ALWAYS_INLINE uint64_t take(const void* p, size_t size) {
  ThreadSampler& t = tls_sampler;
  t.left -= static_cast<int64_t>(size);
  if (MT_LIKELY(t.left > 0)) return 0;
  if (MT_UNLIKELY(!p)) {
    t.left += static_cast<int64_t>(size);
    return 0;
  }
  return take_slow(size);
}

// Notes a sampled block's address (after its allocation is recorded).
void insert(uintptr_t addr);
// Whether the free of `addr` is to be recorded in sampled mode: a live sampled block (which it
// forgets), or a block live since an exact period whose address is kept (formats/sampling.h).
bool release_slow(uintptr_t addr);
extern MT_HIDDEN std::atomic<uint8_t> g_filter[];
extern std::atomic<bool> g_exact_blocks;  // an exact period ended: its blocks may still be live
extern std::atomic<uint64_t> g_live;      // addresses in the table
inline constexpr unsigned kFilterBits = 16;
MT_ALWAYS_INLINE unsigned filter_index(uintptr_t addr) {
  return static_cast<unsigned>((addr * 0x9E3779B97F4A7C15ULL) >> (64 - kFilterBits));
}
MT_ALWAYS_INLINE bool filter_hit(uintptr_t addr) {
  return g_filter[filter_index(addr)].load(std::memory_order_relaxed) != 0;
}

// What a free asks before it is recorded, one byte kept from the interval, g_exact_blocks and
// g_live (under the table's lock):
//   kFreeAll      exact mode, no sampled block live: every free is recorded, nothing asked;
//   kFreeSampled  sampled mode after no exact period: recorded if the filter and the table know
//                 the address (the common answer, "no", costs the filter's load);
//   kFreeChecked  the rest (record_free_checked).
enum FreeMode : uint8_t { kFreeAll = 0, kFreeSampled = 1, kFreeChecked = 2 };
extern MT_HIDDEN std::atomic<uint8_t> g_free_mode;
// kFreeChecked: in sampled mode, a sampled block or one kept since an exact period; in exact
// mode every free, forgetting a sampled block.
bool record_free_checked(uintptr_t addr);
// Whether the free of `addr` is recorded; forgets a sampled block.
MT_ALWAYS_INLINE bool record_free(uintptr_t addr) {
  const uint8_t mode = g_free_mode.load(std::memory_order_relaxed);
  if (MT_LIKELY(mode == kFreeAll)) return true;
  if (MT_LIKELY(mode == kFreeSampled)) return filter_hit(addr) && release_slow(addr);
  return record_free_checked(addr);
}

// fork: the table's lock held across fork, and initialised anew in the child.
void fork_prepare();
void fork_parent();
void fork_child();
// A new trace (begin_trace) knows none of the last one's blocks: the table and its filter are
// emptied, and whether the recording starts exact follows the interval now configured.
void trace_begins();

}  // namespace memtide::rec::sampling
