// Stream buffers: chunk management on the owner side, and the recorder's own memory.
#include <cpuid.h>
#include <fcntl.h>
#include <mimalloc.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>

#include "recorder/attach.h"
#include "recorder/clock.h"
#include "recorder/recorder.h"
#include "recorder/state.h"
#include "recorder/stream.h"
#include "recorder/writer.h"

namespace memtide::rec {

TscClock g_tsc;
std::atomic<uint64_t> g_clock_epoch{0};

uint64_t event_time_read(Stream* s, uint64_t e) {
  // The clock is read after the epoch was (now_ns orders the reading after earlier loads; the
  // system clock does the same): a reading paired with an epoch is never older. Ownership is
  // taken, or the tick made shared, before the reading (clock.h).
  s->reuse_left = 0;
  const uint64_t me = s->index != 0 && s->index <= kMaxOwnerIndex ? uint64_t{s->index} + 1 : 0;
  while (!(e & kEpochShared)) {
    const uint64_t owner = (e & kOwnerMask) >> kOwnerShift;
    if (owner == 0 && me != 0) {
      if (!g_clock_epoch.compare_exchange_weak(e, e | (me << kOwnerShift), std::memory_order_seq_cst,
                                               std::memory_order_relaxed))
        continue;  // (e reloaded: another thread took the tick, or the writer ticked)
      e |= me << kOwnerShift;
    } else if (owner != me || me == 0) {
      g_clock_epoch.fetch_or(kEpochShared, std::memory_order_seq_cst);
      break;
    }
    s->reuse_epoch = e;
    s->reuse_left = (e & kEpochIdle) ? 0 : kReuseEvents;
    break;
  }
  return now_ns();
}

namespace {
uint64_t g_cal_tsc = 0, g_cal_ns = 0;
bool g_cal_ok = false;
TscParams g_tsc_steps[2];  // the first calibration, the final one (published in turn, never changed)
constexpr uint64_t kFirstStepNs = 4000000, kFinalStepNs = 100000000;

// Invariant TSC (CPUID 0x80000007 EDX bit 8), and the kernel's clocksource is the TSC.
bool tsc_usable() {
  unsigned a, b, c, d;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return false;
  __get_cpuid(0x80000007u, &a, &b, &c, &d);
  if (!(d & (1u << 8))) return false;
  const int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[32] = {};
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  return n >= 3 && std::strncmp(buf, "tsc", 3) == 0 && (buf[3] == '\n' || buf[3] == 0);
}

// Whether the TSC may be used, found by the thread that starts the writer (tsc_probe), not by
// the writer: the file it reads takes the lowest free descriptor for a moment, which must not
// be taken from under a program that is opening its own (their numbers are the program's).
int g_tsc_usable = -1;
}  // namespace

void tsc_probe() {
  if (g_tsc_usable < 0) g_tsc_usable = tsc_usable() ? 1 : 0;
}

void tsc_calibrate_begin() {
  // (In a child forked during the first step, the final one is made from here.)
  const TscParams* p = g_tsc.params.load();
  tsc_probe();
  g_cal_ok = (p == nullptr || p == &g_tsc_steps[0]) && g_tsc_usable == 1;
  if (!g_cal_ok) return;
  g_cal_ns = monotonic_ns();
  g_cal_tsc = __builtin_ia32_rdtsc();
}

uint64_t tsc_calibrate_due() {
  return g_cal_ns + (g_tsc.params.load(std::memory_order_relaxed) ? kFinalStepNs : kFirstStepNs);
}

bool tsc_calibrate_step() {
  if (!g_cal_ok) return false;
  const uint64_t ns = monotonic_ns();
  const uint64_t tsc = __builtin_ia32_rdtsc();
  if (tsc <= g_cal_tsc || ns <= g_cal_ns) {  // (not a TSC that counts forward: stay with the system clock)
    g_cal_ok = false;
    return false;
  }
  const uint64_t span = ns - g_cal_ns;
  const TscParams* first = g_tsc.params.load(std::memory_order_relaxed);
  if (span < (first ? kFinalStepNs : kFirstStepNs)) return true;
  TscParams& p = g_tsc_steps[first ? 1 : 0];
  p.mult = static_cast<uint64_t>((static_cast<unsigned __int128>(span) << 32) / (tsc - g_cal_tsc));
  p.anchor_tsc = tsc;
  p.anchor_ns = first ? first->at(tsc) : ns;  // the final step goes on from where the first one is
  g_tsc.params.store(&p, std::memory_order_release);
  g_cal_ok = first == nullptr;
  return g_cal_ok;
}

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

void message(const char* fmt, ...) {
  static std::atomic<int> count{0};
  if (count.fetch_add(1, std::memory_order_relaxed) >= 20) return;
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, "memtide[%d]: ", static_cast<int>(getpid()));
  va_list ap;
  va_start(ap, fmt);
  n += std::vsnprintf(buf + n, sizeof buf - static_cast<size_t>(n) - 1, fmt, ap);
  va_end(ap);
  if (n > static_cast<int>(sizeof buf) - 2) n = sizeof buf - 2;
  buf[n++] = '\n';
  if (!attach_message(buf, static_cast<size_t>(n))) (void)!write(2, buf, static_cast<size_t>(n));
}

static Chunk* new_chunk(Stream* s, size_t need) {
  uint32_t cap = recording.chunk_first;
  if (s->chunk) cap = s->chunk->cap < recording.chunk_max ? s->chunk->cap * 2 : recording.chunk_max;
  while (cap < need) cap *= 2;
  // Only the header is initialised: the data is written before the writer reads it (zeroing
  // each chunk was 4.6% of the samples of a 1-thread churn's recording, in the program's thread).
  void* mem = mem_alloc_uninit(sizeof(Chunk) + cap);
  if (!mem) return nullptr;
  auto* c = new (mem) Chunk{};
  c->stream = s;
  c->seq = s->next_seq++;
  c->cap = cap;
  s->recent.start_block();
  return c;
}

void stream_init(Stream* s, uint32_t index, uint64_t base_time) {
  *s = Stream{};
  s->index = index;
  s->last_time = s->w_run.time = base_time;
}

void seal_chunk(Stream* s, bool last) {
  Chunk* c = s->chunk;
  if (!c) {
    if (!last) return;
    c = new_chunk(s, 0);  // an empty final chunk tells the writer the stream is done
    if (!c) return;
  }
  c->last = last;
  c->end_time = s->last_time;
  c->end_addr = s->last_addr;
  __atomic_store_n(&s->chunk, nullptr, __ATOMIC_RELEASE);
  s->pos = 0;
  enqueue_chunk(c, false);
}

uint8_t* reserve_slow(Stream* s, size_t need) {
  Chunk* next = new_chunk(s, need);
  if (!next) return nullptr;
  Chunk* old = s->chunk;
  // Publish the new chunk first: once `old` is queued the writer may free it, so it must no
  // longer be reachable as the stream's current chunk.
  __atomic_store_n(&s->chunk, next, __ATOMIC_RELEASE);
  s->pos = 0;
  if (old) {
    old->end_time = s->last_time;
    old->end_addr = s->last_addr;
    // The process stream is written under shared_mutex, which the writer also takes.
    enqueue_chunk(old, s != &recording.shared);
  }
  MEMTIDE_CHECK(next->cap >= need);
  return next->data;
}

bool append_record(Stream* s, const uint8_t* rec, size_t n) {
  uint8_t* w = reserve(s, n);
  if (!w) return false;
  std::memcpy(w, rec, n);
  commit(s, w + n);
  return true;
}

bool append_stack_record(Stream* s, const uint8_t* rec, size_t n) {
  uint8_t* w = reserve(s, n);
  if (!w) return false;
  Chunk* c = s->chunk;
  const auto at = static_cast<uint32_t>(w - c->data);
  if (c->stacks_end.load(std::memory_order_relaxed) == 0) c->stacks_begin.store(at, std::memory_order_relaxed);
  c->stacks_end.store(at + static_cast<uint32_t>(n), std::memory_order_relaxed);
  if (c->ndefs < kChunkDefs) {
    c->def_at[c->ndefs] = at;
    c->def_len[c->ndefs] = static_cast<uint32_t>(n);
  }
  ++c->ndefs;
  std::memcpy(w, rec, n);
  commit(s, w + n);
  return true;
}

}  // namespace memtide::rec
