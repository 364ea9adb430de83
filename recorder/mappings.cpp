// Anonymous mappings: only mappings the program made anonymous are recorded (Alloc / Free
// records with the mmap APIs); munmap and mremap of them (also partial) are matched by the
// analysis against these records.
#include <pthread.h>
#include <sys/mman.h>

#include <cstring>

#include "recorder/events.h"
#include "recorder/recorder.h"

namespace memtide::rec {

pthread_mutex_t maps_mutex = MT_MUTEX_INITIALIZER;

namespace {
struct Map {
  uintptr_t lo, hi;
};
Map* g_maps = nullptr;
size_t g_nmaps = 0, g_maps_cap = 0;

// Under maps_mutex. Removes [lo, hi) from the table; returns whether it overlapped any.
bool maps_remove(uintptr_t lo, uintptr_t hi) {
  bool hit = false;
  for (size_t i = 0; i < g_nmaps;) {
    Map m = g_maps[i];
    if (m.hi <= lo || m.lo >= hi) {
      ++i;
      continue;
    }
    hit = true;
    g_maps[i] = g_maps[--g_nmaps];
    if (m.lo < lo && g_nmaps < g_maps_cap) g_maps[g_nmaps++] = Map{m.lo, lo};
    if (m.hi > hi && g_nmaps < g_maps_cap) g_maps[g_nmaps++] = Map{hi, m.hi};
  }
  MEMTIDE_CHECK(g_nmaps <= g_maps_cap);
  return hit;
}

void maps_add(uintptr_t lo, uintptr_t hi) {
  if (g_nmaps == g_maps_cap) {
    const size_t cap = g_maps_cap ? g_maps_cap * 2 : 256;
    auto* bigger = static_cast<Map*>(mem_alloc(cap * sizeof(Map)));
    if (!bigger) return;
    if (g_maps) std::memcpy(bigger, g_maps, g_nmaps * sizeof(Map));
    mem_free(g_maps);
    g_maps = bigger;
    g_maps_cap = cap;
  }
  g_maps[g_nmaps++] = Map{lo, hi};
}

// The stack of an mmap or mremap. When the program has its own malloc, these calls may come
// from inside it, under its locks (rustc's jemalloc maps its first pages under its start-up
// lock), and the unwinder's first look at a module (libelf) allocates, which libc's callers
// then do with that very allocator: it would wait for itself. Such mappings are recorded
// without their stack.
inline uint32_t mapping_stack(const Target& t, const void* frame) {
  return MT_UNLIKELY(recording.foreign_malloc_in != nullptr) ? 0 : capture_stack(t, frame);
}
}  // namespace

void on_mmap(void* p, size_t length, int flags, int fd, const void* frame) {
  if (p == MAP_FAILED || !(flags & MAP_ANONYMOUS) || fd > 0) return;
  if (tls_busy) return note_busy_reentry(/*program_call=*/false);
  Target t;
  if (!acquire(t)) return;
  {
    BusyScope busy;
    pthread_mutex_lock(&maps_mutex);
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
    maps_remove(lo, lo + length);  // MAP_FIXED over an old mapping replaces it
    maps_add(lo, lo + length);
    pthread_mutex_unlock(&maps_mutex);
    const uint32_t stack = mapping_stack(t, frame);
    write_alloc(t.s, fmt::Api::Mmap, kNow, lo, length, stack);
  }
  release(t);
}

void on_munmap_begin(void* p, size_t length) {
  if (tls_busy) return note_busy_reentry(/*program_call=*/false);
  if (!g_nmaps) return;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
  pthread_mutex_lock(&maps_mutex);
  const bool hit = maps_remove(lo, lo + length);
  pthread_mutex_unlock(&maps_mutex);
  if (!hit) return;
  Target t;
  if (!acquire_slow(t)) return;
  {
    BusyScope busy;
    write_free(t.s, fmt::Api::Munmap, kNow, lo, length);
  }
  release(t);
}

void on_mremap(void* old_p, size_t old_len, void* new_p, size_t new_len, const void* frame) {
  if (tls_busy) return note_busy_reentry(/*program_call=*/false);
  if (new_p == MAP_FAILED || !g_nmaps) return;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(old_p);
  pthread_mutex_lock(&maps_mutex);
  const bool hit = maps_remove(lo, lo + old_len);
  if (hit) maps_add(reinterpret_cast<uintptr_t>(new_p), reinterpret_cast<uintptr_t>(new_p) + new_len);
  pthread_mutex_unlock(&maps_mutex);
  if (!hit) return;
  Target t;
  if (!acquire_slow(t)) return;
  {
    BusyScope busy;
    const uint32_t stack = mapping_stack(t, frame);
    write_free(t.s, fmt::Api::Mremap, kNow, lo, 0);
    write_alloc(t.s, fmt::Api::Mremap, kNow, reinterpret_cast<uint64_t>(new_p), new_len, stack);
  }
  release(t);
}

}  // namespace memtide::rec
