/* memtide.h: talk to the memtide recorder from the program it records.
 *
 * Works with or without the recorder: when the program does not run under `memtide run`
 * (libmemtide.so is not loaded), every call does nothing and costs one test of a null
 * pointer. The entry points are weak references that the dynamic linker binds to
 * libmemtide.so when it is preloaded. C and C++; nothing to link.
 *
 *   memtide_mark("request 42 done");     a labelled point on the timeline
 *   memtide_pause(); ... memtide_resume();
 *                                        allocations made in between are not recorded
 *                                        (frees still are, so nothing looks leaked)
 *   memtide_alloc(p, n); memtide_free(p); report blocks of a custom pool allocator
 *   memtide_sample(512 * 1024);          from now on record a sample, about one allocation per
 *                                        512 KiB allocated; memtide_sample(0): every one again
 *                                        (returns the interval in effect, 0 when not recording)
 */
#ifndef MEMTIDE_H
#define MEMTIDE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void memtide_impl_mark(const char* label) __attribute__((weak));
void memtide_impl_pause(void) __attribute__((weak));
void memtide_impl_resume(void) __attribute__((weak));
void memtide_impl_alloc(const void* ptr, size_t size) __attribute__((weak));
void memtide_impl_free(const void* ptr) __attribute__((weak));
size_t memtide_impl_sample(size_t bytes) __attribute__((weak));

static inline void memtide_mark(const char* label) {
  if (memtide_impl_mark) memtide_impl_mark(label);
}
static inline void memtide_pause(void) {
  if (memtide_impl_pause) memtide_impl_pause();
}
static inline void memtide_resume(void) {
  if (memtide_impl_resume) memtide_impl_resume();
}
static inline void memtide_alloc(const void* ptr, size_t size) {
  if (memtide_impl_alloc) memtide_impl_alloc(ptr, size);
}
static inline void memtide_free(const void* ptr) {
  if (memtide_impl_free) memtide_impl_free(ptr);
}
static inline size_t memtide_sample(size_t bytes) {
  return memtide_impl_sample ? memtide_impl_sample(bytes) : 0;
}

#ifdef __cplusplus
}
#endif
#endif /* MEMTIDE_H */
