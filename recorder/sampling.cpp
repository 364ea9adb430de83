// Sampled recording: the per-thread sample points and the table of live sampled blocks.
#include "recorder/sampling.h"

#include <pthread.h>
#include <time.h>

#include <cmath>
#include <cstring>

#include "formats/check.h"
#include "formats/sampling.h"
#include "recorder/clock.h"
#include "recorder/state.h"
#include "recorder/trace_state.h"

namespace memtide::rec::sampling {

std::atomic<uint64_t> g_interval{0};
std::atomic<uint8_t> g_filter[1u << kFilterBits];
std::atomic<bool> g_exact_blocks{false};
std::atomic<uint64_t> g_live{0};
std::atomic<uint8_t> g_free_mode{kFreeAll};
MT_TLS ThreadSampler tls_sampler;

namespace {

std::atomic<uint32_t> g_epoch{1};
uint64_t g_seed = 0;
std::atomic<uint64_t> g_threads{0};  // threads that drew their first point, for their seeds
std::atomic<bool> g_exact_allocated{true};  // the recording starts exact unless configured

uint64_t splitmix(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// A uniform draw in (0, 1].
double uniform(ThreadSampler& t) {
  t.rng ^= t.rng << 13;
  t.rng ^= t.rng >> 7;
  t.rng ^= t.rng << 17;
  return (static_cast<double>(t.rng >> 11) + 1.0) * 0x1.0p-53;
}

// Bytes to the next sample point: exponential with mean `interval`.
int64_t draw(ThreadSampler& t, uint64_t interval) {
  const double d = -std::log(uniform(t)) * static_cast<double>(interval);
  return d >= 9.0e18 ? INT64_MAX : static_cast<int64_t>(d) + 1;
}

// ---------------------------------------------------------------------------------------
// The table of live sampled addresses: open addressing, linear probing, tombstones; under
// g_table_mutex (taken only on a filter hit, a sampled allocation or a switch).
// ---------------------------------------------------------------------------------------
constexpr uintptr_t kEmpty = 0, kTomb = 1;
pthread_mutex_t g_table_mutex = MT_MUTEX_INITIALIZER;
uintptr_t* g_keys = nullptr;
size_t g_cap = 0, g_used = 0;  // used: live keys and tombstones

size_t slot_of(uintptr_t a) { return static_cast<size_t>(fmt::mix_address(a)) & (g_cap - 1); }

bool grow() {
  const size_t live = g_live.load(std::memory_order_relaxed);
  const size_t cap = !g_cap ? 4096 : (live + 1) * 4 > g_cap ? g_cap * 2 : g_cap;
  auto* keys = static_cast<uintptr_t*>(mem_alloc(cap * sizeof(uintptr_t)));
  if (!keys) return false;
  uintptr_t* old = g_keys;
  const size_t old_cap = g_cap;
  g_keys = keys;
  g_cap = cap;
  g_used = 0;
  for (size_t i = 0; i < old_cap; ++i) {
    const uintptr_t k = old[i];
    if (k == kEmpty || k == kTomb) continue;
    size_t j = slot_of(k);
    while (g_keys[j] != kEmpty) j = (j + 1) & (g_cap - 1);
    g_keys[j] = k;
    ++g_used;
  }
  if (old) mem_free(old);
  return true;
}

void bump_filter(uintptr_t a, int delta) {
  std::atomic<uint8_t>& c = g_filter[filter_index(a)];
  uint8_t v = c.load(std::memory_order_relaxed);
  // A counter that reached 255 stays there: it no longer knows how many keys it covers.
  while (v != 255) {
    const uint8_t next = static_cast<uint8_t>(v + delta);
    if (c.compare_exchange_weak(v, next, std::memory_order_relaxed)) return;
  }
}

// Under g_table_mutex, or before threads exist.
void update_check_frees() {
  const bool sampled = g_interval.load() != 0;
  g_free_mode.store(sampled && !g_exact_blocks.load() ? kFreeSampled
                    : sampled || g_live.load() != 0   ? kFreeChecked
                                                      : kFreeAll);
}

}  // namespace

void configure(uint64_t interval, uint64_t seed) {
  g_seed = seed;
  if (interval) {
    g_interval.store(std::min(std::max(interval, fmt::kMinSampleInterval), fmt::kMaxSampleInterval));
    g_exact_allocated.store(false);
  }
  update_check_frees();
}

uint64_t set_interval(uint64_t interval) {
  if (interval) interval = std::min(std::max(interval, fmt::kMinSampleInterval), fmt::kMaxSampleInterval);
  pthread_mutex_lock(&g_table_mutex);
  // While the interval changes, frees take the general check, which reads the interval itself
  // (a free that still saw kFreeSampled would drop the free of a block allocated exactly on the
  // new side), and the blocks of an ending exact period are known before sampling starts.
  g_free_mode.store(kFreeChecked);
  if (interval != 0 && g_interval.load() == 0 && g_exact_allocated.load()) g_exact_blocks.store(true);
  g_interval.store(interval);
  if (interval == 0) g_exact_allocated.store(true);
  g_epoch.fetch_add(1);
  update_check_frees();
  pthread_mutex_unlock(&g_table_mutex);
  return interval;
}

uint64_t take_slow(size_t size) {
  ThreadSampler& t = tls_sampler;
  const uint64_t interval = g_interval.load(std::memory_order_relaxed);
  if (interval == 0) return 0;
  const uint32_t epoch = g_epoch.load(std::memory_order_relaxed);
  if (t.epoch != epoch) {
    // The thread's first allocation in this sampled period: its first point is drawn now, as
    // if the process had started here (the exponential is memoryless).
    if (t.rng == 0) {
      uint64_t x = g_seed ? g_seed : static_cast<uint64_t>(now_ns()) ^ reinterpret_cast<uintptr_t>(&t);
      x += g_threads.fetch_add(1) * 0x632BE59BD9B4E019ULL;
      t.rng = splitmix(x) | 1;
    }
    t.epoch = epoch;
    t.left = draw(t, interval) - static_cast<int64_t>(size);
    if (t.left > 0) return 0;
  }
  t.left = draw(t, interval);
  return fmt::sample_weight(size, interval);
}

namespace {

// The table's lock, never waited for by a thread that holds it: a signal handler that allocates
// while its thread is inside the table (a free's look-up runs outside the recorder's busy scope)
// gives up instead, as a lost event, where it would wait for ever. The flag is raised before the
// lock is taken and lowered after it is released, so a handler between the two gives up too.
MT_TLS int tls_in_table = 0;

class TableLock {
 public:
  TableLock() : held_(tls_in_table == 0) {
    if (!held_) {
      g_trace.lost_events.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    tls_in_table = 1;
    pthread_mutex_lock(&g_table_mutex);
  }
  ~TableLock() {
    if (!held_) return;
    pthread_mutex_unlock(&g_table_mutex);
    tls_in_table = 0;
  }
  bool held() const { return held_; }
  TableLock(const TableLock&) = delete;
  TableLock& operator=(const TableLock&) = delete;

 private:
  bool held_;
};

}  // namespace

void insert(uintptr_t a) {
  TableLock lock;
  if (!lock.held()) return;  // (its free goes unrecorded: the reader keeps the block live)
  if ((g_used + 1) * 2 > g_cap && !grow()) return;  // without room likewise
  size_t j = slot_of(a);
  size_t tomb = SIZE_MAX;
  for (;; j = (j + 1) & (g_cap - 1)) {
    const uintptr_t k = g_keys[j];
    if (k == a) return;  // already there (a block freed by a path memtide does not see)
    if (k == kTomb && tomb == SIZE_MAX) tomb = j;
    if (k == kEmpty) break;
  }
  if (tomb != SIZE_MAX) {
    j = tomb;
  } else {
    ++g_used;
  }
  g_keys[j] = a;
  bump_filter(a, +1);
  g_live.fetch_add(1, std::memory_order_relaxed);
  update_check_frees();
}

bool release_slow(uintptr_t a) {
  bool found = false;
  if (filter_hit(a)) {
    TableLock lock;
    if (lock.held() && g_cap) {
      for (size_t j = slot_of(a);; j = (j + 1) & (g_cap - 1)) {
        const uintptr_t k = g_keys[j];
        if (k == kEmpty) break;
        if (k == a) {
          g_keys[j] = kTomb;
          bump_filter(a, -1);
          g_live.fetch_sub(1, std::memory_order_relaxed);
          update_check_frees();
          found = true;
          break;
        }
      }
    }
  }
  return found || (g_exact_blocks.load(std::memory_order_relaxed) && fmt::kept_at_switch(a));
}

bool record_free_checked(uintptr_t a) {
  if (g_interval.load(std::memory_order_relaxed) != 0)
    return (filter_hit(a) || g_exact_blocks.load(std::memory_order_relaxed)) && release_slow(a);
  if (filter_hit(a)) (void)release_slow(a);
  return true;
}

void fork_prepare() { pthread_mutex_lock(&g_table_mutex); }
void fork_parent() { pthread_mutex_unlock(&g_table_mutex); }
void fork_child() { mutex_init_in_child(&g_table_mutex); }

void trace_begins() {
  if (g_keys) std::memset(g_keys, 0, g_cap * sizeof(uintptr_t));
  g_used = 0;
  for (auto& c : g_filter) c.store(0, std::memory_order_relaxed);
  g_live.store(0);
  g_exact_blocks.store(false);
  g_exact_allocated.store(g_interval.load() == 0);
  update_check_frees();
}

}  // namespace memtide::rec::sampling
