// The event path: allocation, free and realloc (budget and the inline parts in events.h).
//
// Sections:
//   [1] Stack walks: the fast unwinder, libunwind, both (MEMTIDE_UNWIND=verify)
//   [2] Allocation and free
//   [3] Realloc: the free timed before the real call, the allocation after it
#include "recorder/events.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <atomic>
#include <cstring>

#include "recorder/backing.h"
#include "formats/record_builders.h"
#include "recorder/recorder.h"
#include "recorder/sampling.h"
#include "recorder/stacks.h"

namespace memtide::rec {

// ---------------------------------------------------------------------------------------
// [1] Stack walks
// ---------------------------------------------------------------------------------------
namespace {

// The leading frames of `ips` (return addresses, as void* or uint64_t) inside libmemtide.
template <class Ip>
inline int skip_own_frames(const Ip* ips, int n) {
  int skip = 0;
  if (recording.own_range_known) {
    while (skip < n && (uintptr_t)ips[skip] >= recording.own_lo && (uintptr_t)ips[skip] < recording.own_hi) ++skip;
  }
  return skip;
}
// The frames of `n` recorded after `skip`: at most --max-depth.
inline int frames_within_depth(int n, int skip) {
  const int depth = static_cast<int>(recording.opts.max_depth);
  return n - skip < depth ? n - skip : depth;
}

std::atomic<uint64_t> g_verify_stacks{0}, g_verify_fast{0}, g_verify_diff{0};

// MEMTIDE_UNWIND=verify: both unwinders on every stack; the trace gets libunwind's.
// `ips` has 2 * cap + 1 slots: the fast side takes the second half (one more slot: fast_backtrace
// is itself one of our frames).
MT_NOINLINE int unwind_verified(void** ips, int cap, int& skip, UnwindMemo* memo, const UnwindStart* from) {
  void** fast = ips + cap;
  const int nf = fast_backtrace(fast, cap + 1, memo, from);
  const int nl = [&] {
    BusyScope busy(kOwnAllocs);  // (libunwind maps its caches)
    return unw_backtrace(ips, cap);
  }();
  skip = skip_own_frames(ips, nl);
  g_verify_stacks.fetch_add(1, std::memory_order_relaxed);
  if (nf < 0) return nl;
  g_verify_fast.fetch_add(1, std::memory_order_relaxed);
  const int sf = skip_own_frames(fast, nf);
  const int a = frames_within_depth(nf, sf);
  const int b = frames_within_depth(nl, skip);
  if (a != b || std::memcmp(fast + sf, ips + skip, static_cast<size_t>(a) * sizeof(void*)) != 0) {
    if (g_verify_diff.fetch_add(1, std::memory_order_relaxed) < 3) {
      int i = 0;
      while (i < a && i < b && fast[sf + i] == ips[skip + i]) ++i;
      message("unwind verify: stacks differ at frame %d: fast %d frames (%p), libunwind %d frames (%p)", i, a,
              i < a ? fast[sf + i] : nullptr, b, i < b ? ips[skip + i] : nullptr);
    }
  }
  return nl;
}

}  // namespace

void unwind_verify_report() {
  if (recording.opts.unwind != UnwindKind::Verify) return;
  const uint64_t all = g_verify_stacks.load(), fast = g_verify_fast.load();
  message("unwind verify: %llu stacks, %llu unwound by cached rules, %llu by libunwind only, %llu differ",
          static_cast<unsigned long long>(all), static_cast<unsigned long long>(fast),
          static_cast<unsigned long long>(all - fast), static_cast<unsigned long long>(g_verify_diff.load()));
}

// The walk's buffer of a thread without its own state: it records into the process stream,
// under its mutex, so one buffer serves them all.
void* g_shared_walk_ips[2 * (kMaxDepth + kExtraFrames) + 1];

MT_NOINLINE uint32_t walk_stack(ThreadState* ts, Stream* stream, const void* frame, const KeptLookup* pre) {
  const int cap = static_cast<int>(recording.opts.max_depth) + kExtraFrames;
  MEMTIDE_CHECK(cap <= kMaxDepth + kExtraFrames);
  void** ips = g_shared_walk_ips;
  if (ts) {
    if (MT_UNLIKELY(!ts->walk_ips))
      ts->walk_ips = static_cast<void**>(mem_alloc_uninit((2 * static_cast<size_t>(cap) + 1) * sizeof(void*)));
    ips = ts->walk_ips;
  }
  if (MT_UNLIKELY(!ips))  // the recorder's heap is out of memory: on the stack after all
    ips = static_cast<void**>(__builtin_alloca((2 * static_cast<size_t>(cap) + 1) * sizeof(void*)));
  int n = -1;
  int skip = 0;
  UnwindStart start;
  if (frame) {
    const auto* fp = static_cast<const uint64_t*>(frame);
    start = UnwindStart{fp[1], reinterpret_cast<uint64_t>(fp + 2), fp[0]};
  }
  const UnwindStart* from = frame ? &start : nullptr;
  if (MT_LIKELY(recording.opts.unwind == UnwindKind::Fast)) {
    n = fast_backtrace(ips, cap, ts ? &ts->memo : nullptr, from, /*id_ok=*/true, pre);
    if (n == kKeptStackId) {
      // A stack found again with its id (by fast_backtrace's own lookup, or kept_find's whose
      // range test failed): the same one if the same frames are skipped and kept.
      UnwindMemo& m = ts->memo;
      KeptStack* e = m.kept_for_id;
      MEMTIDE_CHECK(e != nullptr && e->has_id && e->n <= kKeptFrames);
      if (e->id_own_known == recording.own_range_known) {
        m.kept_for_id = nullptr;
        return e->id;
      }
      const int s = skip_own_frames(e->ip, e->n);
      if (e->id_skip == s && e->id_n == frames_within_depth(e->n, s)) {
        m.kept_for_id = nullptr;
        return e->id;
      }
      std::memcpy(ips, e->ip, static_cast<size_t>(e->n) * sizeof(uint64_t));
      n = e->n;
      m.kept_for_id_ips = ips;
      m.kept_for_id_n = n;
    }
  } else if (recording.opts.unwind == UnwindKind::Verify) {
    n = unwind_verified(ips, cap, skip, ts ? &ts->memo : nullptr, from);
  }
  if (n < 0) {
    BusyScope busy(kOwnAllocs);  // (libunwind maps its caches)
    n = libunwind_backtrace(ips, cap, ts ? &ts->memo : nullptr);
  }
  if (recording.opts.unwind != UnwindKind::Verify) skip = skip_own_frames(ips, n);
  return stack_id(ts, stream, ips + skip, frames_within_depth(n, skip));
}

// ---------------------------------------------------------------------------------------
// [2] Allocation and free
// ---------------------------------------------------------------------------------------
namespace {

MT_NOINLINE void on_alloc_slow(fmt::Api api, void* p, size_t size, const void* frame) {
  Target t;
  if (!acquire_slow(t)) return;
  // (The recording may have started, sampled, inside acquire_slow.)
  const uint64_t weight = sampling::active() ? sampling::take(p, size) : 0;
  if (sampling::active() && !weight) return release(t);
  {
    BusyScope busy;
    const uint32_t stack = capture_stack(t, frame);
    const auto addr = reinterpret_cast<uint64_t>(p);
    if (weight) {
      write_alloc(t.s, api, kNow, addr, size, stack, weight);
      sampling::insert(addr);
    } else {
      write_alloc(t.s, api, kNow, addr, size, stack);
    }
  }
  release(t);
}

MT_NOINLINE void on_free_slow(fmt::Api api, void* p) {
  Target t;
  if (!acquire_slow(t, /*even_paused=*/true)) return;
  {
    BusyScope busy;
    write_free(t.s, api, kNow, reinterpret_cast<uint64_t>(p), 0);
  }
  release(t);
}

}  // namespace

// Sampled mode: records the allocation when it holds a sample point.
MT_NOINLINE void on_alloc_sampled(fmt::Api api, void* p, size_t size, const void* frame, uint64_t weight) {
  Target t;
  if (!acquire(t)) return;
  {
    BusyScope busy;
    const uint32_t stack = capture_stack(t, frame);
    const auto addr = reinterpret_cast<uint64_t>(p);
    write_alloc(t.s, api, kNow, addr, size, stack, weight);
    sampling::insert(addr);
  }
  release(t);
}

// (Exact mode: alloc_hook has taken sampled mode's allocations.)
void on_alloc(fmt::Api api, void* p, size_t size, const void* frame) {
  if (!p) return;
  ThreadState* ts = own_stream_thread(false);
  if (MT_UNLIKELY(!ts)) {
    on_alloc_slow(api, p, size, frame);
    return;
  }
  BusyScope busy;
  const Target t{ts, &ts->stream, false};
  const uint32_t stack = capture_stack(t, frame);
  const auto addr = reinterpret_cast<uint64_t>(p);
  if (!write_alloc_fast(t.s, api, addr, size, stack)) write_alloc(t.s, api, kNow, addr, size, stack);
}

void on_free(fmt::Api api, void* p) {
  if (!p || in_pool(p)) return;
  if (ThreadState* ts = own_stream_thread(/*even_paused=*/true)) {
    bool written;
    {
      BusyScope busy;
      written = write_free_fast(&ts->stream, api, reinterpret_cast<uint64_t>(p));
    }
    if (MT_LIKELY(written)) return;
  }
  on_free_slow(api, p);
}

// ---------------------------------------------------------------------------------------
// [3] Realloc
// ---------------------------------------------------------------------------------------
ReallocTicket on_realloc_begin(void* old_ptr) {
  ReallocTicket r;
  if (old_ptr && !in_pool(old_ptr)) {
    if (MT_UNLIKELY(sampling::g_free_mode.load(std::memory_order_relaxed) != sampling::kFreeAll)) {
      const bool sampled_mode = sampling::active();
      const bool record = sampling::record_free(reinterpret_cast<uintptr_t>(old_ptr));
      r.old_sampled = sampled_mode && record;
      if (!record) return r;
    }
    if (ThreadState* ts = tls_thread; ts && !tls_busy) {
      // While only this thread records, the free takes the time of the stream's last record
      // as a short Free would (begin_reused): the record stays begun until on_realloc_end
      // commits it, so no pass of an exact writer takes its watermark past that time meanwhile
      // (without exact watermarks, one that starts after the epoch check is vouched for once
      // the next is written, and the real call may take longer than that).
      Stream* s = &ts->stream;
      if (MT_LIKELY(g_exact_watermarks.load(std::memory_order_relaxed) && begin_reused_time(s))) {
        r.free_time = s->last_time;
        r.reused = s;
        r.armed = true;
        return r;
      }
      // Announce the pending record before reading the clock (a locked exchange, then lfence
      // so that the clock is read after it is visible): a writer pass that does not see it
      // took its watermark's time before this one's.
      __atomic_exchange_n(&ts->stream.pending_time, 1, __ATOMIC_SEQ_CST);
      __builtin_ia32_lfence();
      r.free_time = event_time_now(&ts->stream);
      __atomic_store_n(&ts->stream.pending_time, r.free_time, __ATOMIC_RELEASE);
      r.pending = &ts->stream;
    } else {
      r.free_time = shared_time_now();
    }
    r.armed = true;
  }
  return r;
}

namespace {
inline void clear_pending(const ReallocTicket& r) {
  if (r.pending) __atomic_store_n(&static_cast<Stream*>(r.pending)->pending_time, 0, __ATOMIC_RELEASE);
  if (r.reused) end_record(static_cast<Stream*>(r.reused));
}
}  // namespace

void on_realloc_end(const ReallocTicket& r, fmt::Api api, void* old_ptr, void* new_ptr, size_t size,
                    const void* frame) {
  // realloc(p, n) failing leaves p untouched; realloc(p, 0) releasing p returns null.
  if (!new_ptr && size != 0) {
    if (r.old_sampled) sampling::insert(reinterpret_cast<uintptr_t>(old_ptr));
    return clear_pending(r);
  }
  uint64_t weight = 0;
  if (MT_UNLIKELY(sampling::active()) && new_ptr) {
    weight = sampling::take(new_ptr, size);
    if (!weight) {
      if (!r.armed) return;
      new_ptr = nullptr;  // only the old block's release is recorded
    }
  }
  Target t;
  // As for free: the release of the old block is recorded even while paused.
  if (!acquire(t) && !acquire_slow(t, /*even_paused=*/true)) return clear_pending(r);
  {
    BusyScope busy;
    // A reused time belongs to its own stream (pausing in between may send the records elsewhere).
    if (r.armed)
      write_free(t.s, api, !r.reused || t.s == r.reused ? r.free_time : event_time_now(t.s), reinterpret_cast<uint64_t>(old_ptr), 0);
    if (new_ptr && !recording.paused.load(std::memory_order_relaxed)) {
      const uint32_t stack = capture_stack(t, frame);
      const auto addr = reinterpret_cast<uint64_t>(new_ptr);
      if (weight) {
        write_alloc(t.s, api, kNow, addr, size, stack, weight);
        sampling::insert(addr);
      } else if (t.shared || !write_alloc_fast(t.s, api, addr, size, stack)) {
        write_alloc(t.s, api, kNow, addr, size, stack);
      }
    }
    clear_pending(r);  // after the records are committed
  }
  release(t);
}

}  // namespace memtide::rec
