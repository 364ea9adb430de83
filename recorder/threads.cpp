// Thread state: a thread's stream and unwind memo, made at its first event and handed to the
// writer by its exit destructor; the thread's stack bounds; thread names.
//
// Sections:
//   [1] Thread records
//   [2] Stack bounds
//   [3] Thread state: creation, exit, the target of an event
#include "recorder/threads.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "formats/record_builders.h"
#include "recorder/backing.h"
#include "recorder/events.h"
#include "recorder/lifecycle.h"
#include "recorder/proc_maps.h"
#include "recorder/recorder.h"
#include "recorder/state.h"
#include "recorder/trace_state.h"

extern "C" void* __libc_stack_end;  // the loader's: near the top of the main thread's stack

namespace memtide::rec {

MT_TLS ThreadState* tls_thread = nullptr;
MT_TLS int tls_busy = 0;
MT_TLS uintptr_t tls_busy_scope = 0;
MT_TLS int tls_exited = 0;

// ---------------------------------------------------------------------------------------
// [1] Thread records
// ---------------------------------------------------------------------------------------
void append_thread_record(Stream* s, fmt::RecordType type, uint64_t os_tid, const char* name) {
  uint8_t buf[64 + 64];
  if (!reserve(s, sizeof buf)) return;  // room first, then the clock (see write_alloc)
  begin_record(s);
  const uint64_t t = stream_time(s, now_ns());
  size_t n = 0;
  if (type == fmt::RecordType::ThreadStart) {
    n = fmt::encode_thread_start(buf, sizeof buf, s->last_time, fmt::ThreadStart{t, s->index, os_tid, 0});
  } else if (type == fmt::RecordType::ThreadName) {
    n = fmt::encode_thread_name(buf, sizeof buf, s->last_time,
                                fmt::ThreadName{t, s->index, std::string_view(name, strnlen(name, 63))});
  } else {
    n = fmt::encode_thread_exit(buf, sizeof buf, s->last_time, fmt::ThreadExit{t, s->index});
  }
  if (n && append_record(s, buf, n)) s->last_time = t;
  end_record(s);
}

void append_thread_start(Stream* s, pid_t tid) {
  append_thread_record(s, fmt::RecordType::ThreadStart, static_cast<uint64_t>(tid), nullptr);
  char path[64], name[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/comm", static_cast<int>(tid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  const ssize_t n = read(fd, name, sizeof name - 1);
  close(fd);
  if (n <= 0) return;
  name[n] = 0;
  if (name[n - 1] == '\n') name[n - 1] = 0;
  append_thread_record(s, fmt::RecordType::ThreadName, 0, name);
}

void on_thread_name(unsigned long thread, const char* name) {
  if (!name || tls_busy) return;
  if (thread != static_cast<unsigned long>(pthread_self())) return;  // only a thread's own name is attributed
  Target t;
  if (!acquire_slow(t)) return;
  {
    BusyScope busy;
    append_thread_record(t.s, fmt::RecordType::ThreadName, 0, name);
  }
  release(t);
}

// ---------------------------------------------------------------------------------------
// [2] Stack bounds
// ---------------------------------------------------------------------------------------
namespace {

// The calling thread's stack, for its unwind memo (and the leak scan). pthread_getattr_np
// takes the thread's own lock and allocates under it: when the thread's first allocation comes
// from inside the program's own call of it (the JVM's threads ask for their stack first thing),
// asking again would wait for that lock for ever. The bounds are then asked for at the
// thread's first walk after it (fast_backtrace), and until then the memo is not used.
MT_TLS int tls_in_getattr = 0;

// The mapping of /proc/self/maps that holds `addr` ([lo, hi)), and the end of the one before it.
bool mapping_of(uint64_t addr, uint64_t& lo, uint64_t& hi, uint64_t& prev_end) {
  bool found = false;
  prev_end = 0;
  read_mappings([&](const Mapping& m) {
    if (addr >= m.lo && addr < m.hi) {
      lo = m.lo;
      hi = m.hi;
      found = true;
      return false;
    }
    prev_end = m.hi;
    return true;
  });
  return found;
}

// The calling thread's stack without pthread_getattr_np, which allocates (with realloc, and
// for the main thread through stdio too): when the program has its own allocator, libc's calls
// reach it, and a first event of the thread from inside that allocator (rustc's jemalloc maps
// memory under its start-up lock) would wait for that allocator's lock for ever. The main
// thread's stack as glibc gives it: from the top of its mapping down by the stack size limit,
// at most to the mapping below; another thread's is its stack's mapping.
bool stack_from_maps(UnwindMemo* m) {
  const bool main_thread = syscall(SYS_gettid) == getpid();
  uint64_t here = reinterpret_cast<uint64_t>(__builtin_frame_address(0));
  if (main_thread && __libc_stack_end) here = reinterpret_cast<uint64_t>(__libc_stack_end);
  uint64_t lo = 0, hi = 0, prev_end = 0;
  if (!mapping_of(here, lo, hi, prev_end)) return false;
  if (main_thread) {
    rlimit rl{};
    uint64_t size = hi - prev_end;
    if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
      const uint64_t limit = static_cast<uint64_t>(rl.rlim_cur) & ~static_cast<uint64_t>(getpagesize() - 1);
      if (limit < size) size = limit;
    }
    lo = hi - size;
  }
  m->stack_lo = lo;
  m->stack_hi = hi;
  return true;
}

}  // namespace

void getattr_enter() { ++tls_in_getattr; }
void getattr_leave() { --tls_in_getattr; }

bool thread_stack_bounds(UnwindMemo* m) {
  m->stack_pending = tls_in_getattr != 0;
  if (m->stack_pending) return false;
  if (recording.foreign_malloc_in) return stack_from_maps(m);
  pthread_attr_t attr;
  if (!real.pthread_getattr_np || real.pthread_getattr_np(pthread_self(), &attr) != 0) return false;
  void* lo = nullptr;
  size_t size = 0;
  if (pthread_attr_getstack(&attr, &lo, &size) == 0 && lo && size) {
    m->stack_lo = reinterpret_cast<uint64_t>(lo);
    m->stack_hi = m->stack_lo + size;
  }
  pthread_attr_destroy(&attr);
  return true;
}

// ---------------------------------------------------------------------------------------
// [3] Thread state
// ---------------------------------------------------------------------------------------
namespace {

ThreadState* create_thread_state() {
  auto* ts = static_cast<ThreadState*>(mem_alloc(sizeof(ThreadState)));
  if (!ts) return nullptr;
  ts->tid = static_cast<pid_t>(syscall(SYS_gettid));
  thread_stack_bounds(&ts->memo);
  const uint32_t index = g_trace.next_stream.fetch_add(1, std::memory_order_relaxed);
  stream_init(&ts->stream, index, now_ns());
  pthread_mutex_lock(&recording.registry_mutex);
  ts->stream.reg_next = recording.registry;
  if (recording.registry) recording.registry->reg_prev = &ts->stream;
  recording.registry = &ts->stream;
  pthread_mutex_unlock(&recording.registry_mutex);
  tls_thread = ts;
  pthread_setspecific(recording.thread_key, ts);
  append_thread_start(&ts->stream, ts->tid);
  return ts;
}

}  // namespace

void thread_exit_destructor(void* p) {
  auto* ts = static_cast<ThreadState*>(p);
  if (!ts || ts != tls_thread) return;
  mem_thread_ending();
  BusyScope busy;
  append_thread_record(&ts->stream, fmt::RecordType::ThreadExit, 0, nullptr);
  tls_thread = nullptr;
  tls_exited = 1;  // later events of this thread go to the process stream
  seal_chunk(&ts->stream, /*last=*/true);
}

// ---------------------------------------------------------------------------------------
// [4] Events of a handler that interrupted the recorder
// ---------------------------------------------------------------------------------------
namespace {

std::atomic<uintptr_t> g_restorer{0};

// The restorer the kernel returns through from a signal handler (glibc's __restore_rt, which it
// passes with every sigaction): the first word of each signal frame on the stack. Learnt once
// (learn_signal_restorer); never asked of the kernel here, where every allocation of the
// unwinder's would pay for it.
uintptr_t signal_restorer() { return g_restorer.load(std::memory_order_relaxed); }

}  // namespace

void learn_signal_restorer() {
  if (g_restorer.load(std::memory_order_relaxed)) return;
  // A handler of any program's, or a no-op of ours on a real-time signal left at its default
  // (set and put back at start-up, while the program has no thread of its own).
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction old;
    if (sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_DFL || old.sa_handler == SIG_IGN || !old.sa_restorer)
      continue;
    g_restorer.store(reinterpret_cast<uintptr_t>(old.sa_restorer), std::memory_order_relaxed);
    return;
  }
  for (int sig = SIGRTMAX; sig >= SIGRTMIN; --sig) {
    struct sigaction old, mine, back;
    if (sigaction(sig, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
    std::memset(&mine, 0, sizeof mine);
    mine.sa_handler = [](int) {};
    if (sigaction(sig, &mine, nullptr) != 0) continue;
    const bool read = sigaction(sig, &old, &back) == 0;
    if (read && back.sa_restorer) g_restorer.store(reinterpret_cast<uintptr_t>(back.sa_restorer), std::memory_order_relaxed);
    return;
  }
}

bool handler_since(uintptr_t scope) {
  const uintptr_t top = scope & ~uintptr_t{7};
  const ThreadState* ts = tls_thread;
  if (!top || !ts || ts->memo.stack_pending || top < ts->memo.stack_lo || top >= ts->memo.stack_hi) return false;
  const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  if (on_resolver_stack(here)) return false;  // (asynchronous signals are blocked there)
  if (here < ts->memo.stack_lo || here >= ts->memo.stack_hi) return true;  // on another stack: sigaltstack's
  if (here >= top) return false;
  // A signal frame between here and the innermost busy scope (one the handler's own call
  // opened, as the backing allocator's scope around its mmap, lies below the frame): the
  // restorer, then a ucontext whose interrupted stack pointer lies within the busy code's frames.
  const uintptr_t restorer = signal_restorer();
  if (!restorer) return false;
  for (auto p = (here + 7) & ~uintptr_t{7}; p + sizeof(uintptr_t) + sizeof(ucontext_t) <= top; p += sizeof(uintptr_t)) {
    if (*reinterpret_cast<const uintptr_t*>(p) != restorer) continue;
    const auto* uc = reinterpret_cast<const ucontext_t*>(p + sizeof(uintptr_t));
    const auto sp = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
    if (sp > p && sp <= top) return true;
  }
  return false;
}

void note_busy_reentry(bool program_call) {
  const uintptr_t top = tls_busy_scope;
  if (!top) return;  // (the writer thread, a fork)
  // Around the backing allocator or the recorder's heap (kReentrant alone), which never
  // allocate through the hooks, an allocation or a free is a handler's; the mappings are theirs.
  // In a kOwnAllocs scope the answer is the one own_turn gave the allocation.
  const bool handler = (top & kOwnAllocs) == kReentrant ? program_call : handler_since(top);
  if (handler) g_trace.lost_events.fetch_add(1, std::memory_order_relaxed);
}

bool acquire_slow(Target& t, bool even_paused) {
  if (tls_busy) {
    note_busy_reentry(/*program_call=*/true);
    return false;
  }
  if (!ensure_started()) return false;
  if (!even_paused && recording.paused.load(std::memory_order_relaxed)) return false;
  if (!tls_thread && !tls_exited) {
    BusyScope busy(kOwnAllocs);  // (pthread_setspecific allocates)
    create_thread_state();
  }
  if (tls_thread) {
    t = Target{tls_thread, &tls_thread->stream, false};
    return true;
  }
  // A thread without its own stream records into the process stream (which never owns the
  // time: event_time_read).
  pthread_mutex_lock(&recording.shared_mutex);
  t = Target{nullptr, &recording.shared, true};
  return true;
}

}  // namespace memtide::rec
