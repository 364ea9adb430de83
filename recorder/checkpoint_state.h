// The writer's checkpoint state of one trace (checkpoint.cpp): the live blocks as a reader's
// replay holds them at the last applied time, the events waiting for a watermark, and what the
// next checkpoint's head repeats. Part of TraceState (trace_state.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "formats/checkpoint.h"
#include "formats/decoder.h"
#include "formats/live_rules.h"
#include "recorder/base.h"

namespace memtide::rec::ckpt {

using fmt::CheckpointDomain;

using fmt::live::kMaxBlockBytes;

// A growable array on the recorder's heap (never the program's).
template <class T>
struct Array {
  T* data = nullptr;
  size_t size = 0, cap = 0;
  bool push(const T& v) {
    if (size == cap && !grow(cap ? cap * 2 : 1024)) return false;
    data[size++] = v;
    return true;
  }
  bool grow(size_t n) {
    if (n <= cap) return true;
    T* d = static_cast<T*>(mem_alloc_uninit(n * sizeof(T)));
    if (!d) return false;
    if (size) __builtin_memcpy(d, data, size * sizeof(T));
    mem_free(data);
    data = d;
    cap = n;
    return true;
  }
  void release() {
    mem_free(data);
    *this = Array{};
  }
};

struct Live {
  uint64_t addr;  // 0: an empty slot
  uint64_t time;
  uint64_t size_api;  // size (56 bits) | api << 56
  uint64_t stack;
  uint64_t weight;  // the replay's weight of a sampled block; 0: itself
  uint64_t size() const { return size_api & kMaxBlockBytes; }
  fmt::Api api() const { return static_cast<fmt::Api>(size_api >> 56); }
};

// Live blocks by address: open addressing, linear probing, deletion by backward shift.
struct LiveTable {
  Live* slots = nullptr;
  size_t mask = 0, count = 0;
  uint64_t bytes = 0;  // what the blocks stand for, as the replay sums them

  unsigned shift = 64;
  // A block's home slot, as the replay's HashLiveMap places it (analysis/live_hash.h): each 128 bytes
  // of the address space map to 8 neighbouring slots, the groups scattered by a Fibonacci hash, so
  // that blocks an allocator placed together share cache lines here too (a hash of each address
  // cost a cache miss per event with a million live blocks).
  size_t hash(uint64_t a) const {
    const uint64_t group = ((a >> 7) * 0x9E3779B97F4A7C15ull) >> shift;
    return static_cast<size_t>((group << 3) | ((a >> 4) & 7));
  }
  void prefetch(uint64_t a) const {
    if (slots) __builtin_prefetch(&slots[hash(a) & mask]);
  }
  Live* find(uint64_t a) {
    if (!slots) return nullptr;
    for (size_t i = hash(a) & mask;; i = (i + 1) & mask) {
      if (slots[i].addr == a) return &slots[i];
      if (!slots[i].addr) return nullptr;
    }
  }
  bool insert(const Live& v) {  // (no block at v.addr)
    if ((count + 1) * 4 > (mask + 1) * 3 || !slots) {  // (at most 3/4 full: under 4 probes, live_map.h)
      const size_t n = slots ? (mask + 1) * 2 : 4096;
      Live* s = static_cast<Live*>(mem_alloc(n * sizeof(Live)));
      if (!s) return false;
      Live* old = slots;
      const size_t old_n = slots ? mask + 1 : 0;
      slots = s;
      mask = n - 1;
      shift = 64 - (static_cast<unsigned>(__builtin_ctzll(n)) - 3);
      for (size_t i = 0; i < old_n; ++i)
        if (old[i].addr) place(old[i]);
      mem_free(old);
    }
    place(v);
    ++count;
    return true;
  }
  void place(const Live& v) {
    size_t i = hash(v.addr) & mask;
    while (slots[i].addr) i = (i + 1) & mask;
    slots[i] = v;
  }
  void erase(Live* e) {
    size_t i = static_cast<size_t>(e - slots);
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
      if (!slots[j].addr) break;
      const size_t home = hash(slots[j].addr) & mask;
      // slots[j] may move to i when i lies cyclically in [home, j)
      if (((j - home) & mask) >= ((j - i) & mask)) {
        slots[i] = slots[j];
        i = j;
      }
    }
    slots[i].addr = 0;
    --count;
  }
};

// A mapped range [addr, addr + size) of the mmap domain (kept sorted by address).
using Range = Live;

// An event as it is applied.
enum : uint8_t { kAlloc, kFree, kSwitch, kWeight };
struct Op {
  uint64_t time, addr, size, stack, weight;
  uint32_t stream;
  uint8_t kind, api;
};

// An event waiting in its stream's queue for a watermark that vouches for it: 32 bytes (the
// writer holds a flush pass's worth of them). A sampled Alloc is followed by a kWeight event
// whose addr is its weight. Sizes are kept to 48 bits (no allocation of 256 TiB succeeds).
inline constexpr uint64_t kSizeMask = (uint64_t{1} << 48) - 1;
struct Event {
  uint64_t time, addr;
  uint64_t size_api_kind;  // size | api << 48 | kind << 56
  uint32_t stack;
  uint32_t block;  // the block's number in the file: the order of equal times across streams
  uint64_t size() const { return size_api_kind & kSizeMask; }
  uint8_t api() const { return static_cast<uint8_t>(size_api_kind >> 48); }
  uint8_t kind() const { return static_cast<uint8_t>(size_api_kind >> 56); }
};
static_assert(sizeof(Event) == 32);

// A stream's Alloc and Free records applied, and its thread as its records describe it.
struct Queue {
  Array<Event> ev;
  size_t head;
};

struct StreamCounts {
  uint64_t allocs, frees;
  uint64_t os_tid, parent, start, exit;
  uint8_t name_len;
  char name[31];
};

// A Marker of a thread's stream, kept for the head of the first checkpoint after its time (the
// readers of a window do not read the blocks that hold it).
struct MarkerCopy {
  uint64_t time, sampling;
  uint32_t stream;
  uint16_t len;
  char label[256];
};

// A Counters record of the process stream, kept for the head of the first checkpoint after
// its time (the whole run's timeline reads the heads instead of every block).
struct CounterCopy {
  uint64_t time, rss, vm;
};

struct BlockMark {
  uint64_t offset, end_time;
};

struct CheckpointTrace {
  bool failed = false;
  LiveTable live[2];  // heap, custom
  Array<Range> ranges;
  uint64_t mapped = 0;
  Array<Queue> queues;  // by stream: its events in stream (so time) order, from `head` on
  Array<uint32_t> heap;  // (scratch of checkpoint_pass)
  Array<StreamCounts> counts;
  Array<BlockMark> marks;  // blocks written since the last checkpoint's replay_from
  Array<MarkerCopy> markers;  // the threads' and stream 0's
  Array<CounterCopy> counters;
  uint32_t blocks = 0;  // blocks decoded (wraps: only equal times in one pass compare it)
  uint64_t interval = 0;  // sampling interval in force at `applied` (0: exact)
  uint64_t applied = 0;   // every event timed before it is applied
  bool due = false;  // checkpoint_due: at the next pass that can, whatever the interval
  uint64_t due_from = 0;
  uint64_t written_seq = 0, last_time = 0, last_offset = 0, last_time_applied = 0, last_head = 0;
  fmt::DecodeScratch* scratch = nullptr;
  void release();  // gives its tables back to the recorder's heap (begin_trace)
};
}  // namespace memtide::rec::ckpt
