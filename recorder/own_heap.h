// The recorder's own calls of malloc & co.: what libdw and libelf allocate while the recorder
// reads unwind tables on a program's thread, glibc's calloc inside pthread_setspecific, anything
// the recorder's threads (the writer, attach's control thread) allocate. They are served from an
// arena of mimalloc's that holds nothing of the program's, in an address range of its own, so
// that a free tells them apart with one comparison.
//
// Why: glibc's malloc takes no lock while the process has one thread. The recorder's threads
// would make it take its arena lock, and a program whose signal handler mallocs while
// interrupting malloc would then hang where it crashes untraced. Once the recorder's threads
// never enter glibc's allocator, glibc is told the program is still single-threaded
// (spawn_recorder_thread). And the recorder's own allocations on a program's thread no longer
// hold glibc's allocator when a handler of the program's interrupts them.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <cstdint>

#include "recorder/base.h"

namespace memtide::rec {

// The arena's range; empty (no routing at all) until it is made, or when it cannot be.
extern MT_HIDDEN uintptr_t g_own_lo;
extern MT_HIDDEN uintptr_t g_own_span;

// Whether `p` is a block of the recorder's own (then freed, resized and measured here).
inline bool own_block(const void* p) { return reinterpret_cast<uintptr_t>(p) - g_own_lo < g_own_span; }

// Set for the life of a thread the recorder made: all of its allocations are the recorder's.
extern MT_TLS bool tls_recorder_thread;

// Called by a hook entered while its thread is busy: whether this allocation is the recorder's
// own (its thread, or a scope marked kOwnAllocs with no handler of the program's in between).
bool own_turn();

void* own_malloc(size_t n);
void* own_calloc(size_t n, size_t size);
void* own_aligned(size_t align, size_t n);
// Resizes a block of the recorder's own or (from an own call) any block: the result is the
// recorder's own when the caller's turn is, else the program's allocator's.
void* own_realloc(void* p, size_t n, bool own_call);
void own_free(void* p);
size_t own_usable_size(void* p);

// pthread_create for the recorder's threads: all signals blocked in the new thread. With
// `keep_single` (the writer, which calls nothing of glibc's that the program's thread could be
// in at the same time but for the recorder's own mutexes), glibc is still told the process is
// single-threaded if only the program's one thread exists.
int spawn_recorder_thread(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*), void* arg,
                          bool keep_single);
// Runs fn(arg), one of the program's set*id calls, with glibc told of every thread: credentials
// are per thread in Linux, and glibc changes every thread's only when it knows of them (the
// writer thread must not keep the credentials the program gives up).
bool lift_single();            // (true: glibc was told of every thread; give it to drop_single)
void drop_single(bool lifted);
template <typename F>
int as_multithreaded(F call) {
  const bool lifted = lift_single();
  const int r = call();
  drop_single(lifted);
  return r;
}

}  // namespace memtide::rec
