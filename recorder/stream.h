// Streams and chunks: the per-thread record buffers, lock-free for their owner.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "formats/check.h"
#include "formats/encoder.h"
#include "formats/records.h"
#include "recorder/base.h"
#include "recorder/clock.h"

namespace memtide::rec {

// Streams
//
// A stream is the record sequence of one thread (or the process stream, index 0). Its owner
// appends encoded records into the current chunk and publishes them with one release store
// of `committed`. The writer thread copies [consumed, committed) out at any time without a
// lock (bytes below `committed` never change), and takes over a chunk once its owner sealed
// it. Only the writer frees chunks, so a chunk it is reading cannot disappear.
// ---------------------------------------------------------------------------------------
inline constexpr uint32_t kChunkDefs = 256;
struct Chunk {
  Chunk* next;                      // writer queue link
  struct Stream* stream;
  uint64_t seq;                     // position in its stream's chunk sequence
  uint32_t cap;
  std::atomic<uint32_t> committed;  // owner: release store; writer: acquire load
  uint32_t consumed;                // writer only
  bool last;                        // the stream's final chunk (its thread exited)
  uint64_t end_time, end_addr;      // the stream's registers after the chunk (set when sealed)
  // Where the chunk's StackDef records lie: [stacks_begin, stacks_end), stacks_end 0 if none.
  // Set by the owner before it commits them; the writer flags the blocks they fall in.
  std::atomic<uint32_t> stacks_begin, stacks_end;
  // Each StackDef record's place [def_at, def_at + def_len), in order, while they fit
  // (ndefs <= kChunkDefs), so that the writer moves them out of a sealed chunk without reading
  // its records. Owner only until the chunk is sealed.
  uint32_t ndefs;
  uint32_t def_at[kChunkDefs], def_len[kChunkDefs];
  alignas(16) uint8_t data[];
};

inline constexpr uint32_t kFirstChunkSize = 4 * 1024;
inline constexpr uint32_t kMaxChunkSize = 64 * 1024;
// For the recorder's tests only: MEMTIDE_TEST_CHUNK_BYTES (16..65536) makes every chunk that
// size (a record that does not fit gets a chunk of its own), so that a short program crosses
// chunk boundaries at every few records, where the writer must keep each stream's order.
inline constexpr const char* kTestChunkEnv = "MEMTIDE_TEST_CHUNK_BYTES";

struct Stream {
  uint32_t index = 0;
  // Owner side.
  Chunk* chunk = nullptr;   // current chunk (pointer published with release for the writer)
  uint32_t pos = 0;
  uint64_t last_time = 0;
  uint64_t last_addr = 0;
  uint64_t next_seq = 0;
  uint64_t allocs = 0, frees = 0;
  // Event times (event_time): how many more Allocs and Frees may take last_time as theirs,
  // and the clock epoch that allows it.
  uint32_t reuse_left = 0;
  uint64_t reuse_epoch = 0;
  // A record timed at this value is being prepared and not yet committed (a realloc: its free
  // is timed before the real call, which may take long); 1: a time is about to be read; 0:
  // none. The writer's watermarks do not pass it.
  uint64_t pending_time = 0;  // __atomic builtins (the struct is reset by assignment)
  // 1 from before the owner reads the clock for a record until the record is committed
  // (begin_record / end_record). Plain stores: the writer makes them visible with membarrier
  // before it reads them (writer.cpp, exact watermarks).
  uint32_t in_record = 0;
  // Writer side.
  bool w_in_record = false;  // in_record as the writer's pass saw it
  fmt::RunState w_run;  // registers and rings after the bytes taken from the current chunk
  uint64_t w_next_seq = 0;
  bool w_done = false;
  // Registry links (under recording.registry_mutex).
  Stream* reg_prev = nullptr;
  Stream* reg_next = nullptr;
  // Owner side: the rings of recent addresses of the chunk being written, which is one block
  // of the file unless the writer takes it in pieces (writer.cpp, emit): Allocs and Frees at
  // recent addresses are written in their short forms. (Last, away from the fields above that
  // every event uses.)
  alignas(64) fmt::RecentIndex recent;
};

// Gets room for `need` bytes in the stream's chunk (sealing it when full).
uint8_t* reserve_slow(Stream* s, size_t need);
inline uint8_t* reserve(Stream* s, size_t need) {
  Chunk* c = s->chunk;
  if (MT_LIKELY(c && c->cap - s->pos >= need)) return c->data + s->pos;
  return reserve_slow(s, need);
}
inline void commit(Stream* s, uint8_t* end) {
  MEMTIDE_CHECK(end >= s->chunk->data + s->pos && end <= s->chunk->data + s->chunk->cap);
  s->pos = static_cast<uint32_t>(end - s->chunk->data);
  s->chunk->committed.store(s->pos, std::memory_order_release);
}
// Around the clock read and the commit of a timed record of a thread's own stream. A record
// whose clock was read before the writer's pass took its time is then either committed when
// the pass looks, or seen in progress (writer.cpp, flush_pass).
inline void begin_record(Stream* s) {
  __atomic_store_n(&s->in_record, 1u, __ATOMIC_RELAXED);
  __asm__ __volatile__("" ::: "memory");  // the clock is read after this store, in program order
}
inline void end_record(Stream* s) { __atomic_store_n(&s->in_record, 0u, __ATOMIC_RELEASE); }


// Reads the clock and lets the next kReuseEvents events of `s` reuse its time in epoch `e`.
MT_NOINLINE uint64_t event_time_read(Stream* s, uint64_t e);
// The time of an Alloc or Free about to be written to `s` (after begin_record).
inline uint64_t event_time(Stream* s) {
  const uint64_t e = g_clock_epoch.load(std::memory_order_relaxed);
  if (MT_LIKELY(s->reuse_left != 0) && s->reuse_epoch == e) {
    --s->reuse_left;
    return s->last_time;
  }
  if (e & kEpochShared) return now_ns();  // (another thread records in this tick)
  return event_time_read(s, e);
}

// A clock reading for an Alloc, Free or Marker of `s` timed apart from event_time (a realloc's
// free, a mark): it takes part in the tick's ownership as event_time does, without reusing a time.
inline uint64_t event_time_now(Stream* s) { return event_time_read(s, g_clock_epoch.load(std::memory_order_relaxed)); }
// The same for a thread that does not know yet which stream the record goes to: the tick becomes
// shared.
inline uint64_t shared_time_now() {
  if (!(g_clock_epoch.load(std::memory_order_relaxed) & kEpochShared))
    g_clock_epoch.fetch_or(kEpochShared, std::memory_order_seq_cst);
  return now_ns();
}

// Timestamps within a stream never go backwards (a clamped time costs nothing in ordering:
// the event happened at or after the previous one of the same thread).
inline uint64_t stream_time(Stream* s, uint64_t t) { return t < s->last_time ? s->last_time : t; }

// Appends a whole record (formats/record_builders.h). Returns false if the
// record could not be built.
bool append_record(Stream* s, const uint8_t* rec, size_t n);
// The same for a StackDef record, whose position the chunk remembers (Chunk::stacks_begin).
bool append_stack_record(Stream* s, const uint8_t* rec, size_t n);

// Seals the current chunk and hands it to the writer (the thread is exiting: last = true).
void seal_chunk(Stream* s, bool last);
void stream_init(Stream* s, uint32_t index, uint64_t base_time);

}  // namespace memtide::rec
