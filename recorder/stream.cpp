// Stream buffers: chunk management on the owner side (stream.h).
#include <new>

#include "recorder/state.h"
#include "recorder/stream.h"
#include "recorder/writer.h"

namespace memtide::rec {

static Chunk* new_chunk(Stream* s, size_t need) {
  uint32_t cap = recording.chunk_first;
  if (s->chunk) cap = s->chunk->cap < recording.chunk_max ? s->chunk->cap * 2 : recording.chunk_max;
  while (cap < need) cap *= 2;
  // Only the header is initialised: the data is written before the writer reads it (zeroing
  // each chunk would be work on the program's thread for every byte it records).
  void* mem = mem_alloc_uninit(sizeof(Chunk) + cap);
  if (!mem) return nullptr;
  auto* c = new (mem) Chunk{};
  c->stream = s;
  c->seq = s->next_seq++;
  c->cap = cap;
  s->recent.start_block();
  return c;
}

void stream_init(Stream* s, uint32_t index, uint64_t base_time) {
  *s = Stream{};
  s->index = index;
  s->last_time = s->w_run.time = base_time;
}

void seal_chunk(Stream* s, bool last) {
  Chunk* c = s->chunk;
  if (!c) {
    if (!last) return;
    c = new_chunk(s, 0);  // an empty final chunk tells the writer the stream is done
    if (!c) return;
  }
  c->last = last;
  c->end_time = s->last_time;
  c->end_addr = s->last_addr;
  __atomic_store_n(&s->chunk, nullptr, __ATOMIC_RELEASE);
  s->pos = 0;
  enqueue_chunk(c, false);
}

uint8_t* reserve_slow(Stream* s, size_t need) {
  Chunk* next = new_chunk(s, need);
  if (!next) return nullptr;
  Chunk* old = s->chunk;
  // Publish the new chunk first: once `old` is queued the writer may free it, so it must no
  // longer be reachable as the stream's current chunk.
  __atomic_store_n(&s->chunk, next, __ATOMIC_RELEASE);
  s->pos = 0;
  if (old) {
    old->end_time = s->last_time;
    old->end_addr = s->last_addr;
    // The process stream is written under shared_mutex, which the writer also takes.
    enqueue_chunk(old, s != &recording.shared);
  }
  MEMTIDE_CHECK(next->cap >= need);
  return next->data;
}

bool append_record(Stream* s, const uint8_t* rec, size_t n) {
  uint8_t* w = reserve(s, n);
  if (!w) return false;
  std::memcpy(w, rec, n);
  commit(s, w + n);
  return true;
}

bool append_stack_record(Stream* s, const uint8_t* rec, size_t n) {
  uint8_t* w = reserve(s, n);
  if (!w) return false;
  Chunk* c = s->chunk;
  const auto at = static_cast<uint32_t>(w - c->data);
  if (c->stacks_end.load(std::memory_order_relaxed) == 0) c->stacks_begin.store(at, std::memory_order_relaxed);
  c->stacks_end.store(at + static_cast<uint32_t>(n), std::memory_order_relaxed);
  if (c->ndefs < kChunkDefs) {
    c->def_at[c->ndefs] = at;
    c->def_len[c->ndefs] = static_cast<uint32_t>(n);
  }
  ++c->ndefs;
  std::memcpy(w, rec, n);
  commit(s, w + n);
  return true;
}

}  // namespace memtide::rec
