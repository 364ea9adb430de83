// The recorder's entry points: start-up, the event hot paths, threads, fork, exec, exit and
// fatal signals.
//
// Sections:
//   [1] Globals and start-up
//   [2] Thread state
//   [3] Hot paths: alloc, free, realloc
//   [4] Anonymous mappings
//   [5] Modules, thread names, markers, pause
//   [6] Exit, exec, fork, fatal signals
#include "recorder/recorder.h"
#include "recorder/sampling.h"

#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "formats/encoder.h"
#include "recorder/backing.h"
#include "recorder/internal.h"

extern "C" char** environ;
extern "C" void* __libc_stack_end;  // the loader's: near the top of the main thread's stack

namespace memtide::rec {

Global g;
MT_TLS ThreadState* tls_thread = nullptr;
MT_TLS int tls_busy = 0;
MT_TLS int tls_exited = 0;

// ---------------------------------------------------------------------------------------
// [1] Globals and start-up
// ---------------------------------------------------------------------------------------
namespace {

constexpr int kExtraFrames = 6;  // room for our own frames at the top of an unwound stack
pthread_mutex_t g_start_mutex = PTHREAD_MUTEX_INITIALIZER;

void thread_exit_destructor(void* p);
void install_fork_handlers();
void install_signal_handlers();

// Whether `p` is in libmemtide's code (false when its range is not known).
bool is_own_code(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return g.own_range_known && a >= g.own_lo && a < g.own_hi;
}

// Where `name` is defined ahead of libmemtide, as the loader binds the calls of every module to
// it (libc's own included), or null when that is libmemtide's. A program that only takes the
// function's address (node, not position-independent) has a stub of its own that dlsym finds
// but that is no definition: its calls still reach libmemtide.
const void* defined_ahead(const char* name) {
  void* first = dlsym(RTLD_DEFAULT, name);
  if (!first || is_own_code(first)) return nullptr;
  Dl_info info{};
  void* entry = nullptr;
  const int found = dladdr1(first, &info, &entry, RTLD_DL_SYMENT);
  const auto* sym = static_cast<const ElfW(Sym)*>(entry);
  if (!found || !sym || sym->st_shndx == SHN_UNDEF ||
      !info.dli_sname || std::strcmp(info.dli_sname, name) != 0 || info.dli_saddr != first)
    return nullptr;
  return first;
}

// "LD_PRELOAD=<list>" without libmemtide's own entry (names are separated by colons or
// spaces), written to `buf`; nullptr when no other entry is left.
const char* preload_without_own(const char* list, char* buf, size_t cap) {
  static const char kName[] = "LD_PRELOAD=";
  size_t n = sizeof kName - 1;
  std::memcpy(buf, kName, n);
  bool any = false;
  for (const char* p = list; *p;) {
    while (*p == ':' || *p == ' ') ++p;
    const char* end = p;
    while (*end && *end != ':' && *end != ' ') ++end;
    if (end == p) break;
    const char* base = end;
    while (base > p && base[-1] != '/') --base;
    const bool own = static_cast<size_t>(end - base) == 13 && std::strncmp(base, "libmemtide.so", 13) == 0;
    const size_t len = static_cast<size_t>(end - p);
    if (!own && n + len + 2 < cap) {
      if (any) buf[n++] = ':';
      std::memcpy(buf + n, p, len);
      n += len;
      any = true;
    }
    p = end;
  }
  buf[n] = 0;
  return any ? buf : nullptr;
}

// Copies `env` into `out` (room for `cap` pointers, the last for the null) without the
// recorder's variables (MEMTIDE_*) and with libmemtide left out of LD_PRELOAD (its new value
// in `preload_buf`): what a program not followed (--no-follow) and its children see.
void env_without_own(char* const* env, char** out, size_t cap, char* preload_buf, size_t preload_cap) {
  size_t n = 0;
  for (size_t i = 0; env[i] && n + 1 < cap; ++i) {
    char* e = env[i];
    if (std::strncmp(e, "MEMTIDE_", 8) == 0) continue;
    if (std::strncmp(e, "LD_PRELOAD=", 11) == 0) {
      e = const_cast<char*>(preload_without_own(e + 11, preload_buf, preload_cap));
      if (!e) continue;
    }
    out[n++] = e;
  }
  out[n] = nullptr;
}

// --no-follow: not followed means not touched. The program and whatever it starts see the
// environment they would see untraced. In place, without setenv (which allocates): the
// variables' strings stay where they are (g.opts and g.manifest point into them).
char g_preload_value[4096];
void leave_environment() {
  if (!environ) return;
  size_t n = 0;
  while (environ[n]) ++n;
  // The array is rewritten in place: the result is never longer.
  env_without_own(environ, environ, n + 1, g_preload_value, sizeof g_preload_value);
}

// Phase 1, possibly from inside the very first allocation hook: everything but the file
// and the writer thread. Events are buffered from here on.
void early_init() {
  pthread_mutex_lock(&g_start_mutex);
  if (g.state.load(std::memory_order_acquire) != kUninit) {
    pthread_mutex_unlock(&g_start_mutex);
    return;
  }
  g.state.store(kStarting, std::memory_order_release);
  g.opts = options_from_env([](const char* env, const char* value, const char* problem) {
    message("ignoring %s=%s: %s", env, value, problem);
  });
  if (g.opts.allocator == AllocatorKind::Mimalloc) use_mimalloc_backing();
  sampling::configure(g.opts.sample, g.opts.sample_seed);
  if (const char* v = std::getenv(kTestChunkEnv)) {
    const unsigned long n = std::strtoul(v, nullptr, 10);
    if (n >= 16 && n <= kMaxChunkSize) g.chunk_first = g.chunk_max = static_cast<uint32_t>(n);
  }
  g.pid = getpid();
  g.start_time = now_ns();
  stream_init(&g.shared, 0, g.start_time);
  pthread_key_create(&g.thread_key, thread_exit_destructor);
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  find_own_range();
  if (g.own_range_known) {
    const void* first = defined_ahead("malloc");
    if (!first) first = defined_ahead("realloc");
    Dl_info info{};
    if (first) g.foreign_malloc_in = dladdr(first, &info) && info.dli_fname && *info.dli_fname ? info.dli_fname : "the program";
  }
  pthread_mutex_lock(&g.shared_mutex);
  append_process_info(&g.shared);
  pthread_mutex_unlock(&g.shared_mutex);
  g.manifest = std::getenv("MEMTIDE_MANIFEST");
  if (!g.opts.follow) leave_environment();  // (before the program's main)
  g.state.store(kActive, std::memory_order_release);
  pthread_mutex_unlock(&g_start_mutex);
}

bool ensure_started() {
  const int s = g.state.load(std::memory_order_acquire);
  if (MT_LIKELY(s == kActive)) return true;
  if (s != kUninit) return false;
  if (!backing_ready()) return false;
  const int saved = tls_busy;
  tls_busy = 1;
  early_init();
  tls_busy = saved;
  return g.state.load(std::memory_order_acquire) == kActive;
}

// A program whose executable (or a library loaded before libmemtide) defines malloc itself
// (a sanitizer's runtime linked in, an allocator built into the program) keeps it: the
// program's calls never reach the interposer, and the trace would be empty without a word.
void say_if_malloc_is_not_ours() {
  const char* where = g.foreign_malloc_in;
  if (!where) return;
  const bool sanitizer = dlsym(RTLD_DEFAULT, "__asan_init") || dlsym(RTLD_DEFAULT, "__msan_init") ||
                         dlsym(RTLD_DEFAULT, "__tsan_init") || dlsym(RTLD_DEFAULT, "__hwasan_init");
  message("malloc is defined in %s%s, ahead of libmemtide: the allocations made through it are not recorded, "
          "and memory mappings are recorded without their stacks%s",
          where, sanitizer ? " (a sanitizer's runtime)" : "", sanitizer ? "; record a build without the sanitizer" : "");
}

}  // namespace

void start() {
  tls_busy++;
  resolve_backing();
  early_init();
  pthread_mutex_lock(&g_start_mutex);
  if (!g.started && g.state.load() == kActive) {
    g.started = true;
    process_counters_reset();
    if (open_trace_file(/*child=*/false)) {
      modules_scan();
      install_fork_handlers();
      install_signal_handlers();
      writer_start();
      say_if_malloc_is_not_ours();
    } else {
      g.state.store(kStopped, std::memory_order_release);
    }
  }
  pthread_mutex_unlock(&g_start_mutex);
  tls_busy--;
}

bool busy() { return tls_busy != 0; }

// ---------------------------------------------------------------------------------------
// [2] Thread state
// ---------------------------------------------------------------------------------------
namespace {

void append_thread_record(Stream* s, fmt::RecordType type, uint64_t a, uint64_t b, const char* name) {
  uint8_t buf[64 + 64];
  if (!reserve(s, sizeof buf)) return;  // room first, then the clock (see write_alloc)
  begin_record(s);
  const uint64_t t = stream_time(s, now_ns());
  fmt::RecordBuilder rb(buf, sizeof buf, type);
  rb.varint(t - s->last_time).varint(s->index);
  if (type == fmt::RecordType::ThreadStart) rb.varint(a).varint(b);
  if (type == fmt::RecordType::ThreadName) rb.bytes(name, strnlen(name, 63));
  const size_t n = rb.finish();
  if (n && append_record(s, buf, n)) s->last_time = t;
  end_record(s);
}

// The calling thread's stack, for its unwind memo (and the leak scan). pthread_getattr_np
// takes the thread's own lock and allocates under it: when the thread's first allocation comes
// from inside the program's own call of it (the JVM's threads ask for their stack first thing),
// asking again would wait for that lock for ever. The bounds are then asked for at the
// thread's first walk after it (fast_backtrace), and until then the memo is not used.
MT_TLS int tls_in_getattr = 0;

}  // namespace

void getattr_enter() { ++tls_in_getattr; }
void getattr_leave() { --tls_in_getattr; }

namespace {

uint64_t parse_hex(const char*& p, const char* end) {
  uint64_t v = 0;
  for (; p < end; ++p) {
    const char c = *p;
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) break;
    v = v << 4 | static_cast<uint64_t>(d);
  }
  return v;
}

// The mapping of /proc/self/maps that holds `addr` ([lo, hi)), and the end of the one before
// it, read with system calls only.
bool mapping_of(uint64_t addr, uint64_t& lo, uint64_t& hi, uint64_t& prev_end) {
  const int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC));
  if (fd < 0) return false;
  char buf[4096];
  size_t have = 0;
  bool skipping = false;  // the rest of a line longer than the buffer
  bool found = false;
  prev_end = 0;
  for (;;) {
    const ssize_t n = syscall(SYS_read, fd, buf + have, sizeof buf - have);
    if (n <= 0) break;
    have += static_cast<size_t>(n);
    const char* p = buf;
    const char* const end = buf + have;
    while (!found) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
      if (!nl && !(p == buf && have == sizeof buf)) break;  // an incomplete line: read on
      if (!skipping) {
        const char* q = p;
        const uint64_t a = parse_hex(q, end);
        if (q < end && *q == '-') ++q;
        const uint64_t b = parse_hex(q, end);
        if (addr >= a && addr < b) {
          lo = a;
          hi = b;
          found = true;
          break;
        }
        prev_end = b;
      }
      skipping = !nl;
      p = nl ? nl + 1 : end;
    }
    if (found) break;
    have = static_cast<size_t>(end - p);
    std::memmove(buf, p, have);
  }
  syscall(SYS_close, fd);
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

bool thread_stack_bounds(UnwindMemo* m) {
  m->stack_pending = tls_in_getattr != 0;
  if (m->stack_pending) return false;
  if (g.foreign_malloc_in) return stack_from_maps(m);
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

namespace {

ThreadState* create_thread_state() {
  auto* ts = static_cast<ThreadState*>(mem_alloc(sizeof(ThreadState)));
  if (!ts) return nullptr;
  ts->tid = static_cast<pid_t>(syscall(SYS_gettid));
  thread_stack_bounds(&ts->memo);
  const uint32_t index = g.next_stream.fetch_add(1, std::memory_order_relaxed);
  if (index >= 2) clock_share();  // a second thread records (before its first event)
  stream_init(&ts->stream, index, now_ns());
  pthread_mutex_lock(&g.registry_mutex);
  ts->stream.reg_next = g.registry;
  if (g.registry) g.registry->reg_prev = &ts->stream;
  g.registry = &ts->stream;
  pthread_mutex_unlock(&g.registry_mutex);
  tls_thread = ts;
  pthread_setspecific(g.thread_key, ts);
  append_thread_record(&ts->stream, fmt::RecordType::ThreadStart, static_cast<uint64_t>(ts->tid), 0, nullptr);
  char path[64], name[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/comm", static_cast<int>(ts->tid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const ssize_t n = read(fd, name, sizeof name - 1);
    close(fd);
    if (n > 0) {
      name[n] = 0;
      if (name[n - 1] == '\n') name[n - 1] = 0;
      append_thread_record(&ts->stream, fmt::RecordType::ThreadName, 0, 0, name);
    }
  }
  return ts;
}

void thread_exit_destructor(void* p) {
  auto* ts = static_cast<ThreadState*>(p);
  if (!ts || ts != tls_thread) return;
  mem_thread_ending();
  tls_busy++;
  append_thread_record(&ts->stream, fmt::RecordType::ThreadExit, 0, 0, nullptr);
  tls_thread = nullptr;
  tls_exited = 1;  // later events of this thread go to the process stream
  seal_chunk(&ts->stream, /*last=*/true);
  tls_busy--;
}

// The stream for an event of the calling thread, locked if it is the process stream.
// Returns null when the event cannot be recorded.
struct Target {
  ThreadState* ts;
  Stream* s;
  bool shared;
};

bool acquire_slow(Target& t, bool even_paused = false) {
  if (tls_busy || !ensure_started()) return false;
  if (!even_paused && g.paused.load(std::memory_order_relaxed)) return false;
  if (!tls_thread && !tls_exited) {
    tls_busy++;
    create_thread_state();
    tls_busy--;
  }
  if (tls_thread) {
    t = Target{tls_thread, &tls_thread->stream, false};
    return true;
  }
  // A thread without its own stream records into the process stream: it counts as a second
  // thread for event times (event_time), as it may be one.
  clock_share();
  pthread_mutex_lock(&g.shared_mutex);
  t = Target{nullptr, &g.shared, true};
  return true;
}

// The calling thread's state when its event goes to its own stream now (the common case: the
// recording runs, the thread has its stream and is not inside the recorder), else null.
// Frees are recorded while paused (`even_paused`): a block made before the pause may be
// released in it.
inline ThreadState* own_stream_thread(bool even_paused) {
  ThreadState* ts = tls_thread;
  return MT_LIKELY(ts && !tls_busy && g.state.load(std::memory_order_relaxed) == kActive &&
                   (even_paused || !g.paused.load(std::memory_order_relaxed)))
             ? ts
             : nullptr;
}

inline bool acquire(Target& t) {
  if (ThreadState* ts = own_stream_thread(false)) {
    t = Target{ts, &ts->stream, false};
    return true;
  }
  return acquire_slow(t);
}

inline void release(const Target& t) {
  if (MT_UNLIKELY(t.shared)) pthread_mutex_unlock(&g.shared_mutex);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// [3] Hot paths
//
// alloc budget: unwind (the bulk: ~100-300 ns with libunwind's per-thread cache), a hash of
// the return addresses and a thread-local cache probe, one clock read, a ~10-byte append.
// free budget: one clock read and a ~6-byte append; no stack.
// ---------------------------------------------------------------------------------------
namespace {

// The leading frames of `ips` (return addresses, as void* or uint64_t) inside libmemtide.
template <class Ip>
inline int skip_own_frames(const Ip* ips, int n) {
  int skip = 0;
  if (g.own_range_known) {
    while (skip < n && (uintptr_t)ips[skip] >= g.own_lo && (uintptr_t)ips[skip] < g.own_hi) ++skip;
  }
  return skip;
}
// The frames kept of `n` after `skip`: at most --max-depth.
inline int kept_frames(int n, int skip) {
  const int depth = static_cast<int>(g.opts.max_depth);
  return n - skip < depth ? n - skip : depth;
}

std::atomic<uint64_t> g_verify_stacks{0}, g_verify_fast{0}, g_verify_diff{0};

// MEMTIDE_UNWIND=verify: both unwinders on every stack; the trace gets libunwind's.
MT_NOINLINE int unwind_verified(void** ips, int cap, int& skip, UnwindMemo* memo, const UnwindStart* from) {
  // One more slot for the fast side: fast_backtrace is itself one of our frames.
  void** fast = static_cast<void**>(__builtin_alloca(static_cast<size_t>(cap + 1) * sizeof(void*)));
  const int nf = fast_backtrace(fast, cap + 1, memo, from);
  const int nl = unw_backtrace(ips, cap);
  skip = skip_own_frames(ips, nl);
  g_verify_stacks.fetch_add(1, std::memory_order_relaxed);
  if (nf < 0) return nl;
  g_verify_fast.fetch_add(1, std::memory_order_relaxed);
  const int sf = skip_own_frames(fast, nf);
  const int a = kept_frames(nf, sf);
  const int b = kept_frames(nl, skip);
  if (a != b || std::memcmp(fast + sf, ips + skip, static_cast<size_t>(a) * sizeof(void*)) != 0) {
    if (g_verify_diff.fetch_add(1, std::memory_order_relaxed) < 3) {
      int i = 0;
      while (i < a && i < b && fast[sf + i] == ips[skip + i]) ++i;
      message("unwind verify: stacks differ at frame %d: fast %d frames (%p), libunwind %d frames (%p)", i, a,
              i < a ? fast[sf + i] : nullptr, b, i < b ? ips[skip + i] : nullptr);
    }
  }
  return nl;
}

MT_NOINLINE uint32_t walk_stack(ThreadState* ts, Stream* stream, const void* frame, const SeenLookup* pre);

// A stack found again with its id (most allocations) takes only seen_find; the others are
// walked (walk_stack).
MT_ALWAYS_INLINE uint32_t capture_stack(const Target& t, const void* frame) {
  SeenLookup pre;
  if (MT_LIKELY(frame && t.ts && g.opts.unwind == UnwindKind::Fast)) {
    // The shim's frame: saved rbp, then its return address; its caller's sp is just above.
    const auto* fp = static_cast<const uint64_t*>(frame);
    const UnwindStart start{fp[1], reinterpret_cast<uint64_t>(fp + 2), fp[0]};
    UnwindMemo& m = t.ts->memo;
    const SeenStack* e = seen_find(&m, start, static_cast<int>(g.opts.max_depth) + kExtraFrames, &pre);
    // The same stack if the same frames are skipped and kept as when the id was given (as
    // stack_id checks it). Those depend only on the entry's return addresses and on
    // libmemtide's range, so they are as then unless that range became known since.
    if (e && e->has_id && MT_LIKELY(e->id_own_known == g.own_range_known)) {
      m.carry = nullptr;
      return e->id;
    }
  }
  return walk_stack(t.ts, t.s, frame, &pre);
}

MT_NOINLINE uint32_t walk_stack(ThreadState* ts, Stream* stream, const void* frame, const SeenLookup* pre) {
  const int cap = static_cast<int>(g.opts.max_depth) + kExtraFrames;
  void** ips = static_cast<void**>(__builtin_alloca(static_cast<size_t>(cap) * sizeof(void*)));
  int n = -1;
  int skip = 0;
  UnwindStart start;
  if (frame) {
    const auto* fp = static_cast<const uint64_t*>(frame);
    start = UnwindStart{fp[1], reinterpret_cast<uint64_t>(fp + 2), fp[0]};
  }
  const UnwindStart* from = frame ? &start : nullptr;
  if (MT_LIKELY(g.opts.unwind == UnwindKind::Fast)) {
    n = fast_backtrace(ips, cap, ts ? &ts->memo : nullptr, from, /*id_ok=*/true, pre);
    if (n == kSeenStackId) {
      // A stack found again with its id (by fast_backtrace's own lookup, or seen_find's whose
      // range test failed): the same one if the same frames are skipped and kept.
      UnwindMemo& m = ts->memo;
      SeenStack* e = m.carry;
      if (e->id_own_known == g.own_range_known) {
        m.carry = nullptr;
        return e->id;
      }
      const int s = skip_own_frames(e->ip, e->n);
      if (e->id_skip == s && e->id_n == kept_frames(e->n, s)) {
        m.carry = nullptr;
        return e->id;
      }
      std::memcpy(ips, e->ip, static_cast<size_t>(e->n) * sizeof(uint64_t));
      n = e->n;
      m.carry_out = ips;
      m.carry_n = n;
    }
  } else if (g.opts.unwind == UnwindKind::Verify) {
    n = unwind_verified(ips, cap, skip, ts ? &ts->memo : nullptr, from);
  }
  if (n < 0) n = unw_backtrace(ips, cap);
  if (g.opts.unwind != UnwindKind::Verify) skip = skip_own_frames(ips, n);
  return stack_id(ts, stream, ips + skip, kept_frames(n, skip));
}

// `time` kNow: the clock is read once the record has its room. Getting room may wait (a new
// chunk, or the writer's backpressure); a record timed before that wait could reach the file
// after a watermark that vouched for its time.
constexpr uint64_t kNow = 0;

MT_ALWAYS_INLINE void write_alloc(Stream* s, fmt::Api api, uint64_t time, uint64_t addr, uint64_t size, uint32_t stack) {
  uint8_t* w = reserve(s, fmt::kMaxAllocRecord);
  if (MT_UNLIKELY(!w)) return;
  begin_record(s);
  const uint64_t t = stream_time(s, time == kNow ? event_time(s) : time);
  w = fmt::encode_alloc(w, s->recent, api, t - s->last_time, addr, s->last_addr, size, stack);
  s->last_time = t;
  s->last_addr = addr;
  commit(s, w);
  end_record(s);
  ++s->allocs;
}

// A sampled Alloc: its SampleWeight record, then the Alloc, as one record for the writer.
void write_weighted_alloc(Stream* s, fmt::Api api, uint64_t addr, uint64_t size, uint32_t stack, uint64_t weight) {
  uint8_t* w = reserve(s, fmt::kMaxAllocRecord + 2 + 2 * wire::kMaxVarint);
  if (MT_UNLIKELY(!w)) return;
  begin_record(s);
  const uint64_t t = stream_time(s, event_time(s));
  uint8_t body[wire::kMaxVarint];
  const auto len = static_cast<uint64_t>(wire::put_varint(body, weight) - body);
  *w++ = fmt::tag_of(fmt::RecordType::SampleWeight);
  w = wire::put_varint(w, len);
  std::memcpy(w, body, len);
  w += len;
  w = fmt::encode_alloc(w, s->recent, api, t - s->last_time, addr, s->last_addr, size, stack);
  s->last_time = t;
  s->last_addr = addr;
  commit(s, w);
  end_record(s);
  ++s->allocs;
}

MT_ALWAYS_INLINE void write_free(Stream* s, fmt::Api api, uint64_t time, uint64_t addr, uint64_t length) {
  uint8_t* w = reserve(s, fmt::kMaxFreeRecord);
  if (MT_UNLIKELY(!w)) return;
  begin_record(s);
  const uint64_t t = stream_time(s, time == kNow ? event_time(s) : time);
  w = fmt::encode_free(w, s->recent, api, t - s->last_time, addr, s->last_addr, length);
  s->last_time = t;
  s->last_addr = addr;
  commit(s, w);
  end_record(s);
  ++s->frees;
}

}  // namespace

namespace {

// The common Alloc and Free records are written without a call (so without saving registers)
// when the thread's own stream has room and the time of its record before may be reused:
// begin_reused gives where to write, or null, with nothing begun, and the general writers
// (write_alloc, write_free) take the record.
// Begins a record that takes the time of the stream's record before it (last_time) if the
// epoch allows that; otherwise begins nothing and returns false.
MT_ALWAYS_INLINE bool begin_reused_time(Stream* s) {
  begin_record(s);  // before the epoch is read, as event_time requires
  if (MT_UNLIKELY(s->reuse_left == 0 || s->reuse_epoch != g_clock_epoch.load(std::memory_order_relaxed))) {
    end_record(s);
    return false;
  }
  --s->reuse_left;
  return true;
}

MT_ALWAYS_INLINE uint8_t* begin_reused(Stream* s, size_t need) {
  Chunk* c = s->chunk;
  if (MT_UNLIKELY(!c || c->cap - s->pos < need)) return nullptr;
  return begin_reused_time(s) ? c->data + s->pos : nullptr;
}

MT_ALWAYS_INLINE bool write_alloc_fast(Stream* s, fmt::Api api, uint64_t addr, uint64_t size, uint32_t stack) {
  uint8_t* w = begin_reused(s, fmt::kMaxAllocRecord);
  if (!w) return false;
  w = fmt::encode_alloc(w, s->recent, api, 0, addr, s->last_addr, size, stack);
  s->last_addr = addr;
  commit(s, w);
  end_record(s);
  ++s->allocs;
  return true;
}

MT_NOINLINE void on_alloc_slow(fmt::Api api, void* p, size_t size, const void* frame) {
  Target t;
  if (!acquire_slow(t)) return;
  // (The recording may have started, sampled, inside acquire_slow.)
  const uint64_t weight = sampling::active() ? sampling::take(size) : 0;
  if (sampling::active() && !weight) return release(t);
  tls_busy++;
  const uint32_t stack = capture_stack(t, frame);
  const auto addr = reinterpret_cast<uint64_t>(p);
  if (weight) {
    write_weighted_alloc(t.s, api, addr, size, stack, weight);
    sampling::insert(addr);
  } else {
    write_alloc(t.s, api, kNow, addr, size, stack);
  }
  tls_busy--;
  release(t);
}

}  // namespace

namespace {
// Sampled mode: records the allocation when it holds a sample point.
MT_NOINLINE void on_alloc_sampled(fmt::Api api, void* p, size_t size, const void* frame, uint64_t weight) {
  Target t;
  if (!acquire(t)) return;
  tls_busy++;
  const uint32_t stack = capture_stack(t, frame);
  const auto addr = reinterpret_cast<uint64_t>(p);
  write_weighted_alloc(t.s, api, addr, size, stack, weight);
  sampling::insert(addr);
  tls_busy--;
  release(t);
}
}  // namespace

void on_alloc(fmt::Api api, void* p, size_t size, const void* frame) {
  if (!p) return;
  if (MT_UNLIKELY(sampling::active())) {
    if (const uint64_t weight = sampling::take(size)) on_alloc_sampled(api, p, size, frame, weight);
    return;
  }
  ThreadState* ts = own_stream_thread(false);
  if (MT_UNLIKELY(!ts)) {
    on_alloc_slow(api, p, size, frame);
    return;
  }
  tls_busy++;
  const Target t{ts, &ts->stream, false};
  const uint32_t stack = capture_stack(t, frame);
  const auto addr = reinterpret_cast<uint64_t>(p);
  if (!write_alloc_fast(t.s, api, addr, size, stack)) write_alloc(t.s, api, kNow, addr, size, stack);
  tls_busy--;
}

namespace {

MT_ALWAYS_INLINE bool write_free_fast(Stream* s, fmt::Api api, uint64_t addr) {
  uint8_t* w = begin_reused(s, fmt::kMaxFreeRecord);
  if (!w) return false;
  w = fmt::encode_free(w, s->recent, api, 0, addr, s->last_addr, 0);
  s->last_addr = addr;
  commit(s, w);
  end_record(s);
  ++s->frees;
  return true;
}

MT_NOINLINE void on_free_slow(fmt::Api api, void* p) {
  Target t;
  if (!acquire_slow(t, /*even_paused=*/true)) return;
  tls_busy++;
  write_free(t.s, api, kNow, reinterpret_cast<uint64_t>(p), 0);
  tls_busy--;
  release(t);
}

}  // namespace

void on_free(fmt::Api api, void* p) {
  if (!p || in_pool(p)) return;
  if (MT_UNLIKELY(sampling::g_check_frees.load(std::memory_order_relaxed)) &&
      !sampling::record_free(reinterpret_cast<uintptr_t>(p)))
    return;
  if (ThreadState* ts = own_stream_thread(/*even_paused=*/true)) {
    tls_busy++;
    const bool written = write_free_fast(&ts->stream, api, reinterpret_cast<uint64_t>(p));
    tls_busy--;
    if (MT_LIKELY(written)) return;
  }
  on_free_slow(api, p);
}

ReallocTicket on_realloc_begin(void* old_ptr) {
  ReallocTicket r;
  if (old_ptr && !in_pool(old_ptr)) {
    if (MT_UNLIKELY(sampling::g_check_frees.load(std::memory_order_relaxed))) {
      const bool sampled_mode = sampling::active();
      const bool record = sampling::record_free(reinterpret_cast<uintptr_t>(old_ptr));
      r.old_sampled = sampled_mode && record;
      if (!record) return r;
    }
    if (ThreadState* ts = tls_thread; ts && !tls_busy) {
      // While only this thread records, the free takes the time of the stream's last record
      // as a short Free would (begin_reused): the record stays begun until on_realloc_end
      // commits it, so no pass of an exact writer takes its watermark past that time meanwhile
      // (without exact watermarks, one that starts after the epoch check is vouched for once
      // the next is written, and the real call may take longer than that).
      Stream* s = &ts->stream;
      if (MT_LIKELY(g_exact_watermarks.load(std::memory_order_relaxed) && begin_reused_time(s))) {
        r.free_time = s->last_time;
        r.reused = s;
        r.armed = true;
        return r;
      }
      // Announce the pending record before reading the clock (a locked exchange, then lfence
      // so that the clock is read after it is visible): a writer pass that does not see it
      // took its watermark's time before this one's.
      __atomic_exchange_n(&ts->stream.pending_time, 1, __ATOMIC_SEQ_CST);
      __builtin_ia32_lfence();
      r.free_time = now_ns();
      __atomic_store_n(&ts->stream.pending_time, r.free_time, __ATOMIC_RELEASE);
      r.pending = &ts->stream;
    } else {
      r.free_time = now_ns();
    }
    r.armed = true;
  }
  return r;
}

namespace {
inline void clear_pending(const ReallocTicket& r) {
  if (r.pending) __atomic_store_n(&static_cast<Stream*>(r.pending)->pending_time, 0, __ATOMIC_RELEASE);
  if (r.reused) end_record(static_cast<Stream*>(r.reused));
}
}  // namespace

void on_realloc_end(const ReallocTicket& r, fmt::Api api, void* old_ptr, void* new_ptr, size_t size,
                    const void* frame) {
  // realloc(p, n) failing leaves p untouched; realloc(p, 0) releasing p returns null.
  if (!new_ptr && size != 0) {
    if (r.old_sampled) sampling::insert(reinterpret_cast<uintptr_t>(old_ptr));
    return clear_pending(r);
  }
  uint64_t weight = 0;
  if (MT_UNLIKELY(sampling::active()) && new_ptr) {
    weight = sampling::take(size);
    if (!weight) {
      if (!r.armed) return;
      new_ptr = nullptr;  // only the old block's release is recorded
    }
  }
  Target t;
  // As for free: the release of the old block is recorded even while paused.
  if (!acquire(t) && !acquire_slow(t, /*even_paused=*/true)) return clear_pending(r);
  tls_busy++;
  // A reused time belongs to its own stream (pausing in between may send the records elsewhere).
  if (r.armed) write_free(t.s, api, !r.reused || t.s == r.reused ? r.free_time : now_ns(), reinterpret_cast<uint64_t>(old_ptr), 0);
  if (new_ptr && !g.paused.load(std::memory_order_relaxed)) {
    const uint32_t stack = capture_stack(t, frame);
    const auto addr = reinterpret_cast<uint64_t>(new_ptr);
    if (weight) {
      write_weighted_alloc(t.s, api, addr, size, stack, weight);
      sampling::insert(addr);
    } else if (t.shared || !write_alloc_fast(t.s, api, addr, size, stack)) {
      write_alloc(t.s, api, kNow, addr, size, stack);
    }
  }
  clear_pending(r);  // after the records are committed
  tls_busy--;
  release(t);
}

// ---------------------------------------------------------------------------------------
// [4] Anonymous mappings: only mappings the program made anonymous are recorded; munmap and
// mremap of them (also partial) are matched by the analysis against these records.
// ---------------------------------------------------------------------------------------
namespace {
pthread_mutex_t g_maps_mutex = PTHREAD_MUTEX_INITIALIZER;
struct Map {
  uintptr_t lo, hi;
};
Map* g_maps = nullptr;
size_t g_nmaps = 0, g_maps_cap = 0;

// Under g_maps_mutex. Removes [lo, hi) from the table; returns whether it overlapped any.
bool maps_remove(uintptr_t lo, uintptr_t hi) {
  bool hit = false;
  for (size_t i = 0; i < g_nmaps;) {
    Map m = g_maps[i];
    if (m.hi <= lo || m.lo >= hi) {
      ++i;
      continue;
    }
    hit = true;
    g_maps[i] = g_maps[--g_nmaps];
    if (m.lo < lo && g_nmaps < g_maps_cap) g_maps[g_nmaps++] = Map{m.lo, lo};
    if (m.hi > hi && g_nmaps < g_maps_cap) g_maps[g_nmaps++] = Map{hi, m.hi};
  }
  return hit;
}

void maps_add(uintptr_t lo, uintptr_t hi) {
  if (g_nmaps == g_maps_cap) {
    const size_t cap = g_maps_cap ? g_maps_cap * 2 : 256;
    auto* bigger = static_cast<Map*>(mem_alloc(cap * sizeof(Map)));
    if (!bigger) return;
    if (g_maps) std::memcpy(bigger, g_maps, g_nmaps * sizeof(Map));
    mem_free(g_maps);
    g_maps = bigger;
    g_maps_cap = cap;
  }
  g_maps[g_nmaps++] = Map{lo, hi};
}

// The stack of an mmap or mremap. When the program has its own malloc, these calls may come
// from inside it, under its locks (rustc's jemalloc maps its first pages under its start-up
// lock), and the unwinder's first look at a module (libelf) allocates, which libc's callers
// then do with that very allocator: it would wait for itself. Such mappings are recorded
// without their stack.
inline uint32_t mapping_stack(const Target& t, const void* frame) {
  return MT_UNLIKELY(g.foreign_malloc_in != nullptr) ? 0 : capture_stack(t, frame);
}
}  // namespace

void on_mmap(void* p, size_t length, int flags, int fd, const void* frame) {
  if (p == MAP_FAILED || !(flags & MAP_ANONYMOUS) || fd > 0 || tls_busy) return;
  Target t;
  if (!acquire(t)) return;
  tls_busy++;
  pthread_mutex_lock(&g_maps_mutex);
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
  maps_remove(lo, lo + length);  // MAP_FIXED over an old mapping replaces it
  maps_add(lo, lo + length);
  pthread_mutex_unlock(&g_maps_mutex);
  const uint32_t stack = mapping_stack(t, frame);
  write_alloc(t.s, fmt::Api::Mmap, kNow, lo, length, stack);
  tls_busy--;
  release(t);
}

void on_munmap_begin(void* p, size_t length) {
  if (tls_busy || !g_nmaps) return;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
  pthread_mutex_lock(&g_maps_mutex);
  const bool hit = maps_remove(lo, lo + length);
  pthread_mutex_unlock(&g_maps_mutex);
  if (!hit) return;
  Target t;
  if (!acquire_slow(t)) return;
  tls_busy++;
  write_free(t.s, fmt::Api::Munmap, kNow, lo, length);
  tls_busy--;
  release(t);
}

void on_mremap(void* old_p, size_t old_len, void* new_p, size_t new_len, const void* frame) {
  if (tls_busy || new_p == MAP_FAILED || !g_nmaps) return;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(old_p);
  pthread_mutex_lock(&g_maps_mutex);
  const bool hit = maps_remove(lo, lo + old_len);
  if (hit) maps_add(reinterpret_cast<uintptr_t>(new_p), reinterpret_cast<uintptr_t>(new_p) + new_len);
  pthread_mutex_unlock(&g_maps_mutex);
  if (!hit) return;
  Target t;
  if (!acquire_slow(t)) return;
  tls_busy++;
  const uint32_t stack = mapping_stack(t, frame);
  write_free(t.s, fmt::Api::Mremap, kNow, lo, 0);
  write_alloc(t.s, fmt::Api::Mremap, kNow, reinterpret_cast<uint64_t>(new_p), new_len, stack);
  tls_busy--;
  release(t);
}

// ---------------------------------------------------------------------------------------
// [5] Modules, thread names, markers, pause
// ---------------------------------------------------------------------------------------
void on_modules_changed() {
  if (tls_busy || g.state.load() != kActive || !g.started) return;
  tls_busy++;
  modules_scan();
  tls_busy--;
}

void on_thread_name(unsigned long thread, const char* name) {
  if (!name || tls_busy) return;
  if (thread != static_cast<unsigned long>(pthread_self())) return;  // only a thread's own name is attributed
  Target t;
  if (!acquire_slow(t)) return;
  tls_busy++;
  append_thread_record(t.s, fmt::RecordType::ThreadName, 0, 0, name);
  tls_busy--;
  release(t);
}

void mark(const char* label) {
  if (!label) return;
  Target t;
  if (!acquire_slow(t)) return;
  tls_busy++;
  uint8_t buf[1100];
  if (!reserve(t.s, sizeof buf)) {  // room first, then the clock (see write_alloc)
    tls_busy--;
    release(t);
    return;
  }
  begin_record(t.s);
  const uint64_t now = stream_time(t.s, now_ns());
  fmt::RecordBuilder b(buf, sizeof buf, fmt::RecordType::Marker);
  b.varint(now - t.s->last_time).bytes(label, strnlen(label, 1024));
  const size_t n = b.finish();
  if (n && append_record(t.s, buf, n)) t.s->last_time = now;
  end_record(t.s);
  tls_busy--;
  release(t);
}

uint64_t set_sampling(uint64_t bytes) {
  Target t;
  if (!acquire_slow(t, /*even_paused=*/true)) return 0;
  tls_busy++;
  uint8_t buf[96];
  if (!reserve(t.s, sizeof buf)) {
    tls_busy--;
    release(t);
    return 0;
  }
  const uint64_t interval = sampling::set_interval(bytes);
  // A Marker that readers before 2.1 show as its label, with the switch in its last field.
  char label[64];
  if (interval)
    std::snprintf(label, sizeof label, "memtide: sampling 1 in %llu bytes", static_cast<unsigned long long>(interval));
  else
    std::snprintf(label, sizeof label, "memtide: exact recording");
  begin_record(t.s);
  const uint64_t now = stream_time(t.s, now_ns());
  fmt::RecordBuilder b(buf, sizeof buf, fmt::RecordType::Marker);
  b.varint(now - t.s->last_time).bytes(label, std::strlen(label)).varint(interval + 1);
  const size_t n = b.finish();
  if (n && append_record(t.s, buf, n)) t.s->last_time = now;
  end_record(t.s);
  tls_busy--;
  release(t);
  return interval;
}

void pause() { g.paused.store(true); }
void resume() { g.paused.store(false); }

// ---------------------------------------------------------------------------------------
// [6] Exit, exec, fork, fatal signals
// ---------------------------------------------------------------------------------------
namespace {

void finish(fmt::EndReason reason, uint64_t status, int timeout_ms) {
  int expected = kActive;
  if (!g.state.compare_exchange_strong(expected, kStopped)) return;
  if (!g.started) return;
  if (g.opts.unwind == UnwindKind::Verify) {
    const uint64_t all = g_verify_stacks.load(), fast = g_verify_fast.load();
    message("unwind verify: %llu stacks, %llu unwound by cached rules, %llu by libunwind only, %llu differ",
            static_cast<unsigned long long>(all), static_cast<unsigned long long>(fast),
            static_cast<unsigned long long>(all - fast), static_cast<unsigned long long>(g_verify_diff.load()));
  }
  tls_busy++;
  // After the program's destructors (this runs from libmemtide's own destructor, or exit's
  // last handlers), or at _exit and quick_exit (a shell ends by _exit; the blocks its globals
  // still hold are not leaks): what is live now and reachable from nowhere is a leak.
  if ((reason == fmt::EndReason::Exit || reason == fmt::EndReason::ImmediateExit || reason == fmt::EndReason::QuickExit) &&
      g.opts.leak_scan)
    leak_scan(reinterpret_cast<uintptr_t>(__builtin_frame_address(0)));
  writer_finish(reason, status, timeout_ms);
  tls_busy--;
}

}  // namespace

namespace {
// exit()'s status and quick_exit()'s, as their handlers and hook saw them.
std::atomic<int> g_exit_status{0};
std::atomic<int> g_quick_exit_status{0};

void keep_exit_status(int status, void*) { g_exit_status.store(status); }
void end_at_quick_exit() { finish(fmt::EndReason::QuickExit, static_cast<uint64_t>(g_quick_exit_status.load()), 10000); }
}  // namespace

// Handlers run in reverse order of registration: registered before the program's own, these
// run after them (what the program's handlers allocate is recorded).
void install_quick_exit_handler() { at_quick_exit(end_at_quick_exit); }
void install_exit_status_handler() { on_exit(keep_exit_status, nullptr); }

void finish_at_exit() {
  finish(fmt::EndReason::Exit, static_cast<uint64_t>(static_cast<unsigned>(g_exit_status.load()) & 0xff), 10000);
}
void finish_immediate_exit(int status) {
  // A vfork child shares the parent's memory: its _exit is not the end of the parent's trace.
  if (getpid() != g.pid) return;
  finish(fmt::EndReason::ImmediateExit, static_cast<uint64_t>(static_cast<unsigned>(status) & 0xff), 10000);
}
void on_quick_exit(int status) { g_quick_exit_status.store(status); }

namespace {
char* g_exec_env[4096];
char g_exec_preload[4096];
}  // namespace

char* const* on_exec_begin(char* const envp[]) {
  // In a vfork child (memory shared with the suspended parent, pid different) the recorder's
  // state is the parent's: leave it alone, only adjust the environment.
  if (getpid() == g.pid) finish(fmt::EndReason::Exec, 0, 10000);
  if (g.opts.follow || !envp) return envp;
  // --no-follow: the new program runs without the preload and the recorder's variables (also
  // when the program passes an environment of its own making).
  env_without_own(envp, g_exec_env, sizeof g_exec_env / sizeof g_exec_env[0], g_exec_preload, sizeof g_exec_preload);
  return g_exec_env;
}

void on_exec_failed() {
  // The program goes on as itself: continue the same file after its End{Exec} record.
  if (getpid() != g.pid || g.state.load() != kStopped || g.fd >= 0) return;
  tls_busy++;
  const int fd = open(g.path, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd >= 0) g.fd = high_trace_fd(fd);
  if (fd >= 0) {
    flock(g.fd, LOCK_EX | LOCK_NB);
    writer_reopened();
    g.state.store(kActive);
    writer_start();
  }
  tls_busy--;
}

namespace {

void fork_prepare() {
  tls_busy++;
  // Lock order: start -> modules -> shared -> maps -> stacks -> unwind -> registry -> queue.
  pthread_mutex_lock(&g_start_mutex);
  pthread_mutex_lock(&modules_mutex);
  pthread_mutex_lock(&g.shared_mutex);
  pthread_mutex_lock(&g_maps_mutex);
  pthread_mutex_lock(&stacks_mutex);
  pthread_mutex_lock(&unwind_mutex);
  pthread_mutex_lock(&g.registry_mutex);
  pthread_mutex_lock(&g.queue_mutex);
  sampling::fork_prepare();
}

void fork_parent() {
  sampling::fork_parent();
  pthread_mutex_unlock(&g.queue_mutex);
  pthread_mutex_unlock(&g.registry_mutex);
  pthread_mutex_unlock(&unwind_mutex);
  pthread_mutex_unlock(&stacks_mutex);
  pthread_mutex_unlock(&g_maps_mutex);
  pthread_mutex_unlock(&g.shared_mutex);
  pthread_mutex_unlock(&modules_mutex);
  pthread_mutex_unlock(&g_start_mutex);
  tls_busy--;
}

void fork_child() {
  for (pthread_mutex_t* m : {&g.queue_mutex, &g.shared_mutex, &g.registry_mutex, &g_maps_mutex, &stacks_mutex,
                             &unwind_mutex, &modules_mutex, &g_start_mutex})
    pthread_mutex_init(m, nullptr);
  pthread_cond_init(&g.queue_cond, nullptr);
  sampling::fork_child();
  if (g.state.load() != kActive || !g.started) {
    tls_busy--;
    return;
  }
  // A new trace: none of the parent's events, its own stacks and modules.
  writer_reset_after_fork();
  g.registry = nullptr;
  g.exited_allocs = g.exited_frees = 0;
  g.pid = getpid();
  g.start_time = now_ns();
  g.next_stream.store(1);
  g_clock_epoch.store(0);  // the child's one thread
  g_seen_tables.store(0);  // (the parent's threads' tables are not the child's)
  stream_init(&g.shared, 0, g.start_time);
  tls_thread = nullptr;  // the parent's state of this thread stays with the parent
  tls_exited = 0;
  stacks_reset();
  modules_reset();
  process_counters_reset();
  append_process_info(&g.shared);
  if (open_trace_file(/*child=*/true)) {
    modules_scan();
    writer_start();
  } else {
    g.state.store(kStopped);
  }
  tls_busy--;
}

void install_fork_handlers() { pthread_atfork(fork_prepare, fork_parent, fork_child); }

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT, SIGQUIT, SIGHUP};

void on_fatal_signal(int sig) {
  // Flush what was recorded, then let the signal do what it would have done. Every signal is
  // blocked while this runs (sa_mask), so that no handler of the program's can take it out of
  // here (a SIGALRM handler that siglongjmps would have let the program survive an abort()),
  // and the signal, raised again with its default action, is unblocked alone: it ends the
  // process before any other pending signal is delivered.
  if (g.writer_running && !pthread_equal(pthread_self(), g.writer)) finish(fmt::EndReason::Signal, static_cast<uint64_t>(sig), 3000);
  signal(sig, SIG_DFL);
  raise(sig);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
}

void install_signal_handlers() {
  for (int sig : kFatalSignals) {
    struct sigaction old;
    if (sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) continue;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sa.sa_flags = SA_RESETHAND | SA_ONSTACK;
    sigfillset(&sa.sa_mask);  // (on_fatal_signal)
    sigaction(sig, &sa, nullptr);
  }
}

}  // namespace

}  // namespace memtide::rec
