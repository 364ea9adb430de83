// The allocator that actually serves the program (the "backing" allocator), and the other
// real functions the shims forward to.
//
// By default the program's blocks come from the next definition of malloc & co. (normally
// glibc), resolved with dlsym(RTLD_NEXT). dlsym itself allocates, so until resolution is
// finished, requests are served from a small static pool whose blocks are recognised when
// freed. With MEMTIDE_ALLOCATOR=mimalloc the program's blocks come from mimalloc instead
// (blocks made earlier by the system allocator are still released to it).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "recorder/base.h"

namespace memtide::rec {

struct RealFns {
  void* (*malloc)(size_t);
  void (*free)(void*);
  void* (*calloc)(size_t, size_t);
  void* (*realloc)(void*, size_t);
  void* (*reallocarray)(void*, size_t, size_t);
  int (*posix_memalign)(void**, size_t, size_t);
  void* (*aligned_alloc)(size_t, size_t);
  void* (*memalign)(size_t, size_t);
  void* (*valloc)(size_t);
  void* (*pvalloc)(size_t);
  size_t (*malloc_usable_size)(void*);

  void* (*mmap)(void*, size_t, int, int, int, off_t);
  void* (*mmap64)(void*, size_t, int, int, int, off_t);
  int (*munmap)(void*, size_t);
  void* (*mremap)(void*, size_t, size_t, int, void*);

  void* (*dlopen)(const char*, int);
  void* (*dlmopen)(long, const char*, int);
  int (*dlclose)(void*);
  int (*pthread_setname_np)(unsigned long, const char*);
  int (*pthread_getattr_np)(unsigned long, void*);  // (pthread_attr_t*)
  int (*pthread_create)(unsigned long*, const void*, void* (*)(void*), void*);  // (pthread_t*, const pthread_attr_t*)
  void (*exit)(int) __attribute__((noreturn));
  void (*exit_)(int) __attribute__((noreturn));   // _exit
  void (*Exit_)(int) __attribute__((noreturn));   // _Exit
  void (*quick_exit)(int) __attribute__((noreturn));
  int (*libc_start_main)(int (*)(int, char**, char**), int, char**, void (*)(), void (*)(), void (*)(), void*);
  int (*execve)(const char*, char* const[], char* const[]);
  int (*execveat)(int, const char*, char* const[], char* const[], int);
  int (*fexecve)(int, char* const[], char* const[]);
  int (*close)(int);
  int (*close_range)(unsigned, unsigned, int);
  void (*closefrom)(int);
  int (*dup)(int);
  int (*dup2)(int, int);
  int (*dup3)(int, int, int);
  int (*fcntl)(int, int, ...);
  int (*fcntl64)(int, int, ...);
  int (*pipe2)(int*, int);
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
