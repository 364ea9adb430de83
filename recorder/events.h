// The event path: allocation, free and realloc, from the shim's call to the committed record.
//
// An event in exact mode, when its stack was seen before (bench/README.md, "The event path",
// has its instructions and time):
//   allocation  the sampling test, the kept-stack lookup (a hash, a set of 4 ways, kept_holds
//               re-reading the stack's slots), then a short Alloc appended to the thread's
//               chunk with the time of the record before.
//   free        the sampling test, a short Free, no stack.
// The writer thread compresses and writes on another CPU. What leaves this path: a stack not
// found again (walk_stack: the fast unwinder, then the
// stack table), a clock read (every event once a second thread records: event_time), a new
// chunk (reserve_slow).
//
// Sections:
//   [1] The kept-stack lookup (inline: a stack found again costs no call but kept_holds)
//   [2] The target stream of an event
//   [3] Stack capture
//   [4] Record writers: the fast ones (no call, the time reused) and the general ones
#pragma once

#include <pthread.h>

#include <cstddef>
#include <cstdint>

#include "formats/check.h"
#include "formats/record_builders.h"
#include "formats/records.h"
#include "recorder/base.h"
#include "recorder/clock.h"
#include "recorder/state.h"
#include "recorder/trace_state.h"
#include "recorder/stream.h"
#include "recorder/unwind.h"

namespace memtide::rec {

// ---------------------------------------------------------------------------------------
// [1] The kept-stack lookup
// ---------------------------------------------------------------------------------------
// Whether to look for and keep whole stacks: not while few are found again (then the cost of
// keeping them exceeds what the hits save). Decided at the first miss after each 256 lookups or
// more, from the share of misses since the last decision (a hit counts nothing); after a poor
// round the set rests for 4096 walks.
inline constexpr uint32_t kKeptRound = 256, kKeptRest = 4096;

// The set of kKeptWays entries a start state may be kept in.
inline KeptStack* kept_set(UnwindMemo* m, uint64_t ip, uint64_t sp) {
  const uint64_t h = (ip ^ (sp * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
  return &m->kept[(h >> (64 - kKeptSetBits)) * kKeptWays];
}

// The thread's table of kept stacks, mapped at its kKeptRound-th walk; false until then, and
// for another round whenever it could not be had.
inline bool kept_table(UnwindMemo* m) {
  if (MT_LIKELY(m->kept != nullptr)) return true;
  if (++m->kept_wait < kKeptRound) return false;
  return kept_table_map(m);
}

inline bool kept_wanted(UnwindMemo* m) {
  if (MT_UNLIKELY(m->kept_rest)) {
    --m->kept_rest;
    return false;
  }
  return true;
}

// The kept stack of the start state (ip, sp, bp) if the stack on the stack is it again (else
// null, and `victim` the way of the set to keep the walked stack in).
inline KeptStack* kept_probe(UnwindMemo* m, uint64_t ip, uint64_t sp, uint64_t bp, int cap, uint64_t gen,
                             KeptStack** victim) {
  KeptStack* set = kept_set(m, ip, sp);
  const uint32_t now = ++m->kept_clock;
  // The start ip first: it tells the ways of a set apart.
  for (int w = 0; w < kKeptWays; ++w) {
    KeptStack* e = set + w;
    if (e->ip[0] == ip && e->sp == sp && e->gen == gen && (e->bp == bp || !e->bp_used) && e->n <= cap &&
        kept_holds(e)) {
      e->used = now;
      return e;
    }
  }
  if (now - m->kept_round >= kKeptRound) {
    if (m->kept_misses * 2 > now - m->kept_round) m->kept_rest = kKeptRest;
    m->kept_round = now;
    m->kept_misses = 0;
  }
  ++m->kept_misses;
  KeptStack* v = set;
  for (int w = 1; w < kKeptWays; ++w)
    if (set[w].used < v->used) v = set + w;
  v->used = now;
  *victim = v;
  return nullptr;
}

// The kept-stack lookup a walk from `from` would start with (fast_backtrace), on its own.
MT_ALWAYS_INLINE KeptStack* kept_find(UnwindMemo* m, const UnwindStart& from, int cap, KeptLookup* f) {
  // Where fast_backtrace would not look (it returns before, or its memo is not usable from
  // here, which it may still find out), it is left to look itself.
  auto walk_could_keep = [&] {
    return !g_rules_full.load(std::memory_order_relaxed) && from.ip != 0 && from.sp >= m->stack_lo &&
           from.sp < m->stack_hi;
  };
  // Only a thread whose walks can keep stacks gets a table (there are kMaxKeptTables).
  if (MT_UNLIKELY(m->kept == nullptr) && (!walk_could_keep() || !kept_table(m))) return nullptr;
  if (!kept_wanted(m)) return nullptr;
  KeptStack* victim;
  KeptStack* hit = kept_probe(m, from.ip, from.sp, from.bp, cap, g_rule_gen.load(std::memory_order_acquire), &victim);
  // A hit is the stack it was (every slot checked), and it was kept from a walk inside this
  // thread's stack, so its sp, the same, is inside it still.
  if (MT_LIKELY(hit != nullptr)) {
    MEMTIDE_CHECK(hit->n > 0 && hit->n <= kKeptFrames && hit->n <= cap);
    f->done = true;
    f->hit = hit;
    return hit;
  }
  if (!walk_could_keep()) return nullptr;
  f->done = true;
  f->victim = victim;
  return nullptr;
}

// ---------------------------------------------------------------------------------------
// [2] The target stream of an event
// ---------------------------------------------------------------------------------------
// The stream for an event of the calling thread, locked if it is the process stream.
struct Target {
  ThreadState* ts;
  Stream* s;
  bool shared;
};

// Any case but the common one (threads.cpp): starts the recorder, makes the thread's state, or
// takes the process stream (locked). False when the event cannot be recorded. Frees are
// recorded while paused (`even_paused`): a block made before the pause may be released in it.
bool acquire_slow(Target& t, bool even_paused = false);

// The calling thread's state when its event goes to its own stream now (the common case: the
// recording runs, the thread has its stream and is not inside the recorder), else null.
inline ThreadState* own_stream_thread(bool even_paused) {
  ThreadState* ts = tls_thread;
  return MT_LIKELY(ts && !tls_busy && recording.state.load(std::memory_order_relaxed) == kActive &&
                   (even_paused || !recording.paused.load(std::memory_order_relaxed)))
             ? ts
             : nullptr;
}

inline bool acquire(Target& t) {
  if (ThreadState* ts = own_stream_thread(false)) {
    t = Target{ts, &ts->stream, false};
    return true;
  }
  return acquire_slow(t);
}

inline void release(const Target& t) {
  if (MT_UNLIKELY(t.shared)) pthread_mutex_unlock(&recording.shared_mutex);
}

// ---------------------------------------------------------------------------------------
// [3] Stack capture
// ---------------------------------------------------------------------------------------
inline constexpr int kExtraFrames = 6;  // room for our own frames at the top of an unwound stack
inline constexpr int kMaxDepth = 1024;  // the largest --max-depth (options.inc)

// Any stack but one found again with its id: unwound, then looked up in the stack table.
MT_NOINLINE uint32_t walk_stack(ThreadState* ts, Stream* stream, const void* frame, const KeptLookup* pre);

// The stack id of the event at `frame` (the shim's frame pointer; null: unwound from here). A
// stack found again with its id (most allocations) takes only kept_find; the others are
// walked (walk_stack).
MT_ALWAYS_INLINE uint32_t capture_stack(const Target& t, const void* frame) {
  KeptLookup pre;
  if (MT_LIKELY(frame && t.ts && recording.opts.unwind == UnwindKind::Fast)) {
    // The shim's frame: saved rbp, then its return address; its caller's sp is just above.
    const auto* fp = static_cast<const uint64_t*>(frame);
    const UnwindStart start{fp[1], reinterpret_cast<uint64_t>(fp + 2), fp[0]};
    UnwindMemo& m = t.ts->memo;
    const KeptStack* e = kept_find(&m, start, static_cast<int>(recording.opts.max_depth) + kExtraFrames, &pre);
    // The same stack if the same frames are skipped and kept as when the id was given (as
    // stack_id checks it). Those depend only on the entry's return addresses and on
    // libmemtide's range, so they are as then unless that range became known since.
    if (e && e->has_id && MT_LIKELY(e->id_own_known == recording.own_range_known)) {
      m.kept_for_id = nullptr;
      return e->id;
    }
  }
  return walk_stack(t.ts, t.s, frame, &pre);
}

// ---------------------------------------------------------------------------------------
// [4] Record writers
// ---------------------------------------------------------------------------------------
// `time` kNow: the clock is read once the record has its room. Getting room may wait (a new
// chunk, or the writer's backpressure); a record timed before that wait could reach the file
// after a watermark that vouched for its time.
inline constexpr uint64_t kNow = 0;

// An Alloc or Free that found no room (the recorder's memory ran out): counted, as End's lost_events.
inline void note_lost_event() { g_trace.lost_events.fetch_add(1, std::memory_order_relaxed); }

// `weight` (sampled mode): the Alloc's SampleWeight goes before it, in the same record for the
// writer; 0 (a constant at the exact call sites, so the test folds away): none.
MT_ALWAYS_INLINE void write_alloc(Stream* s, fmt::Api api, uint64_t time, uint64_t addr, uint64_t size, uint32_t stack,
                                  uint64_t weight = 0) {
  constexpr size_t kWeightRoom = 1 + fmt::kLengthSlot + wire::kMaxVarint;
  uint8_t* w = reserve(s, fmt::kMaxAllocRecord + (weight ? kWeightRoom : 0));
  if (MT_UNLIKELY(!w)) return note_lost_event();
  begin_record(s);
  const uint64_t t = stream_time(s, time == kNow ? event_time(s) : time);
  MEMTIDE_CHECK(t >= s->last_time && tls_busy > 0);
  if (weight) w += fmt::encode_sample_weight(w, kWeightRoom, fmt::SampleWeight{weight});
  w = fmt::encode_alloc(w, s->recent, api, t - s->last_time, addr, s->last_addr, size, stack);
  s->last_time = t;
  s->last_addr = addr;
  commit(s, w);
  end_record(s);
  ++s->allocs;
}

MT_ALWAYS_INLINE void write_free(Stream* s, fmt::Api api, uint64_t time, uint64_t addr, uint64_t length) {
  uint8_t* w = reserve(s, fmt::kMaxFreeRecord);
  if (MT_UNLIKELY(!w)) return note_lost_event();
  begin_record(s);
  const uint64_t t = stream_time(s, time == kNow ? event_time(s) : time);
  MEMTIDE_CHECK(t >= s->last_time && tls_busy > 0);
  w = fmt::encode_free(w, s->recent, api, t - s->last_time, addr, s->last_addr, length);
  s->last_time = t;
  s->last_addr = addr;
  commit(s, w);
  end_record(s);
  ++s->frees;
}

// The common Alloc and Free records are written without a call (so without saving registers)
// when the thread's own stream has room and the time of its record before may be reused:
// begin_reused gives where to write, or null, with nothing begun, and the general writers
// (write_alloc, write_free) take the record.
// Begins a record that takes the time of the stream's record before it (last_time) if the
// epoch allows that; otherwise begins nothing and returns false.
MT_ALWAYS_INLINE bool begin_reused_time(Stream* s) {
  begin_record(s);  // before the epoch is read, as event_time requires
  if (MT_UNLIKELY(s->reuse_left == 0 || s->reuse_epoch != g_clock_epoch.load(std::memory_order_relaxed))) {
    end_record(s);
    return false;
  }
  --s->reuse_left;
  return true;
}

MT_ALWAYS_INLINE uint8_t* begin_reused(Stream* s, size_t need) {
  Chunk* c = s->chunk;
  if (MT_UNLIKELY(!c || c->cap - s->pos < need)) return nullptr;
  return begin_reused_time(s) ? c->data + s->pos : nullptr;
}

MT_ALWAYS_INLINE bool write_alloc_fast(Stream* s, fmt::Api api, uint64_t addr, uint64_t size, uint32_t stack) {
  uint8_t* w = begin_reused(s, fmt::kMaxAllocRecord);
  if (!w) return false;
  w = fmt::encode_alloc(w, s->recent, api, 0, addr, s->last_addr, size, stack);
  s->last_addr = addr;
  commit(s, w);
  end_record(s);
  ++s->allocs;
  return true;
}

MT_ALWAYS_INLINE bool write_free_fast(Stream* s, fmt::Api api, uint64_t addr) {
  uint8_t* w = begin_reused(s, fmt::kMaxFreeRecord);
  if (!w) return false;
  w = fmt::encode_free(w, s->recent, api, 0, addr, s->last_addr, 0);
  s->last_addr = addr;
  commit(s, w);
  end_record(s);
  ++s->frees;
  return true;
}

// MEMTIDE_UNWIND=verify: the counts of stacks unwound both ways, as a message at the end.
void unwind_verify_report();

// Anonymous mappings (mappings.cpp): the table of the program's anonymous mappings is under
// this lock (taken around fork).
extern pthread_mutex_t maps_mutex;

}  // namespace memtide::rec
