#include "recorder/own_heap.h"

#include <mimalloc.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "recorder/attach.h"
#include "recorder/backing.h"
#include "recorder/recorder.h"
#include "recorder/threads.h"

namespace memtide::rec {

uintptr_t g_own_lo = 0;
uintptr_t g_own_span = 0;
MT_TLS bool tls_recorder_thread = false;

namespace {

// Address space only (MAP_NORESERVE): what is used becomes resident, as any heap's. When it is
// full, a program thread's own calls go to the program's allocator (a recorder thread's fail).
// Aligned as mimalloc's segments must be.
constexpr size_t kOwnSize = size_t{256} << 20;
constexpr size_t kOwnAlign = size_t{64} << 20;

mi_arena_id_t g_arena{};
pthread_once_t g_once = PTHREAD_ONCE_INIT;

MT_TLS mi_heap_t* tls_heap = nullptr;
// mimalloc's default heap of the thread when tls_heap was made: at the thread's end mimalloc
// deletes the thread's heaps (ours with them) and the default changes.
MT_TLS mi_heap_t* tls_heap_default = nullptr;
MT_TLS bool tls_heap_gone = false;

void make_arena() {
  BusyScope busy(kReentrant);  // (mimalloc maps its own memory through the hooks)
  // The system call: the program's mmap is interposed, and this is no mapping of the program's.
  const auto raw = syscall(SYS_mmap, nullptr, kOwnSize + kOwnAlign, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == -1) return;  // (a low RLIMIT_AS: the recorder's calls go to the program's allocator)
  const auto base = static_cast<uintptr_t>(raw);
  const uintptr_t lo = (base + kOwnAlign - 1) & ~(kOwnAlign - 1);
  if (lo > base) syscall(SYS_munmap, base, lo - base);
  if (base + kOwnAlign > lo) syscall(SYS_munmap, lo + kOwnSize, base + kOwnAlign - lo);
  if (!mi_manage_os_memory_ex(reinterpret_cast<void*>(lo), kOwnSize, /*is_committed=*/true, /*is_large=*/false,
                              /*is_zero=*/true, /*numa_node=*/-1, /*exclusive=*/true, &g_arena)) {
    syscall(SYS_munmap, lo, kOwnSize);
    return;
  }
  g_own_lo = lo;
  __atomic_store_n(&g_own_span, kOwnSize, __ATOMIC_RELEASE);
}

mi_heap_t* own_heap() {
  if (MT_UNLIKELY(!tls_heap)) {
    if (tls_heap_gone || !__atomic_load_n(&g_own_span, __ATOMIC_ACQUIRE)) return nullptr;
    BusyScope busy(kReentrant);
    // mimalloc sets up the thread's data with memory of its own; when that failed (a low
    // RLIMIT_AS) the thread's default heap is the empty one, whose thread data (its first field)
    // is null, and a new heap would be made from it (a null dereference): no heap then.
    mi_thread_init();
    if (!*reinterpret_cast<void* const*>(mi_heap_get_default())) {
      tls_heap_gone = true;
      return nullptr;
    }
    tls_heap = mi_heap_new_in_arena(g_arena);
    tls_heap_default = mi_heap_get_default();
    if (!tls_heap) tls_heap_gone = true;
    return tls_heap;
  }
  if (MT_UNLIKELY(mi_heap_get_default() != tls_heap_default)) {
    tls_heap = nullptr;
    tls_heap_gone = true;
  }
  return tls_heap;
}

// A block from the arena heap, or null (the caller then uses the program's allocator, which a
// recorder thread must not: it gets null).
void* checked(void* p) {
  if (p && MT_UNLIKELY(!own_block(p))) {
    mi_free(p);  // (not from the arena after all: never handed out)
    return nullptr;
  }
  return p;
}

}  // namespace

bool own_turn() {
  if (!__atomic_load_n(&g_own_span, __ATOMIC_ACQUIRE)) return false;
  if (tls_recorder_thread) return true;
  const uintptr_t top = tls_busy_scope;
  if ((top & kOwnAllocs) != kOwnAllocs || handler_since(top)) return false;
  return own_heap() != nullptr;
}

void* own_malloc(size_t n) {
  BusyScope busy(kReentrant);
  mi_heap_t* h = own_heap();
  void* p = h ? checked(mi_heap_malloc(h, n)) : nullptr;
  if (!p && !tls_recorder_thread) p = backing.malloc(n);
  return p;
}

void* own_calloc(size_t n, size_t size) {
  BusyScope busy(kReentrant);
  mi_heap_t* h = own_heap();
  void* p = h ? checked(mi_heap_calloc(h, n, size)) : nullptr;
  if (!p && !tls_recorder_thread) p = backing.calloc(n, size);
  return p;
}

void* own_aligned(size_t align, size_t n) {
  BusyScope busy(kReentrant);
  mi_heap_t* h = own_heap();
  void* p = h ? checked(mi_heap_malloc_aligned(h, n, align)) : nullptr;
  if (!p && !tls_recorder_thread) p = backing.memalign(align, n);
  return p;
}

void own_free(void* p) {
  BusyScope busy(kReentrant);
  mi_free(p);
}

size_t own_usable_size(void* p) { return mi_usable_size(p); }

void* own_realloc(void* p, size_t n, bool own_call) {
  if (!p) return own_call ? own_malloc(n) : backing.malloc(n);
  if (n == 0) {  // (glibc's: the block is freed, the result null)
    if (own_block(p))
      own_free(p);
    else
      backing_free(p);
    return nullptr;
  }
  if (own_block(p) && own_call) {
    BusyScope busy(kReentrant);
    if (mi_heap_t* h = own_heap()) {
      if (void* q = checked(mi_heap_realloc(h, p, n))) return q;
    }
  }
  // Between the two allocators: a block of the recorder's resized by the program (dlerror's
  // message), or one the program's allocator gave before the arena existed.
  void* q = own_call ? own_malloc(n) : backing.malloc(n);
  if (!q) return nullptr;
  const size_t old = own_block(p) ? own_usable_size(p) : backing_usable_size(p);
  std::memcpy(q, p, old < n ? old : n);
  if (own_block(p))
    own_free(p);
  else
    backing_free(p);
  return q;
}

namespace {

// Whether a mutex made process-shared by the documented call has MT_MUTEX_INITIALIZER's bytes.
bool mutexes_are_shared() {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutex_t made;
  pthread_mutex_init(&made, &a);
  pthread_mutexattr_destroy(&a);
  const pthread_mutex_t ours MT_MUTEX_INITIALIZER;
  return std::memcmp(&made, &ours, sizeof made) == 0;
}

bool g_single_kept = false;  // glibc told the process is single-threaded after the writer started

}  // namespace

int spawn_recorder_thread(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*), void* arg,
                          bool keep_single) {
  // Attached (libmemtide loaded by dlopen), the loader and glibc free what they allocated without
  // the hooks: no block of theirs may come from the arena, which is then never made.
  // (Not a function-local static: its guard would need libstdc++, which libmemtide keeps out of
  // the programs it records.)
  if (!loaded_after_libc()) pthread_once(&g_once, make_arena);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // signals are for the program's threads
  const bool single = __libc_single_threaded;
  const int r = pthread_create(thread, attr, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  // The new thread allocates from the arena alone (tls_recorder_thread) and shares only
  // process-shared mutexes with the program's: glibc's allocator may go on without its locks
  // while the program's one thread is the only one that uses it.
  if (r == 0 && keep_single && single && __atomic_load_n(&g_own_span, __ATOMIC_ACQUIRE) && mutexes_are_shared()) {
    __libc_single_threaded = 1;
    g_single_kept = true;
  }
  return r;
}

bool lift_single() {
  if (!g_single_kept || !__libc_single_threaded) return false;
  __libc_single_threaded = 0;
  return true;
}

void drop_single(bool lifted) {
  if (lifted) __libc_single_threaded = 1;
}

}  // namespace memtide::rec
