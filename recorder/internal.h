// Recorder internals shared by its translation units.
//
// Sections:
//   [1] Memory: the recorder's own heap (mimalloc), never the program's
//   [2] Streams and chunks: per-thread record buffers, lock-free for their owner
//   [3] Thread state (TLS) and global state
//   [4] Parts implemented in other files: stacks, modules, writer, process info
#pragma once

#include <link.h>
#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <ctime>

#include "formats/encoder.h"
#include "formats/records.h"
#include "recorder/options.h"

#define MT_LIKELY(x) __builtin_expect(!!(x), 1)
#define MT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define MT_TLS __attribute__((tls_model("initial-exec"))) __thread
#define MT_NOINLINE __attribute__((noinline))
#define MT_ALWAYS_INLINE inline __attribute__((always_inline))

namespace memtide::rec {

// ---------------------------------------------------------------------------------------
// [1] Memory
// ---------------------------------------------------------------------------------------
void* mem_alloc(size_t n);   // zeroed
void* mem_alloc_uninit(size_t n);  // not zeroed (a chunk's data, written before it is read)
void mem_free(void* p);
void mem_thread_ending();  // the thread's destructor runs: mimalloc has deleted its heaps (stream.cpp)

// One-line diagnostics, prefixed "memtide: ", written with write(2), capped in number.
void message(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The event clock: CLOCK_MONOTONIC nanoseconds. Where the TSC is invariant and the kernel
// itself keeps time with it (so it is synchronised across cores), the writer thread calibrates
// it against CLOCK_MONOTONIC, and from then on events read the TSC (~15 ns instead of ~19 ns
// here) and convert with that calibration. Two steps: a first calibration over the writer's
// first few milliseconds (so that a busy program's first events do not pay for the system
// call), then a finer one over 100 ms, anchored where the first one is at that point, so that
// time goes on without a jump (it may then differ from CLOCK_MONOTONIC by the first one's error
// over 100 ms, a few microseconds, for good). Each step publishes a new, immutable TscParams.
struct TscParams {
  uint64_t anchor_tsc = 0, anchor_ns = 0;
  uint64_t mult = 0;  // ns per tick, 32.32 fixed point
  uint64_t at(uint64_t tsc) const {
    return anchor_ns + static_cast<uint64_t>((static_cast<unsigned __int128>(tsc - anchor_tsc) * mult) >> 32);
  }
};
struct TscClock {
  std::atomic<const TscParams*> params{nullptr};  // nullptr: not calibrated (yet)
};
extern TscClock g_tsc;
void tsc_calibrate_begin();
// Called by the writer as time passes; false once the calibration is over (done or given up).
bool tsc_calibrate_step();
uint64_t tsc_calibrate_due();  // about when the next step is (now_ns)

// The TSC is read after every earlier instruction has completed (LFENCE; the kernel's own
// clock orders its reading too): a bare RDTSC may execute ahead of the loads before it, and a free timed before
// the load that handed its thread the pointer, or an allocation timed before the allocator's
// own synchronisation, would then be ordered before the event it follows on another thread
// (`Ordering.CrossThreadAddressReuseReplaysExactly`; up to ~0.3 µs early on a 2-vCPU EPYC).
inline uint64_t now_ns() {
  if (const TscParams* p = g_tsc.params.load(std::memory_order_acquire); MT_LIKELY(p != nullptr)) {
    __builtin_ia32_lfence();
    return p->at(__builtin_ia32_rdtsc());
  }
  return monotonic_ns();
}

// ---------------------------------------------------------------------------------------
// [2] Streams
//
// A stream is the record sequence of one thread (or the process stream, index 0). Its owner
// appends encoded records into the current chunk and publishes them with one release store
// of `committed`. The writer thread copies [consumed, committed) out at any time without a
// lock (bytes below `committed` never change), and takes over a chunk once its owner sealed
// it. Only the writer frees chunks, so a chunk it is reading cannot disappear.
// ---------------------------------------------------------------------------------------
inline constexpr uint32_t kChunkDefs = 256;
struct Chunk {
  Chunk* next;                      // writer queue link
  struct Stream* stream;
  uint64_t seq;                     // position in its stream's chunk sequence
  uint32_t cap;
  std::atomic<uint32_t> committed;  // owner: release store; writer: acquire load
  uint32_t consumed;                // writer only
  bool last;                        // the stream's final chunk (its thread exited)
  uint64_t end_time, end_addr;      // the stream's registers after the chunk (set when sealed)
  // Where the chunk's StackDef records lie: [stacks_begin, stacks_end), stacks_end 0 if none.
  // Set by the owner before it commits them; the writer flags the blocks they fall in.
  std::atomic<uint32_t> stacks_begin, stacks_end;
  // Each StackDef record's place [def_at, def_at + def_len), in order, while they fit
  // (ndefs <= kChunkDefs), so that the writer moves them out of a sealed chunk without reading
  // its records. Owner only until the chunk is sealed.
  uint32_t ndefs;
  uint32_t def_at[kChunkDefs], def_len[kChunkDefs];
  alignas(16) uint8_t data[];
};

inline constexpr uint32_t kFirstChunkSize = 4 * 1024;
inline constexpr uint32_t kMaxChunkSize = 64 * 1024;
// For the recorder's tests only: MEMTIDE_TEST_CHUNK_BYTES (16..65536) makes every chunk that
// size (a record that does not fit gets a chunk of its own), so that a short program crosses
// chunk boundaries at every few records, where the writer must keep each stream's order.
inline constexpr const char* kTestChunkEnv = "MEMTIDE_TEST_CHUNK_BYTES";

struct Stream {
  uint32_t index = 0;
  // Owner side.
  Chunk* chunk = nullptr;   // current chunk (pointer published with release for the writer)
  uint32_t pos = 0;
  uint64_t last_time = 0;
  uint64_t last_addr = 0;
  uint64_t next_seq = 0;
  uint64_t allocs = 0, frees = 0;
  // Event times (event_time): how many more Allocs and Frees may take last_time as theirs,
  // and the clock epoch that allows it.
  uint32_t reuse_left = 0;
  uint64_t reuse_epoch = 0;
  // A record timed at this value is being prepared and not yet committed (a realloc: its free
  // is timed before the real call, which may take long); 1: a time is about to be read; 0:
  // none. The writer's watermarks do not pass it.
  uint64_t pending_time = 0;  // __atomic builtins (the struct is reset by assignment)
  // 1 from before the owner reads the clock for a record until the record is committed
  // (begin_record / end_record). Plain stores: the writer makes them visible with membarrier
  // before it reads them (writer.cpp, exact watermarks).
  uint32_t in_record = 0;
  // Writer side.
  bool w_in_record = false;  // in_record as the writer's pass saw it
  fmt::RunState w_run;  // registers and rings after the bytes taken from the current chunk
  uint64_t w_next_seq = 0;
  bool w_done = false;
  // Registry links (under g.registry_mutex).
  Stream* reg_prev = nullptr;
  Stream* reg_next = nullptr;
  // Owner side: the rings of recent addresses of the chunk being written, which is one block
  // of the file unless the writer takes it in pieces (writer.cpp, emit): Allocs and Frees at
  // recent addresses are written in their short forms. (Last, away from the fields above that
  // every event uses.)
  alignas(64) fmt::RecentIndex recent;
};

// Gets room for `need` bytes in the stream's chunk (sealing it when full).
uint8_t* reserve_slow(Stream* s, size_t need);
inline uint8_t* reserve(Stream* s, size_t need) {
  Chunk* c = s->chunk;
  if (MT_LIKELY(c && c->cap - s->pos >= need)) return c->data + s->pos;
  return reserve_slow(s, need);
}
inline void commit(Stream* s, uint8_t* end) {
  s->pos = static_cast<uint32_t>(end - s->chunk->data);
  s->chunk->committed.store(s->pos, std::memory_order_release);
}
// Around the clock read and the commit of a timed record of a thread's own stream. A record
// whose clock was read before the writer's pass took its time is then either committed when
// the pass looks, or seen in progress (writer.cpp, flush_pass).
inline void begin_record(Stream* s) {
  __atomic_store_n(&s->in_record, 1u, __ATOMIC_RELAXED);
  __asm__ __volatile__("" ::: "memory");  // the clock is read after this store, in program order
}
inline void end_record(Stream* s) { __atomic_store_n(&s->in_record, 0u, __ATOMIC_RELEASE); }

// Event times. Reading the clock costs 8 to 15 ns, a large part of an event's cost. While only
// one thread records, ordering across threads does not depend on times, so up to
// kReuseEvents Allocs and Frees in a row after a clock reading take the time of the record
// before them (dt 0, which also compresses better) instead of reading the clock. The writer
// bumps g_clock_epoch at each wake (at least every kClockTickNs, unless it idles: kEpochIdle)
// and before each pass takes its watermark's time; a changed epoch makes the next event read
// the clock, so a reused time is never older than the writer's last wake, and a record begun
// after a pass's barrier is timed after that pass's watermark. Once a second thread records
// (kEpochShared), every event reads the clock: a free by one thread must be timed before the
// allocation that reuses the block in another. The thread that sets the bit does so before its
// first event, and a block it frees reaches another thread's allocation through the
// allocator's own synchronisation, so that thread sees the bit by then.
inline constexpr uint64_t kEpochShared = 1ull << 63;
// Set while the writer idles (wakes up to kMaxIdleLevel doublings less often, writer.cpp): no
// event reuses a time then, since the next wake may be far.
inline constexpr uint64_t kEpochIdle = 1ull << 62;
inline constexpr uint32_t kReuseEvents = 63;
inline constexpr uint64_t kClockTickNs = 10000000;
extern std::atomic<uint64_t> g_clock_epoch;
// Whether the writer's watermarks are exact (membarrier, writer.cpp): a record in progress
// then holds back the watermark of every pass that sees it, however long it stays begun.
extern std::atomic<bool> g_exact_watermarks;

// Writer: a new epoch (every reused time from now on is at least this recent).
inline void clock_tick() { g_clock_epoch.fetch_add(1, std::memory_order_seq_cst); }
// A second thread records: from now on every event reads the clock.
inline void clock_share() { g_clock_epoch.fetch_or(kEpochShared, std::memory_order_seq_cst); }

// Reads the clock and lets the next kReuseEvents events of `s` reuse its time in epoch `e`.
MT_NOINLINE uint64_t event_time_read(Stream* s, uint64_t e);
// The time of an Alloc or Free about to be written to `s` (after begin_record).
inline uint64_t event_time(Stream* s) {
  const uint64_t e = g_clock_epoch.load(std::memory_order_relaxed);
  if (MT_LIKELY(s->reuse_left != 0) && s->reuse_epoch == e) {
    --s->reuse_left;
    return s->last_time;
  }
  if (e & kEpochShared) return now_ns();
  return event_time_read(s, e);
}

// Timestamps within a stream never go backwards (a clamped time costs nothing in ordering:
// the event happened at or after the previous one of the same thread).
inline uint64_t stream_time(Stream* s, uint64_t t) { return t < s->last_time ? s->last_time : t; }

// Appends a length-prefixed record built by `fill(RecordBuilder&)`. Returns false if the
// record could not be built.
bool append_record(Stream* s, const uint8_t* rec, size_t n);
// The same for a StackDef record, whose position the chunk remembers (Chunk::stacks_begin).
bool append_stack_record(Stream* s, const uint8_t* rec, size_t n);

// Seals the current chunk and hands it to the writer (the thread is exiting: last = true).
void seal_chunk(Stream* s, bool last);
void stream_init(Stream* s, uint32_t index, uint64_t base_time);

// ---------------------------------------------------------------------------------------
// [3] Thread state and global state
// ---------------------------------------------------------------------------------------
struct StackCacheEntry {
  uint64_t hash;
  uint32_t id;
};
inline constexpr unsigned kStackCacheSize = 512;  // per thread, direct-mapped

// The thread's last stack as unwound, outermost frame first, with the state and rule each
// frame was stepped with (so where its return address and saved rbp were read: at offsets of
// the rule from its CFA, which is its caller's sp): the next unwind that reaches one of these
// frames in the same state re-reads only those slots instead of stepping the frames again
// (unwind.cpp).
inline constexpr int kMemoFrames = 96;
struct UnwindFrame {
  uint64_t ip, sp, bp;        // the frame's state before it is stepped
  uint64_t rule;              // the cached rule it was stepped with
};

// A whole stack seen before, found again by the state (ip, sp, rbp) its walk started from:
// if every slot its walk read still holds what it held (independent loads), the walk would
// step the same frames, and the stack is this one again, with the same id. The return address
// of each frame k >= 1 was read at `ra_at[k]`, and the rbp of some frames (saved by their
// callee, where it matters) at `bp_at`, all as offsets from the start sp; frames leaf first.
// 128 sets of 4 (608 KiB of address space per thread, mapped at its 256th walk; pages become
// resident as sets are used): with 32 sets, the hot start states of sqlite3 overfilled one
// set in 2 runs of 6 (where the stack addresses fell depends on ASLR), 1 M of its 5 M walks
// then missed and the run took 11% longer; with 128 sets, none in 12 runs.
inline constexpr int kSeenWays = 4;
inline constexpr int kSeenSetBits = 7;
inline constexpr int kSeenStacks = kSeenWays << kSeenSetBits;  // per thread, in sets by start state
inline constexpr int kSeenFrames = 48;  // deeper stacks are not kept
struct SeenStack;
// A thread's table of kept stacks is mapped on its own (mmap), so that only the pages of the
// sets it uses become resident: 40 threads walking the same 71 stacks took 60.7 MB of RSS with
// tables from the recorder's heap (which touched all of each), 21.7 MB mapped (4.7 MB
// untraced). At most kMaxSeenTables threads hold one at a time, so that a program with
// thousands of threads does not map one for each: later threads walk every stack until a table
// is freed (its thread exited) and their next kSeenRound walks end.
inline constexpr uint32_t kMaxSeenTables = 128;
extern std::atomic<uint32_t> g_seen_tables;
void seen_table_free(SeenStack* t);
inline constexpr uint32_t kNoSlot = ~0u;
struct SeenStack {
  uint64_t sp, bp;        // the start state, with ip[0]
  uint64_t gen;           // rule generation; 0: empty
  uint32_t used;          // when last found or kept (UnwindMemo::seen_clock)
  int n;                  // frames
  bool bp_used;           // whether the start rbp matters (else any rbp gives the same stack)
  uint32_t zero_ra_at;    // the walk ended on a null return address read there (else kNoSlot)
  // The id stack_id gave it, once known, with the frames it was given (after skipping the
  // recorder's own frames and the depth limit), which must be the same again.
  bool has_id;
  bool id_own_known;  // whether libmemtide's range was known when the id was given
  uint32_t id;
  int id_skip, id_n;
  int nbp;                       // rbp slots to check
  uint64_t ip[kSeenFrames];      // the return addresses (ip[0]: the start ip)
  const uint64_t* ra_slot[kSeenFrames];  // where each return address (but the first) was read
  uint32_t bp_at[kSeenFrames];
  uint64_t bp_val[kSeenFrames];  // what was read at bp_at
};

struct UnwindMemo {
  // The thread's own stack. The memo is used only for walks that start and end inside it,
  // so that every slot it re-reads is mapped (a program may run on other stacks: coroutines,
  // sigaltstack). Both 0: unknown, no memo.
  uint64_t stack_lo = 0, stack_hi = 0;
  bool stack_pending = false;  // not known yet (thread_stack_bounds could not ask then)
  uint64_t gen = 0;           // rule generation the frames were stepped with; 0: empty
  int n = 0;
  bool ends_with_zero_ra = false;  // the walk ended on a null return address (else on CFI)
  uint64_t end_cfa = 0;            // then: the outermost frame's CFA
  UnwindFrame f[kMemoFrames];      // outermost first
  UnwindFrame walk[kMemoFrames];   // the current walk, leaf first (until overwritten, the
                                   // previous one: its rules are reused at equal ips)
  // kSeenStacks of them (608 KiB), mapped once the thread has walked kSeenRound stacks
  // (unwind.cpp) if fewer than kMaxSeenTables threads hold one: a thread that allocates now
  // and then never pays for them. Unmapped with the thread's state (seen_table_free).
  SeenStack* seen = nullptr;
  uint32_t seen_wait = 0;
  uint32_t seen_clock = 0;
  uint32_t seen_round = 0, seen_misses = 0, seen_rest = 0;  // seen_probe(), seen_wanted()
  // What the last fast_backtrace left for stack_id: the SeenStack of the return addresses it
  // stored at `out` (a stack found again whose id is known: `carry_hit`; else a stack just
  // kept or found before its id was, the id still to be set). stack_id uses it only for return addresses taken from that array
  // (so not after libunwind replaced them, nor in the verify mode) and clears it.
  SeenStack* carry = nullptr;
  bool carry_hit = false;
  void* const* carry_out = nullptr;
  int carry_n = 0;
};
// Sets the calling thread's stack bounds in `m`; false when they cannot be asked for now
// (stack_pending then: asked again at the thread's next walk). recorder.cpp.
bool thread_stack_bounds(UnwindMemo* m);

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
};

enum State : int { kUninit = 0, kStarting, kActive, kStopped };

struct Global {
  Options opts;
  std::atomic<int> state{kUninit};
  std::atomic<bool> paused{false};
  bool started = false;       // start() ran (file open, writer running)
  pid_t pid = 0;
  int fd = -1;
  char path[4096] = {};
  const char* manifest = nullptr;  // MEMTIDE_MANIFEST at start-up (--no-follow takes it out of the environment)
  uint64_t start_time = 0;
  std::atomic<uint32_t> next_stream{1};
  uint32_t chunk_first = kFirstChunkSize, chunk_max = kMaxChunkSize;  // (kTestChunkEnv)

  pthread_mutex_t registry_mutex = PTHREAD_MUTEX_INITIALIZER;
  Stream* registry = nullptr;  // all streams with data the writer must visit

  // The process stream (index 0): shared by every thread under `shared_mutex`; also takes
  // events of threads whose state is gone (after their exit destructor).
  pthread_mutex_t shared_mutex = PTHREAD_MUTEX_INITIALIZER;
  Stream shared;

  pthread_mutex_t queue_mutex = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t queue_cond = PTHREAD_COND_INITIALIZER;
  Chunk* queue_head = nullptr;
  Chunk* queue_tail = nullptr;
  bool writer_stop = false;
  int end_reason = 0;
  uint64_t end_status = 0;
  pthread_t writer{};
  bool writer_running = false;
  pthread_key_t thread_key{};

  uint64_t exited_allocs = 0, exited_frees = 0;  // writer: totals of finished streams
  bool own_range_known = false;
  uintptr_t own_lo = 0, own_hi = 0;              // libmemtide's text, skipped in stacks
  // Set when malloc or realloc, as the loader binds them, are not libmemtide's (nor libc's
  // through it): the program has an allocator of its own, which libc's own calls reach too.
  // Where it is defined (a module's path, as the loader has it), for ProcessInfo's options.
  const char* foreign_malloc_in = nullptr;
};
extern Global g;

extern MT_TLS ThreadState* tls_thread;
extern MT_TLS int tls_busy;
extern MT_TLS int tls_exited;

// ---------------------------------------------------------------------------------------
// [4] Other parts
// ---------------------------------------------------------------------------------------
// stacks.cpp: the stack table. Returns the id of the stack `ips[0..n)` (leaf first), adding
// its new trie nodes (and a StackDef record into `s`) on first sight.
void stacks_reset();
uint32_t stack_id(ThreadState* ts, Stream* s, void* const* ips, int n);
extern pthread_mutex_t stacks_mutex;

// modules.cpp: scans loaded modules and appends ModuleLoad / ModuleUnload to the process stream.
void modules_reset();
void modules_scan();
extern pthread_mutex_t modules_mutex;
void find_own_range();
// The GNU build-id of a loaded module, from its program headers in memory.
bool loaded_build_id(const ElfW(Phdr)* phdr, int phnum, uintptr_t bias, const uint8_t*& id, size_t& len);

// unwind.cpp: return addresses of the calling thread, leaf first, by cached CFI rules; -1 when
// a frame needs libunwind. unwind_modules_unloaded() forgets every rule (code may have moved).
// `from`: the state of the first frame to report (a return address, its sp and rbp); null:
// start inside fast_backtrace itself.
struct UnwindStart {
  uint64_t ip = 0, sp = 0, bp = 0;
};
// With `id_ok`, a stack found again whose id is known is not stored: the result is then
// kSeenStackId, and memo->carry the SeenStack with the return addresses and the id.
inline constexpr int kSeenStackId = -2;
// The kept-stack lookup a walk from `from` starts with, done on its own by seen_find so that a
// stack found again with its id costs no buffer nor walk; fast_backtrace then takes it as
// done (`done`: the entry found, or the way to keep the walked stack in, either may be null).
struct SeenLookup {
  bool done = false;
  SeenStack* hit = nullptr;
  SeenStack* victim = nullptr;
};

// The lookup of kept stacks, inline so that an allocation whose stack is found again with its
// id makes no call but seen_holds (unwind.cpp).
extern std::atomic<uint32_t> g_rule_gen;  // the unwinder's rule generation (unwind_modules_unloaded)
extern std::atomic<bool> g_rules_full;    // no memory for rules: every stack goes to libunwind
// Whether the stack kept in `e` is the one on the stack again (its start state is the
// current one): every slot its walk read holds the same value.
bool seen_holds(const SeenStack* __restrict e);
// Maps the thread's table of kept stacks; false when kMaxSeenTables threads hold one or the
// mapping fails.
bool seen_table_map(UnwindMemo* m);

// Whether to look for and keep whole stacks: not while few are found again (then the cost of
// keeping them exceeds what the hits save). Decided at the first miss after each 256 lookups or
// more, from the share of misses since the last decision (a hit counts nothing); after a poor
// round the set rests for 4096 walks.
inline constexpr uint32_t kSeenRound = 256, kSeenRest = 4096;

// The set of kSeenWays entries a start state may be kept in.
inline SeenStack* seen_set(UnwindMemo* m, uint64_t ip, uint64_t sp) {
  const uint64_t h = (ip ^ (sp * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
  return &m->seen[(h >> (64 - kSeenSetBits)) * kSeenWays];
}

// The thread's table of kept stacks, mapped at its kSeenRound-th walk; false until then, and
// for another round whenever it could not be had.
inline bool seen_table(UnwindMemo* m) {
  if (MT_LIKELY(m->seen != nullptr)) return true;
  if (++m->seen_wait < kSeenRound) return false;
  return seen_table_map(m);
}

inline bool seen_wanted(UnwindMemo* m) {
  if (MT_UNLIKELY(m->seen_rest)) {
    --m->seen_rest;
    return false;
  }
  return true;
}

// The kept stack of the start state (ip, sp, bp) if the stack on the stack is it again (else
// null, and `victim` the way of the set to keep the walked stack in).
inline SeenStack* seen_probe(UnwindMemo* m, uint64_t ip, uint64_t sp, uint64_t bp, int cap, uint64_t gen,
                             SeenStack** victim) {
  SeenStack* set = seen_set(m, ip, sp);
  const uint32_t now = ++m->seen_clock;
  // The start ip first: it tells the ways of a set apart.
  for (int w = 0; w < kSeenWays; ++w) {
    SeenStack* e = set + w;
    if (e->ip[0] == ip && e->sp == sp && e->gen == gen && (e->bp == bp || !e->bp_used) && e->n <= cap &&
        seen_holds(e)) {
      e->used = now;
      return e;
    }
  }
  if (now - m->seen_round >= kSeenRound) {
    if (m->seen_misses * 2 > now - m->seen_round) m->seen_rest = kSeenRest;
    m->seen_round = now;
    m->seen_misses = 0;
  }
  ++m->seen_misses;
  SeenStack* v = set;
  for (int w = 1; w < kSeenWays; ++w)
    if (set[w].used < v->used) v = set + w;
  v->used = now;
  *victim = v;
  return nullptr;
}

// The kept-stack lookup a walk from `from` would start with (fast_backtrace), on its own.
MT_ALWAYS_INLINE SeenStack* seen_find(UnwindMemo* m, const UnwindStart& from, int cap, SeenLookup* f) {
  // Where fast_backtrace would not look (it returns before, or its memo is not usable from
  // here, which it may still find out), it is left to look itself.
  auto walk_could_keep = [&] {
    return !g_rules_full.load(std::memory_order_relaxed) && from.ip != 0 && from.sp >= m->stack_lo &&
           from.sp < m->stack_hi;
  };
  // Only a thread whose walks can keep stacks gets a table (there are kMaxSeenTables).
  if (MT_UNLIKELY(m->seen == nullptr) && (!walk_could_keep() || !seen_table(m))) return nullptr;
  if (!seen_wanted(m)) return nullptr;
  SeenStack* victim;
  SeenStack* hit = seen_probe(m, from.ip, from.sp, from.bp, cap, g_rule_gen.load(std::memory_order_acquire), &victim);
  // A hit is the stack it was (every slot checked), and it was kept from a walk inside this
  // thread's stack, so its sp, the same, is inside it still.
  if (MT_LIKELY(hit != nullptr)) {
    f->done = true;
    f->hit = hit;
    return hit;
  }
  if (!walk_could_keep()) return nullptr;
  f->done = true;
  f->victim = victim;
  return nullptr;
}
int fast_backtrace(void** out, int cap, UnwindMemo* memo, const UnwindStart* from = nullptr, bool id_ok = false,
                   const SeenLookup* lookup = nullptr);
void unwind_modules_unloaded();
extern pthread_mutex_t unwind_mutex;

// process.cpp
void append_process_info(Stream* s);
// Reads the process counters (every counter interval) and appends a Counters record to `s` when
// they changed since the last one written (with the last unchanged reading before it), when
// kCounterHeartbeatNs passed without one, or when `write` (the trace's last sample). Returns
// whether they changed.
inline constexpr uint64_t kCounterHeartbeatNs = 1000000000;
bool sample_counters(Stream* s, bool write = false);
void process_counters_reset();

// writer.cpp
bool open_trace_file(bool child);
void writer_start();
// Asks the writer for a last flush with an End record and waits (at most `timeout_ms`).
void writer_finish(fmt::EndReason reason, uint64_t status, int timeout_ms);
// Hands a sealed chunk to the writer. With `may_wait`, waits while the writer is far behind
// (only callers that hold no lock the writer takes: not the process stream's).
void enqueue_chunk(Chunk* c, bool may_wait);
void writer_reset_after_fork();
// Waits (a few seconds at most) while much is queued for the writer: for long runs of records
// into the process stream, whose appends never wait themselves.
void wait_for_writer();

// leak_scan.cpp: the reachability scan at exit (--leak-scan). `sp`: the scanning thread's stack
// is read from there up.
void leak_scan(uintptr_t sp);
void writer_reopened();  // after on_exec_failed reopened g.fd
// A descriptor for the trace file out of the program's reach (dup_out_of_reach), close-on-exec;
// `fd` itself is closed. Kept as it is when no better number is free.
int high_trace_fd(int fd);
// trace_fd.cpp: a close-on-exec copy of `fd` just above the soft RLIMIT_NOFILE when the hard
// limit allows, else at the highest free number below the limit (at most 64Ki) but the top
// `spare_top` ones; -1 when none is free. `fd` stays open.
int dup_out_of_reach(int fd, int spare_top = 0);
// fcntl as a system call, never the interposed one.
int sys_fcntl(int fd, int cmd, long arg);
// `fd` moved to dup_out_of_reach's number (the old one closed); `fd` itself when none is free.
int move_out_of_reach(int fd, int spare_top = 0);
// What the recorder's other descriptors leave to the trace's below the limit.
inline constexpr int kTraceFdSpare = 1;
// Closes g.fd (bypassing the interposed close, which keeps it open) and sets it to -1.
void close_trace_fd();

}  // namespace memtide::rec
