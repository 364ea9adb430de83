// The recorder's own memory (base.h: mem_alloc, mem_free): its chunks, tables and buffers, from
// mimalloc, never from the program's allocator.
#include <mimalloc.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "recorder/recorder.h"
#include "recorder/state.h"

namespace memtide::rec {

// With the system allocator serving the program, mimalloc's default heaps are the recorder's
// alone. With --allocator mimalloc the program uses them, so the recorder allocates from heaps
// of its own, one per thread (a mimalloc heap allocates only in the thread that made it; any
// thread may free). mimalloc deletes a thread's heaps when the thread ends, in its own key
// destructor, which runs before the recorder's (its key is older): the blocks still live move to
// the thread's backing heap and stay valid until the writer frees them, but the heap is gone. What
// the recorder allocates in that thread afterwards (the chunk of its ThreadExit record when the
// last one is full, the process stream's chunks for events after it) is mapped on its own.
namespace {
MT_TLS mi_heap_t* tls_heap = nullptr;
MT_TLS bool tls_heap_gone = false;

constexpr size_t kMappedHeader = 64;  // the mapping's length, then the block (aligned as mimalloc's)

void* mapped_alloc(size_t n) {
  const size_t total = (n + kMappedHeader + 4095) & ~size_t{4095};
  // (The system call: mmap() is the program's, interposed.) Zero pages.
  void* p = reinterpret_cast<void*>(
      syscall(SYS_mmap, nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (p == MAP_FAILED) return nullptr;
  *static_cast<size_t*>(p) = total;
  return static_cast<char*>(p) + kMappedHeader;
}

inline mi_heap_t* own_heap() {
  if (MT_UNLIKELY(!tls_heap)) tls_heap = mi_heap_new();
  return tls_heap;
}
}  // namespace

void mem_thread_ending() {
  if (recording.opts.allocator != AllocatorKind::Mimalloc) return;
  tls_heap = nullptr;
  tls_heap_gone = true;
}

// Without memory from mimalloc (its segments need more address space than a low RLIMIT_AS
// leaves), the recorder's blocks are mapped one by one: what is recorded is still written.
void* mem_alloc(size_t n) {
  BusyScope busy(kReentrant);  // (mimalloc maps memory through the hooks)
  void* p = nullptr;
  if (recording.opts.allocator != AllocatorKind::Mimalloc) {
    p = mi_zalloc(n);
  } else if (!tls_heap_gone) {
    mi_heap_t* h = own_heap();
    p = h ? mi_heap_zalloc(h, n) : nullptr;
  }
  return p ? p : mapped_alloc(n);
}
void* mem_alloc_uninit(size_t n) {
  BusyScope busy(kReentrant);
  void* p = nullptr;
  if (recording.opts.allocator != AllocatorKind::Mimalloc) {
    p = mi_malloc(n);
  } else if (!tls_heap_gone) {
    mi_heap_t* h = own_heap();
    p = h ? mi_heap_malloc(h, n) : nullptr;
  }
  return p ? p : mapped_alloc(n);
}
void mem_free(void* p) {
  BusyScope busy(kReentrant);
  if (MT_UNLIKELY(p && !mi_is_in_heap_region(p))) {
    char* base = static_cast<char*>(p) - kMappedHeader;
    syscall(SYS_munmap, base, *reinterpret_cast<size_t*>(base));
    return;
  }
  mi_free(p);
}

}  // namespace memtide::rec
