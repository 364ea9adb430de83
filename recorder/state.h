// Thread state (TLS) and the process-wide state of the recording.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>

#include "recorder/base.h"
#include "recorder/options.h"
#include "recorder/stream.h"
#include "recorder/unwind.h"

namespace memtide::rec {

struct StackCacheEntry {
  uint64_t hash;
  uint32_t id;
};
inline constexpr unsigned kStackCacheSize = 512;  // per thread, direct-mapped

// The trie path (node id and path key per depth, root first) of the last stack this thread
// added to the stack table: the next new stack starts its walk below the part they share
// (stacks.cpp).
inline constexpr int kTriePathMax = 128;
struct TriePath {
  int n = 0;
  uint32_t node[kTriePathMax];
  uint64_t key[kTriePathMax];
  uint64_t ip[kTriePathMax];
};

struct ThreadState {
  Stream stream;
  pid_t tid = 0;
  StackCacheEntry cache[kStackCacheSize];
  UnwindMemo memo;
  TriePath path;
  // The return addresses of a stack walk (2 * (max_depth + kExtraFrames) + 1 slots, made at
  // the thread's first walk): on the heap, so that a walk's use of the program's stack does not
  // grow with --max-depth (a thread may have a 16 KiB stack).
  void** walk_ips = nullptr;
};

enum State : int { kUninit = 0, kStarting, kActive, kStopped };

// The recording's process-wide state: its options, the trace file, the registry of streams, the
// process stream and the writer's queue. One instance, `recording`, constant-initialised: hooks
// may run before any constructor.
struct Recording {
  Options opts;
  std::atomic<int> state{kUninit};
  std::atomic<bool> paused{false};
  bool started = false;       // start() ran (file open, writer running)
  pid_t pid = 0;
  int fd = -1;
  char path[4096] = {};
  const char* manifest = nullptr;  // MEMTIDE_MANIFEST at start-up (--no-follow takes it out of the environment)
  uint32_t chunk_first = kFirstChunkSize, chunk_max = kMaxChunkSize;  // (kTestChunkEnv)

  pthread_mutex_t registry_mutex = MT_MUTEX_INITIALIZER;
  Stream* registry = nullptr;  // all streams with data the writer must visit

  // The process stream (index 0): shared by every thread under `shared_mutex`; also takes
  // events of threads whose state is gone (after their exit destructor).
  pthread_mutex_t shared_mutex = MT_MUTEX_INITIALIZER;
  Stream shared;

  pthread_mutex_t queue_mutex = MT_MUTEX_INITIALIZER;
  pthread_cond_t queue_cond = PTHREAD_COND_INITIALIZER;
  pthread_key_t thread_key{};

  bool own_range_known = false;
  uintptr_t own_lo = 0, own_hi = 0;              // libmemtide's text, skipped in stacks
  // Set when malloc or realloc, as the loader binds them, are not libmemtide's (nor libc's
  // through it): the program has an allocator of its own, which libc's own calls reach too.
  // Where it is defined (a module's path, as the loader has it), for ProcessInfo's options.
  const char* foreign_malloc_in = nullptr;
};
extern Recording recording MT_HIDDEN;

extern MT_TLS ThreadState* tls_thread;
extern MT_TLS int tls_busy;
extern MT_TLS int tls_exited;

}  // namespace memtide::rec
