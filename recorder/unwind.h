// The fast unwinder (unwind.cpp): cached CFI rules, the thread's unwind memo and its table of
// kept stacks (whole stacks found again by the state their walk started from). The lookup of
// kept stacks that the allocation path makes is in events.h.
#pragma once

#include <atomic>
#include <cstdint>

#include <pthread.h>

#include "recorder/base.h"

namespace memtide::rec {

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
inline constexpr int kKeptWays = 4;
inline constexpr int kKeptSetBits = 7;
inline constexpr int kKeptStacks = kKeptWays << kKeptSetBits;  // per thread, in sets by start state
inline constexpr int kKeptFrames = 48;  // deeper stacks are not kept
struct KeptStack;
// A thread's table of kept stacks is mapped on its own (mmap), so that only the pages of the
// sets it uses become resident: 40 threads walking the same 71 stacks took 60.7 MB of RSS with
// tables from the recorder's heap (which touched all of each), 21.7 MB mapped (4.7 MB
// untraced). At most kMaxKeptTables threads hold one at a time, so that a program with
// thousands of threads does not map one for each: later threads walk every stack until a table
// is freed (its thread exited) and their next kKeptRound walks end.
inline constexpr uint32_t kMaxKeptTables = 128;
extern std::atomic<uint32_t> g_kept_tables;
void kept_table_free(KeptStack* t);
inline constexpr uint32_t kNoSlot = ~0u;
struct KeptStack {
  uint64_t sp, bp;        // the start state, with ip[0]
  uint64_t gen;           // rule generation; 0: empty
  uint32_t used;          // when last found or kept (UnwindMemo::kept_clock)
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
  uint64_t ip[kKeptFrames];      // the return addresses (ip[0]: the start ip)
  const uint64_t* ra_slot[kKeptFrames];  // where each return address (but the first) was read
  uint32_t bp_at[kKeptFrames];
  uint64_t bp_val[kKeptFrames];  // what was read at bp_at
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
  // kKeptStacks of them (608 KiB), mapped once the thread has walked kKeptRound stacks
  // (unwind.cpp) if fewer than kMaxKeptTables threads hold one: a thread that allocates now
  // and then never pays for them. Unmapped with the thread's state (kept_table_free).
  KeptStack* kept = nullptr;
  uint32_t kept_wait = 0;
  uint32_t kept_clock = 0;
  uint32_t kept_round = 0, kept_misses = 0, kept_rest = 0;  // kept_probe(), kept_wanted()
  // What the last fast_backtrace left for stack_id: the KeptStack of the return addresses it
  // stored at `out` (a stack found again whose id is known: `kept_for_id_known`; else a stack just
  // kept or found before its id was, the id still to be set). stack_id uses it only for return addresses taken from that array
  // (so not after libunwind replaced them, nor in the verify mode) and clears it.
  KeptStack* kept_for_id = nullptr;
  bool kept_for_id_known = false;
  void* const* kept_for_id_ips = nullptr;
  int kept_for_id_n = 0;
};
// Sets the calling thread's stack bounds in `m`; false when they cannot be asked for now
// (stack_pending then: asked again at the thread's next walk). threads.cpp.
bool thread_stack_bounds(UnwindMemo* m);

// unwind.cpp: return addresses of the calling thread, leaf first, by cached CFI rules; -1 when
// a frame needs libunwind. unwind_modules_unloaded() forgets every rule (code may have moved).
// `from`: the state of the first frame to report (a return address, its sp and rbp); null:
// start inside fast_backtrace itself.
struct UnwindStart {
  uint64_t ip = 0, sp = 0, bp = 0;
};
// With `id_ok`, a stack found again whose id is known is not stored: the result is then
// kKeptStackId, and memo->kept_for_id the KeptStack with the return addresses and the id.
inline constexpr int kKeptStackId = -2;
// The kept-stack lookup a walk from `from` starts with, done on its own by kept_find so that a
// stack found again with its id costs no buffer nor walk; fast_backtrace then takes it as
// done (`done`: the entry found, or the way to keep the walked stack in, either may be null).
struct KeptLookup {
  bool done = false;
  KeptStack* hit = nullptr;
  KeptStack* victim = nullptr;
};

// What the inline lookup of kept stacks (events.h) uses of the unwinder, so that an allocation
// whose stack is found again with its id makes no call but kept_holds.
extern std::atomic<uint32_t> g_rule_gen;  // the unwinder's rule generation (unwind_modules_unloaded)
extern std::atomic<bool> g_rules_full;    // no memory for rules: every stack goes to libunwind
// Whether the stack kept in `e` is the one on the stack again (its start state is the
// current one): every slot its walk read holds the same value.
bool kept_holds(const KeptStack* __restrict e);
// Maps the thread's table of kept stacks; false when kMaxKeptTables threads hold one or the
// mapping fails.
bool kept_table_map(UnwindMemo* m);

int fast_backtrace(void** out, int cap, UnwindMemo* memo, const UnwindStart* from = nullptr, bool id_ok = false,
                   const KeptLookup* lookup = nullptr);
// Whether `p` lies on the stack the unwind rules are resolved on (a frame there is the
// recorder's, inside libdw: no signal handler of the program's runs on it).
bool on_resolver_stack(uintptr_t p);
void unwind_modules_unloaded();
extern pthread_mutex_t unwind_mutex;
// libunwind's backtrace of the calling thread (unw_backtrace's result), walked on a stack of
// the recorder's when the thread's own (known from `memo`) has little room left.
int libunwind_backtrace(void** ips, int cap, const UnwindMemo* memo);

}  // namespace memtide::rec
