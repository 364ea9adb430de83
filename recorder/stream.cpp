// Stream buffers: chunk management on the owner side, and the recorder's own memory.
#include <mimalloc.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "recorder/internal.h"

namespace memtide::rec {

void* mem_alloc(size_t n) { return mi_zalloc(n); }
void mem_free(void* p) { mi_free(p); }

void message(const char* fmt, ...) {
  static std::atomic<int> count{0};
  if (count.fetch_add(1, std::memory_order_relaxed) >= 20) return;
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, "memtide[%d]: ", static_cast<int>(getpid()));
  va_list ap;
  va_start(ap, fmt);
  n += std::vsnprintf(buf + n, sizeof buf - static_cast<size_t>(n) - 1, fmt, ap);
  va_end(ap);
  if (n > static_cast<int>(sizeof buf) - 2) n = sizeof buf - 2;
  buf[n++] = '\n';
  (void)!write(2, buf, static_cast<size_t>(n));
}

static Chunk* new_chunk(Stream* s, size_t need) {
  uint32_t cap = kFirstChunkSize;
  if (s->chunk) cap = s->chunk->cap < kMaxChunkSize ? s->chunk->cap * 2 : kMaxChunkSize;
  while (cap < need) cap *= 2;
  auto* c = static_cast<Chunk*>(mem_alloc(sizeof(Chunk) + cap));
  if (!c) return nullptr;
  c->stream = s;
  c->seq = s->next_seq++;
  c->cap = cap;
  return c;
}

void stream_init(Stream* s, uint32_t index, uint64_t base_time) {
  *s = Stream{};
  s->index = index;
  s->last_time = s->w_time = base_time;
}

void seal_chunk(Stream* s, bool last) {
  Chunk* c = s->chunk;
  if (!c) {
    if (!last) return;
    c = new_chunk(s, 0);  // an empty final chunk tells the writer the stream is done
    if (!c) return;
  }
  c->last = last;
  __atomic_store_n(&s->chunk, nullptr, __ATOMIC_RELEASE);
  s->pos = 0;
  enqueue_chunk(c);
}

uint8_t* reserve_slow(Stream* s, size_t need) {
  Chunk* next = new_chunk(s, need);
  if (!next) return nullptr;
  Chunk* old = s->chunk;
  if (old) enqueue_chunk(old);
  __atomic_store_n(&s->chunk, next, __ATOMIC_RELEASE);
  s->pos = 0;
  return next->data;
}

bool append_record(Stream* s, const uint8_t* rec, size_t n) {
  uint8_t* w = reserve(s, n);
  if (!w) return false;
  std::memcpy(w, rec, n);
  commit(s, w + n);
  return true;
}

}  // namespace memtide::rec
