// The event clock (CLOCK_MONOTONIC, read through the TSC once calibrated) and the epochs that
// let a lone thread's events reuse a time instead of reading it (event_time, stream.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>

#include "recorder/base.h"

namespace memtide::rec {

inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The event clock: CLOCK_MONOTONIC nanoseconds. Where the TSC is invariant and the kernel
// itself keeps time with it (so it is synchronised across cores), the writer thread calibrates
// it against CLOCK_MONOTONIC, and from then on events read the TSC (cheaper than the system
// call's clock: bench/README.md, "Other measurements") and convert with that calibration. Two steps: a first calibration over the writer's
// first few milliseconds (so that a busy program's first events do not pay for the system
// call), then a finer one over 100 ms, anchored where the first one is at that point, so that
// time goes on without a jump (it may then differ from CLOCK_MONOTONIC by the first one's error
// over 100 ms, a few microseconds, for good). Each step publishes a new, immutable TscParams.
struct TscParams {
  uint64_t anchor_tsc = 0, anchor_ns = 0;
  uint64_t mult = 0;  // ns per tick, 32.32 fixed point
  uint64_t at(uint64_t tsc) const {
    return anchor_ns + static_cast<uint64_t>((static_cast<unsigned __int128>(tsc - anchor_tsc) * mult) >> 32);
  }
};
struct TscClock {
  std::atomic<const TscParams*> params{nullptr};  // nullptr: not calibrated (yet)
};
extern TscClock g_tsc;
// Finds whether the TSC may be used (once; from the thread that starts the writer).
void tsc_probe();
void tsc_calibrate_begin();
// Called by the writer as time passes; false once the calibration is over (done or given up).
bool tsc_calibrate_step();
uint64_t tsc_calibrate_due();  // about when the next step is (now_ns)

// The TSC is read after every earlier instruction has completed (LFENCE; the kernel's own
// clock orders its reading too): a bare RDTSC may execute ahead of the loads before it, and a free timed before
// the load that handed its thread the pointer, or an allocation timed before the allocator's
// own synchronisation, would then be ordered before the event it follows on another thread
// (`Ordering.CrossThreadAddressReuseReplaysExactly` fails without the fence).
// MEMTIDE_UNORDERED_TSC_FOR_BENCH builds a library without the fence, only to measure the
// fence's share of an event's cost (bench/README.md, "Threads, exact mode"): its traces may
// order events of different threads wrongly.
inline uint64_t now_ns() {
  if (const TscParams* p = g_tsc.params.load(std::memory_order_acquire); MT_LIKELY(p != nullptr)) {
#ifndef MEMTIDE_UNORDERED_TSC_FOR_BENCH
    __builtin_ia32_lfence();
#endif
    return p->at(__builtin_ia32_rdtsc());
  }
  return monotonic_ns();
}

// Event times. Reading the clock is a large part of an event's cost. While only
// one thread records, ordering across threads does not depend on times, so up to
// kReuseEvents Allocs and Frees in a row after a clock reading take the time of the record
// before them (dt 0, which also compresses better) instead of reading the clock. The writer
// bumps g_clock_epoch at each wake (at least every kClockTickNs, unless it idles: kEpochIdle)
// and before each pass takes its watermark's time; a changed epoch makes the next event read
// the clock, so a reused time is never older than the writer's last wake, and a record begun
// after a pass's barrier is timed after that pass's watermark.
//
// "Only one thread records" is decided per tick, not once for the run: each tick starts with no
// owner, the first thread to time an event in it becomes the owner (a compare-and-swap of the
// epoch word, once per tick), and only the owner reuses times. Any other thread that times an
// event in the same tick sets kEpochShared before it reads the clock, which ends the owner's
// reuse (its epoch no longer matches) until the next tick. A free by one thread is therefore
// never timed after the allocation that reuses the block in another: if the other thread's
// event came first in the tick, the owner sees the shared bit (the block reached it through
// the allocator's own synchronisation, after the bit was set); if the owner's reused time was
// read in an earlier tick, it was read before the tick's bump, and the other thread's clock
// reading is after it. A worker whose main thread only waits for its pool then pays for one
// clock reading per kReuseEvents events, as a single-threaded program does.
//
// The epoch word: kEpochShared, kEpochIdle, the owner (its stream index plus one; 0: none yet)
// and the tick count.
inline constexpr uint64_t kEpochShared = 1ull << 63;
// Set while the writer idles (wakes up to kMaxIdleLevel doublings less often, writer.cpp): no
// event reuses a time then, since the next wake may be far.
inline constexpr uint64_t kEpochIdle = 1ull << 62;
inline constexpr unsigned kOwnerShift = 33;
inline constexpr uint64_t kOwnerMask = ((1ull << 29) - 1) << kOwnerShift;
inline constexpr uint64_t kTickMask = (1ull << kOwnerShift) - 1;
// Streams that never own the time (the process stream, index 0, which several threads share;
// an index past what the owner field holds) set kEpochShared before every event's time instead.
inline constexpr uint64_t kMaxOwnerIndex = (1ull << 29) - 2;
inline constexpr uint32_t kReuseEvents = 63;
inline constexpr uint64_t kClockTickNs = 10000000;
extern std::atomic<uint64_t> g_clock_epoch;
// Whether the writer's watermarks are exact (membarrier, writer.cpp): a record in progress
// then holds back the watermark of every pass that sees it, however long it stays begun.
extern std::atomic<bool> g_exact_watermarks;

// Writer: a new epoch (every reused time from now on is at least this recent), with no owner
// and not shared.
inline void clock_tick() {
  uint64_t e = g_clock_epoch.load(std::memory_order_relaxed);
  while (!g_clock_epoch.compare_exchange_weak(e, (e & kEpochIdle) | ((e + 1) & kTickMask), std::memory_order_seq_cst,
                                              std::memory_order_relaxed)) {
  }
}

}  // namespace memtide::rec
