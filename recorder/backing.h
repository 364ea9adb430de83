// The allocator that actually serves the program (the "backing" allocator), and the other
// real functions the shims forward to.
//
// By default the program's blocks come from the next definition of malloc & co. (normally
// glibc), resolved with dlsym(RTLD_NEXT). dlsym itself allocates, so until resolution is
// finished, requests are served from a small static pool whose blocks are recognised when
// freed. With MEMTIDE_ALLOCATOR=mimalloc the program's blocks come from mimalloc instead
// (blocks made earlier by the system allocator are still released to it).
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "recorder/base.h"

namespace memtide::rec {

struct RealFns {
#define MEMTIDE_HOOK(field, symbol, attach, ret, params) ret(*field) params;
#define MEMTIDE_SHIM(symbol, attach)
#include "recorder/hooks.inc"
#undef MEMTIDE_SHIM
#undef MEMTIDE_HOOK
};

// Resolved real functions; valid once backing_ready() is true.
extern RealFns real;

// The functions that serve the program's allocations (system or mimalloc).
struct BackingFns {
  void* (*malloc)(size_t);
  void* (*calloc)(size_t, size_t);
  void* (*realloc)(void*, size_t);
  void* (*reallocarray)(void*, size_t, size_t);
  int (*posix_memalign)(void**, size_t, size_t);
  void* (*aligned_alloc)(size_t, size_t);
  void* (*memalign)(size_t, size_t);
  void* (*valloc)(size_t);
  void* (*pvalloc)(size_t);
};
extern MT_HIDDEN BackingFns backing;

// 0: nothing resolved yet; 1: resolving (dlsym running); 2: ready.
extern MT_HIDDEN int backing_state;
inline bool backing_ready() { return __builtin_expect(backing_state == 2, 1); }

// Resolves the real functions (idempotent). Called from the first hook or the constructor.
void resolve_backing();

// Switches the program's allocator to mimalloc (from the recorder's start-up).
void use_mimalloc_backing();

// --- The bootstrap pool -----------------------------------------------------------------
inline constexpr size_t kPoolSize = 256 * 1024;
extern unsigned char g_pool[kPoolSize];
// Inline: every free asks it.
inline bool in_pool(const void* p) {
  const auto* c = static_cast<const unsigned char*>(p);
  return c >= g_pool && c < g_pool + kPoolSize;
}
void* pool_alloc(size_t size, size_t align);
size_t pool_usable_size(const void* p);

// Releases a block made by whichever allocator made it. Handles pool blocks (ignored) and,
// in mimalloc mode, blocks the system allocator made before the switch.
void backing_free(void* p);
size_t backing_usable_size(void* p);
// realloc across allocators: a pool block or (mimalloc mode) a system block is moved.
void* backing_realloc(void* p, size_t n);

}  // namespace memtide::rec
