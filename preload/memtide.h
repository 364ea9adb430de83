/* memtide.h: talk to the memtide recorder from the program it records.
 *
 * Works with or without the recorder: when the program does not run under `memtide run`
 * (libmemtide.so is not loaded), every call does nothing. C and C++.
 *
 *   memtide_mark("request 42 done");     a labelled point on the timeline
 *   memtide_pause(); ... memtide_resume();
 *                                        allocations made in between are not recorded
 *                                        (frees still are, so nothing looks leaked)
 *   memtide_alloc(p, n); memtide_free(p); report blocks of a custom pool allocator
 *
 * Link with -ldl on glibc older than 2.34.
 */
#ifndef MEMTIDE_H
#define MEMTIDE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MEMTIDE_RESOLVE_(type, name)                                  \
  static type fn_;                                                   \
  static int resolved_;                                              \
  if (!resolved_) {                                                  \
    fn_ = (type)dlsym(RTLD_DEFAULT, name);                           \
    resolved_ = 1;                                                   \
  }

static inline void memtide_mark(const char* label) {
  typedef void (*fn_t)(const char*);
  MEMTIDE_RESOLVE_(fn_t, "memtide_impl_mark")
  if (fn_) fn_(label);
}

static inline void memtide_pause(void) {
  typedef void (*fn_t)(void);
  MEMTIDE_RESOLVE_(fn_t, "memtide_impl_pause")
  if (fn_) fn_();
}

static inline void memtide_resume(void) {
  typedef void (*fn_t)(void);
  MEMTIDE_RESOLVE_(fn_t, "memtide_impl_resume")
  if (fn_) fn_();
}

static inline void memtide_alloc(const void* ptr, size_t size) {
  typedef void (*fn_t)(const void*, size_t);
  MEMTIDE_RESOLVE_(fn_t, "memtide_impl_alloc")
  if (fn_) fn_(ptr, size);
}

static inline void memtide_free(const void* ptr) {
  typedef void (*fn_t)(const void*);
  MEMTIDE_RESOLVE_(fn_t, "memtide_impl_free")
  if (fn_) fn_(ptr);
}

#undef MEMTIDE_RESOLVE_

#ifdef __cplusplus
}
#endif
#endif /* MEMTIDE_H */
