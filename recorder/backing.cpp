#include "recorder/backing.h"

#include <dlfcn.h>
#include <mimalloc.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace memtide::rec {

RealFns real{};
BackingFns backing{};
int backing_state = 0;

// --- Bootstrap pool: a bump allocator over static storage. Each block is preceded by its
// size so malloc_usable_size and realloc work on it. Frees of pool blocks are ignored.
alignas(64) unsigned char g_pool[kPoolSize];

namespace {

std::atomic<size_t> g_pool_used{0};

template <typename F>
void resolve(F& slot, const char* name) {
  slot = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

bool g_mimalloc = false;

}  // namespace

void* pool_alloc(size_t size, size_t align) {
  if (align < 16) align = 16;
  if (align > 4096 || size > kPoolSize) return nullptr;
  size_t old = g_pool_used.load(std::memory_order_relaxed);
  for (;;) {
    size_t start = (old + sizeof(size_t) + align - 1) & ~(align - 1);
    size_t end = start + size;
    if (end > kPoolSize) return nullptr;
    if (g_pool_used.compare_exchange_weak(old, end, std::memory_order_relaxed)) {
      std::memcpy(g_pool + start - sizeof(size_t), &size, sizeof size);
      return g_pool + start;  // static storage is zero, as calloc needs
    }
  }
}

size_t pool_usable_size(const void* p) {
  size_t size;
  std::memcpy(&size, static_cast<const unsigned char*>(p) - sizeof(size_t), sizeof size);
  return size;
}

void resolve_backing() {
  int expected = 0;
  if (!__atomic_compare_exchange_n(&backing_state, &expected, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    // Another thread is resolving (or it is done): callers fall back to the pool meanwhile.
    return;
  }
#define MEMTIDE_HOOK(field, symbol, attach, ret, params) resolve(real.field, #symbol);
#define MEMTIDE_SHIM(symbol, attach)
#include "recorder/hooks.inc"
#undef MEMTIDE_SHIM
#undef MEMTIDE_HOOK
  if (!real.fcntl64) real.fcntl64 = real.fcntl;
  if (!real.mmap64) real.mmap64 = real.mmap;

  backing.malloc = real.malloc;
  backing.calloc = real.calloc;
  backing.realloc = real.realloc;
  backing.reallocarray = real.reallocarray;
  backing.posix_memalign = real.posix_memalign;
  backing.aligned_alloc = real.aligned_alloc;
  backing.memalign = real.memalign;
  backing.valloc = real.valloc;
  backing.pvalloc = real.pvalloc;
  if (!real.malloc || !real.free || !real.calloc || !real.realloc) {
    static const char msg[] = "memtide: cannot find the system allocator; aborting\n";
    (void)!write(2, msg, sizeof msg - 1);
    abort();
  }
  __atomic_store_n(&backing_state, 2, __ATOMIC_RELEASE);
}

void use_mimalloc_backing() {
  g_mimalloc = true;
  backing.malloc = mi_malloc;
  backing.calloc = mi_calloc;
  backing.realloc = mi_realloc;
  backing.reallocarray = mi_reallocarray;
  backing.posix_memalign = mi_posix_memalign;
  backing.aligned_alloc = mi_aligned_alloc;
  backing.memalign = mi_memalign;
  backing.valloc = mi_valloc;
  backing.pvalloc = mi_pvalloc;
}

void backing_free(void* p) {
  if (!p || in_pool(p)) return;
  if (g_mimalloc && mi_is_in_heap_region(p)) return mi_free(p);
  real.free(p);
}

size_t backing_usable_size(void* p) {
  if (!p) return 0;
  if (in_pool(p)) return pool_usable_size(p);
  if (g_mimalloc && mi_is_in_heap_region(p)) return mi_usable_size(p);
  return real.malloc_usable_size ? real.malloc_usable_size(p) : 0;
}

void* backing_realloc(void* p, size_t n) {
  const bool foreign = p && (in_pool(p) || (g_mimalloc && !mi_is_in_heap_region(p)));
  if (!foreign) return backing.realloc(p, n);
  // The block belongs to an allocator other than the current one: move it.
  const size_t old = backing_usable_size(p);
  void* q = backing.malloc(n ? n : 1);
  if (!q) return nullptr;
  std::memcpy(q, p, old < n ? old : n);
  backing_free(p);
  if (n == 0) {
    backing_free(q);
    return nullptr;
  }
  return q;
}

}  // namespace memtide::rec
