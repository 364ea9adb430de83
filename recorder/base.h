// What every part of the recorder uses: branch hints, its own heap (never the program's) and
// its one-line messages.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <cstdint>

#define MT_LIKELY(x) __builtin_expect(!!(x), 1)
#define MT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define MT_TLS __attribute__((tls_model("initial-exec"))) __thread
#define MT_NOINLINE __attribute__((noinline))
#define MT_ALWAYS_INLINE inline __attribute__((always_inline))
// On a declaration: the definition is in this library, so the hot path reaches it directly
// rather than through the GOT (-fvisibility=hidden covers definitions only).
#define MT_HIDDEN __attribute__((visibility("hidden")))
// The recorder's mutexes are process-shared (glibc's kind bit 128, what
// pthread_mutexattr_setpshared gives; checked by own_heap.cpp before it relies on it): while glibc
// believes the process has one thread (own_heap.h says when), it takes a free private mutex
// with a plain store, which the writer thread would not see.
#define MT_MUTEX_INITIALIZER { { __PTHREAD_MUTEX_INITIALIZER(PTHREAD_MUTEX_TIMED_NP | 128) } }

namespace memtide::rec {

void* mem_alloc(size_t n);   // zeroed
void* mem_alloc_uninit(size_t n);  // not zeroed (a chunk's data, written before it is read)
void mem_free(void* p);
void mem_thread_ending();  // the thread's destructor runs: mimalloc has deleted its heaps (stream.cpp)

// One-line diagnostics, prefixed "memtide: ", written with write(2), capped in number.
void message(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// A recorder mutex made anew (in a forked child): MT_MUTEX_INITIALIZER's state.
inline void mutex_init_in_child(pthread_mutex_t* m) { *m = pthread_mutex_t MT_MUTEX_INITIALIZER; }

}  // namespace memtide::rec
