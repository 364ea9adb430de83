// The recorder: what the preload's shims call. Every entry point is safe to call from any
// thread at any time (before start-up, during exit, re-entrantly from inside the recorder's
// own work, after recording stopped); when it cannot record, it does nothing.
//
// Ordering (see docs/ARCHITECTURE.md): allocation records are timestamped after the real
// allocator returned, free records before the real free runs, so ordering by time is exact
// even when one thread frees an address and another immediately gets it back.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "formats/check.h"
#include "formats/records.h"
#include "recorder/sampling.h"

namespace memtide::rec {

// Start-up from the preload's constructor (also triggered lazily by the first event).
void start();
// Final flush at normal process exit (the preload's destructor), with the status exit() was
// given (return from main included), as the handler install_exit_handlers registers saw it.
void finish_at_exit();
// Final flush before _exit / _Exit.
void finish_immediate_exit(int status);
// quick_exit(status) is about to run the at_quick_exit handlers: the last of them, registered by
// install_exit_handlers, writes the End record with this status.
void on_quick_exit(int status);
// From the preload's constructor: an at_quick_exit handler that ends the trace on quick_exit.
void install_quick_exit_handler();
// Just before the program's main: an on_exit handler that keeps exit()'s status (return from
// main included; exit handlers get no other way to it). Registered then, after libc registered
// the loader's destructor call, so that it runs before the destructors, where the trace ends.
void install_exit_status_handler();

// Heap events. `p` null (a failed allocation) is ignored. `frame`: the calling shim's frame
// pointer (__builtin_frame_address(0) in a function compiled with frame pointers), from which
// the stack is unwound starting at the shim's caller; null: unwound from here, with
// memtide's own frames skipped.
// Exact mode only: the shims call alloc_hook, which takes sampled mode's allocations.
void on_alloc(fmt::Api api, void* p, size_t size, const void* frame = nullptr);
// The free of `p`, to be recorded (free_hook has decided so).
void on_free(fmt::Api api, void* p);
// Sampled mode: an allocation that holds a sample point, standing for `weight` bytes.
void on_alloc_sampled(fmt::Api api, void* p, size_t size, const void* frame, uint64_t weight);

// What the shims call. In sampled mode an unsampled allocation costs a load, a thread-local
// subtraction and a branch here, and an unsampled block's free one filter load: no call.
MT_ALWAYS_INLINE void alloc_hook(fmt::Api api, void* p, size_t size, const void* frame) {
  if (MT_UNLIKELY(sampling::active())) {
    if (const uint64_t weight = sampling::take(p, size)) on_alloc_sampled(api, p, size, frame, weight);
    return;
  }
  on_alloc(api, p, size, frame);
}
MT_ALWAYS_INLINE void free_hook(fmt::Api api, void* p) {
  if (!sampling::record_free(reinterpret_cast<uintptr_t>(p))) return;
  on_free(api, p);
}
// Both halves of a realloc that moved or resized a block: the free is timestamped by
// on_realloc_begin (before the real call), the allocation after it.
struct ReallocTicket {
  uint64_t free_time = 0;
  bool armed = false;
  void* pending = nullptr;  // the stream whose pending time holds free_time until the end
  void* reused = nullptr;   // or the stream whose record in progress reuses its time (no clock read)
  bool old_sampled = false; // sampled mode: the old block was a sampled one (forgotten until the call succeeds)
};
ReallocTicket on_realloc_begin(void* old_ptr);
void on_realloc_end(const ReallocTicket& t, fmt::Api api, void* old_ptr, void* new_ptr, size_t size,
                    const void* frame = nullptr);

// Anonymous mappings.
void on_mmap(void* p, size_t length, int flags, int fd, const void* frame = nullptr);
void on_munmap_begin(void* p, size_t length);
void on_mremap(void* old_p, size_t old_len, void* new_p, size_t new_len, const void* frame = nullptr);

// Modules, threads, exec.
void on_modules_changed();
void on_thread_name(unsigned long pthread, const char* name);
// Around the program's calls of pthread_getattr_np, which holds the thread's own lock while it
// allocates: the recorder must not call it then (threads.cpp, thread_stack_bounds).
void getattr_enter();
void getattr_leave();

// The trace file's descriptor stays open whatever the program closes (daemons close every
// descriptor): close, close_range and closefrom leave it out, and a dup2 or dup3 onto its
// number first moves it to another one. It is not open as far as the program knows: the
// program's calls on it fail with EBADF.
bool is_trace_fd(int fd);
int trace_fd();  // -1: none
void move_trace_fd();
// The program's fcntl(fd, F_DUPFD or F_DUPFD_CLOEXEC, min): the number it would get untraced,
// the trace's descriptor moved away should it be that one.
int program_dupfd(int fd, int cmd, long min);
// A pipe made for the recorder (libunwind's, to check addresses before reading them): both
// ends moved out of the program's reach.
void own_pipe_made(int fds[2]);
// Prepares a program about to exec: flushes the trace; returns the environment to pass
// (adjusted for --no-follow), valid until the exec returns.
char* const* on_exec_begin(char* const envp[]);
void on_exec_failed();

// memtide.h
void mark(const char* label);
// Switches between exact (0) and sampled recording of about one allocation per `bytes`, and
// records when; returns the interval in effect (0 when exact or not recording).
uint64_t set_sampling(uint64_t bytes);
void pause();
void resume();

// Whether the calling thread is inside the recorder's own work (hooks then only forward).
bool busy();

// Set while the calling thread runs recorder code or the backing allocator: any hook
// entered meanwhile (mimalloc's mmap, calloc inside pthread_setspecific) only forwards.
extern __attribute__((tls_model("initial-exec"))) __thread int tls_busy;
// The thread's innermost live BusyScope (its address on the stack, the low bit set when the
// scope calls code that may enter the hooks: kReentrant), or 0 while it is busy without one
// (the writer thread, a fork). A hook entered while busy inside a scope that does not expect
// it, with a signal frame between the two, is a signal handler's (note_busy_reentry).
extern __attribute__((tls_model("initial-exec"))) __thread uintptr_t tls_busy_scope;
// A hook entered while its thread is busy forwards the call unrecorded. That is the recorder's
// own work (the backing allocator's mmap, a calloc in pthread_setspecific) unless a signal
// handler of the program's interrupted the recorder: its events cannot be recorded then (the
// stream is in the middle of a record), and are counted as lost (the End record's lost_events).
// `program_call`: an allocation, a free or a call of memtide.h's, not a mapping.
void note_busy_reentry(bool program_call);

// Marks the calling thread busy for its lifetime (heaptrack's RecursionGuard): a way out of
// the scope that forgets to lower the flag cannot be written. Costs what the two stores did.
// A handler of the program's may run between the two stores, so their order is kept: the scope
// is named before the thread counts as busy, and stays named until it no longer does (a busy
// thread with no scope reads as the writer's, whose reentries are never a handler's).
inline constexpr uintptr_t kReentrant = 1;  // BusyScope around calls that may enter the hooks
// ... whose allocations are the recorder's own (libdw's, pthread_setspecific's): own_heap.h.
inline constexpr uintptr_t kOwnAllocs = 3;
class BusyScope {
 public:
  explicit BusyScope(uintptr_t flags = 0) : outer_(tls_busy_scope) {
    MEMTIDE_CHECK(tls_busy >= 0);
    tls_busy_scope = reinterpret_cast<uintptr_t>(this) | flags;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    ++tls_busy;
  }
  ~BusyScope() {
    MEMTIDE_CHECK(tls_busy > 0);
    --tls_busy;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    tls_busy_scope = outer_;
  }
  BusyScope(const BusyScope&) = delete;
  BusyScope& operator=(const BusyScope&) = delete;

 private:
  uintptr_t outer_;
};

template <typename R, typename... P, typename... A>
inline R call_backing(R (*fn)(P...), A... args) {
  BusyScope busy(kReentrant);
  return fn(args...);
}

}  // namespace memtide::rec
