// The unwinder of the allocation path: return addresses of the calling thread, leaf first.
//
// Each frame is stepped with a rule cached per code address: where the CFA is (rsp or rbp
// plus an offset), where the return address and the caller's rbp were saved relative to it.
// That covers the frames compilers emit for ordinary x86-64 code. The rules come from the
// module's own CFI (.eh_frame, read with elfutils libdw from the file on disk, after checking
// its build-id against the loaded image) the first time an address is seen, and are kept in
// a lock-free table read by every thread. A stack with any frame outside that model (signal
// frames, CFA expressions, realigned stacks, code without CFI, a changed file) is unwound by
// libunwind instead, so both give the same return addresses; `MEMTIDE_UNWIND=verify` checks
// that on every stack.
//
// Lookups of new addresses run under `unwind_mutex`, with the calling thread busy (libdw's
// own allocations are not recorded). Nothing on that path takes the dynamic loader's lock:
// modules are found with _dl_find_object, which is lock-free.
//
// Most stacks share their outer frames with the thread's previous one: a per-thread memo of
// that stack (UnwindMemo, unwind.h) lets a walk that reaches one of its frames in the same
// state check the remaining frames' saved slots instead of stepping them. The walk usually
// starts at the caller of the allocation shim, from the shim's frame pointer.
#include <dlfcn.h>
#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <link.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstring>

#include "recorder/events.h"
#include "recorder/modules.h"
#include "recorder/recorder.h"
#include "recorder/state.h"
#include "recorder/unwind.h"

namespace memtide::rec {

pthread_mutex_t unwind_mutex = MT_MUTEX_INITIALIZER;

std::atomic<uint32_t> g_rule_gen{1};
std::atomic<bool> g_rules_full{false};

namespace {

// A frame rule in 64 bits:
//   63 valid, 62 end (no return address: outermost frame), 61 none (use libunwind),
//   60 CFA based on rbp (else rsp), 59 rbp saved,
//   44..58 generation (15 bits), 32..43 rbp offset (signed 12), 24..31 return-address
//   offset (signed 8), 0..23 CFA offset (signed 24).
constexpr uint64_t kValid = 1ull << 63;
constexpr uint64_t kEnd = 1ull << 62;
constexpr uint64_t kNone = 1ull << 61;
constexpr uint64_t kCfaRbp = 1ull << 60;
constexpr uint64_t kRbpSaved = 1ull << 59;
constexpr int kGenShift = 44;
constexpr uint64_t kGenMask = 0x7FFF;

inline int64_t sext(uint64_t v, int bits) {
  const uint64_t m = 1ull << (bits - 1);
  v &= (1ull << bits) - 1;
  return static_cast<int64_t>((v ^ m) - m);
}
inline const uint64_t* slot(uint64_t cfa, int64_t off) {
  return reinterpret_cast<const uint64_t*>(cfa + static_cast<uint64_t>(off));
}
inline bool fits(int64_t v, int bits) { return v >= -(1ll << (bits - 1)) && v < (1ll << (bits - 1)); }
inline int64_t cfa_off(uint64_t r) { return sext(r, 24); }
inline int64_t ra_off(uint64_t r) { return sext(r >> 24, 8); }
inline int64_t rbp_off(uint64_t r) { return sext(r >> 32, 12); }

struct RuleSlot {
  std::atomic<uint64_t> pc;  // 0: empty; a slot's pc never changes once set
  std::atomic<uint64_t> rule;
};
// Open addressing, grown by replacement under unwind_mutex; a replaced table is kept (never
// freed) for threads still reading it. Small and dense on purpose: the hot rules of a
// program share few cache lines and pages.
struct RuleTable {
  uint64_t mask;
  uint64_t used;
  RuleTable* retired;
  RuleSlot slots[];
};
constexpr uint64_t kFirstSlots = 1u << 12;
std::atomic<RuleTable*> g_rules{nullptr};

inline uint64_t slot_of(uint64_t pc) { return (pc * 0x9E3779B97F4A7C15ull) >> 40; }

inline uint64_t rule_find(uint64_t pc, uint64_t gen) {
  const RuleTable* t = g_rules.load(std::memory_order_acquire);
  if (MT_UNLIKELY(!t)) return 0;
  for (uint64_t i = slot_of(pc);; ++i) {
    const RuleSlot& s = t->slots[i & t->mask];
    const uint64_t k = s.pc.load(std::memory_order_acquire);
    if (k == pc) {
      const uint64_t r = s.rule.load(std::memory_order_acquire);
      return ((r >> kGenShift) & kGenMask) == gen ? r : 0;
    }
    if (k == 0) return 0;
  }
}

RuleTable* table_new(uint64_t slots) {
  auto* t = static_cast<RuleTable*>(mem_alloc(sizeof(RuleTable) + slots * sizeof(RuleSlot)));
  if (t) t->mask = slots - 1;
  return t;
}

void table_put(RuleTable* t, uint64_t pc, uint64_t rule) {
  for (uint64_t i = slot_of(pc);; ++i) {
    RuleSlot& s = t->slots[i & t->mask];
    const uint64_t k = s.pc.load(std::memory_order_relaxed);
    if (k == pc || k == 0) {
      s.rule.store(rule, std::memory_order_release);
      if (k == 0) {
        s.pc.store(pc, std::memory_order_release);
        ++t->used;
      }
      return;
    }
  }
}

// Under unwind_mutex. Returns false when there is no memory for the rule.
bool rule_store(uint64_t pc, uint64_t rule) {
  RuleTable* t = g_rules.load(std::memory_order_relaxed);
  if (!t || (t->used + 1) * 2 > t->mask + 1) {
    RuleTable* bigger = table_new(t ? (t->mask + 1) * 2 : kFirstSlots);
    if (!bigger) return false;
    for (uint64_t i = 0; t && i <= t->mask; ++i) {
      const uint64_t k = t->slots[i].pc.load(std::memory_order_relaxed);
      if (k) table_put(bigger, k, t->slots[i].rule.load(std::memory_order_relaxed));
    }
    bigger->retired = t;
    g_rules.store(bigger, std::memory_order_release);
    t = bigger;
  }
  table_put(t, pc, rule);
  return true;
}

// Modules whose CFI is open, under unwind_mutex; dropped when the generation changes.
struct Module {
  uintptr_t start, end;  // the mapping, from _dl_find_object
  uintptr_t bias;
  Elf* elf;              // null: no usable CFI (no file, build-id differs, ...)
  Dwarf_CFI* cfi;
};
constexpr int kMaxOpen = 256;
Module g_open[kMaxOpen];
int g_nopen = 0;
uint32_t g_open_gen = 0;
bool g_elf_ready = false;

// The build-id of the image mapped at fo, from its program headers in memory.
bool image_build_id(const dl_find_object& fo, const uint8_t*& id, size_t& len) {
  const auto* base = static_cast<const uint8_t*>(fo.dlfo_map_start);
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(base);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) return false;
  return loaded_build_id(reinterpret_cast<const ElfW(Phdr)*>(base + eh->e_phoff), eh->e_phnum,
                         fo.dlfo_link_map->l_addr, id, len);
}

void close_modules() {
  for (int i = 0; i < g_nopen; ++i) {
    if (g_open[i].cfi) dwarf_cfi_end(g_open[i].cfi);
    if (g_open[i].elf) elf_end(g_open[i].elf);
  }
  g_nopen = 0;
}

// Opens the CFI of the module mapped at fo (under unwind_mutex).
Module* open_module(const dl_find_object& fo) {
  if (g_nopen == kMaxOpen) close_modules();
  Module& m = g_open[g_nopen++];
  m = Module{reinterpret_cast<uintptr_t>(fo.dlfo_map_start), reinterpret_cast<uintptr_t>(fo.dlfo_map_end),
             fo.dlfo_link_map->l_addr, nullptr, nullptr};
  const char* path = fo.dlfo_link_map->l_name;
  char exe[4096];
  if (!path || !*path) {
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return &m;
    exe[n] = 0;
    path = exe;
  }
  // A relative name (LD_PRELOAD=lib/x.so) is tried from the current directory; the build-id
  // check below catches a directory change. The vdso has no file: it fails to open.
  if (!g_elf_ready) {
    elf_version(EV_CURRENT);
    g_elf_ready = true;
  }
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return &m;
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  if (elf) {
    // The file must be the one that is loaded: same build-id (a replaced file would give
    // rules for other code).
    const uint8_t* want = nullptr;
    size_t want_len = 0;
    const void* have = nullptr;
    const ssize_t have_len = dwelf_elf_gnu_build_id(elf, &have);
    const bool loaded = image_build_id(fo, want, want_len);
    const bool same = loaded ? (have_len == static_cast<ssize_t>(want_len) && std::memcmp(have, want, want_len) == 0)
                             : have_len <= 0;
    Dwarf_CFI* cfi = same ? dwarf_getcfi_elf(elf) : nullptr;
    if (cfi) {
      elf_cntl(elf, ELF_C_FDDONE);
      m.elf = elf;
      m.cfi = cfi;
    } else {
      elf_end(elf);
    }
  }
  close(fd);
  return &m;
}

// Reads "the register is saved at CFA + N" from a libdw register rule.
bool saved_at_cfa(const Dwarf_Op* ops, size_t nops, int64_t& off) {
  if (nops == 0 || ops[0].atom != DW_OP_call_frame_cfa) return false;
  if (nops == 1) {
    off = 0;
    return true;
  }
  if (nops == 2 && ops[1].atom == DW_OP_plus_uconst) {
    off = static_cast<int64_t>(ops[1].number);
    return true;
  }
  if (nops == 3 && ops[1].atom == DW_OP_consts && ops[2].atom == DW_OP_plus) {
    off = static_cast<int64_t>(ops[1].number);
    return true;
  }
  return false;
}

// The rule for code address `pc` from the module's CFI; kNone when it is not one we step.
uint64_t compute_rule(Module* m, uint64_t pc) {
  if (!m->cfi) return kNone;
  Dwarf_Frame* frame = nullptr;
  if (dwarf_cfi_addrframe(m->cfi, pc - m->bias, &frame) != 0 || !frame) return kNone;
  uint64_t rule = kNone;
  bool signal = false;
  const int ra_reg = dwarf_frame_info(frame, nullptr, nullptr, &signal);
  Dwarf_Op* ops = nullptr;
  size_t nops = 0;
  Dwarf_Op mem[3];
  if (ra_reg == 16 && !signal && dwarf_frame_cfa(frame, &ops, &nops) == 0 && nops == 1 &&
      ops[0].atom == DW_OP_bregx && (ops[0].number == 7 || ops[0].number == 6) &&
      fits(static_cast<int64_t>(ops[0].number2), 24)) {
    const bool on_rbp = ops[0].number == 6;
    const int64_t cfa = static_cast<int64_t>(ops[0].number2);
    do {
      uint64_t r = kValid | (on_rbp ? kCfaRbp : 0) | (static_cast<uint64_t>(cfa) & 0xFFFFFF);
      if (dwarf_frame_register(frame, 16, mem, &ops, &nops) != 0) break;
      if (nops == 0) {
        if (ops != mem) break;  // "same value": not a return address we can follow
        rule = r | kEnd;        // undefined: the outermost frame
        break;
      }
      int64_t off = 0;
      if (!saved_at_cfa(ops, nops, off) || !fits(off, 8)) break;
      r |= (static_cast<uint64_t>(off) & 0xFF) << 24;
      if (dwarf_frame_register(frame, 6, mem, &ops, &nops) != 0) break;
      if (nops != 0) {
        if (!saved_at_cfa(ops, nops, off) || !fits(off, 12)) break;
        r |= kRbpSaved | ((static_cast<uint64_t>(off) & 0xFFF) << 32);
      } else if (ops == mem && on_rbp) {
        break;  // rbp undefined yet the CFA depends on it
      }
      rule = r;
    } while (false);
  }
  free(frame);
  return rule;
}

// With unwind_mutex held: the rule of `pc` (generation `gen`), found and stored if new.
uint64_t resolve_locked(uint64_t pc, uint64_t gen) {
  uint64_t rule = rule_find(pc, gen);
  if (!rule) {
    if (g_open_gen != gen) {
      close_modules();
      g_open_gen = static_cast<uint32_t>(gen);
    }
    Module* m = nullptr;
    for (int i = 0; i < g_nopen; ++i) {
      if (pc >= g_open[i].start && pc < g_open[i].end) {
        m = &g_open[i];
        break;
      }
    }
    dl_find_object fo;
    if (!m && _dl_find_object(reinterpret_cast<void*>(pc), &fo) == 0 && fo.dlfo_link_map) m = open_module(fo);
    rule = (m ? compute_rule(m, pc) : kNone) | kValid | (gen << kGenShift);
    if (!rule_store(pc, rule)) g_rules_full.store(true, std::memory_order_relaxed);
  }
  return rule;
}

// The stack the resolution runs on (under unwind_mutex): libelf and libdw take several KiB of
// stack on a module's first sight, which a thread with a small stack, deep in its work, does
// not have (Lifecycle.AModulesFirstSightDeepInASmallStack). Mapped at the first resolution,
// with a guard page below; null when it could not be.
constexpr size_t kResolverStack = 256 * 1024;
struct Resolver {
  ucontext_t caller, callee;
  uint64_t pc = 0, gen = 0, rule = 0;
  // A libunwind walk (libunwind_backtrace): the context it starts from, where it writes.
  unw_context_t walk_from;
  void** walk_ips = nullptr;
  int walk_cap = 0, walk_n = -1;
  uint8_t* stack = nullptr;
  bool tried = false;
};
Resolver g_resolver;
std::atomic<uintptr_t> g_resolver_lo{0};

void resolver_entry() { g_resolver.rule = resolve_locked(g_resolver.pc, g_resolver.gen); }

// With unwind_mutex held: runs `entry` on the resolver's stack; false when there is none.
bool run_on_resolver_stack(void (*entry)()) {
  Resolver& r = g_resolver;
  if (!r.tried) {
    r.tried = true;
    // (The raw system call: not the program's mmap, which the recorder would record.)
    void* p = reinterpret_cast<void*>(syscall(SYS_mmap, nullptr, kResolverStack + 4096, PROT_READ | PROT_WRITE,
                                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (p != MAP_FAILED) {
      syscall(SYS_mprotect, p, 4096, PROT_NONE);
      r.stack = static_cast<uint8_t*>(p) + 4096;
      g_resolver_lo.store(reinterpret_cast<uintptr_t>(r.stack), std::memory_order_release);
    }
  }
  if (!r.stack || getcontext(&r.callee) != 0) return false;
  r.callee.uc_stack.ss_sp = r.stack;
  r.callee.uc_stack.ss_size = kResolverStack;
  r.callee.uc_link = &r.caller;
  makecontext(&r.callee, entry, 0);
  return swapcontext(&r.caller, &r.callee) == 0;
}

// With unwind_mutex held: resolve_locked on the resolver's stack, or here without one.
uint64_t resolve_on_own_stack(uint64_t pc, uint64_t gen) {
  Resolver& r = g_resolver;
  r.pc = pc;
  r.gen = gen;
  r.rule = 0;
  if (!run_on_resolver_stack(resolver_entry)) return resolve_locked(pc, gen);
  return r.rule;
}

// Blocks the signals a program's handler could come in by (not those a fault raises) into
// `old`: a handler that allocated would find the recorder inside libdw or libunwind, on its
// stack, its events lost.
void block_async_signals(sigset_t* old) {
  sigset_t async;
  sigfillset(&async);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS}) sigdelset(&async, sig);
  pthread_sigmask(SIG_BLOCK, &async, old);
}

void walker_entry() {
  Resolver& r = g_resolver;
  unw_cursor_t c;
  int n = 0;
  if (unw_init_local(&c, &r.walk_from) >= 0) {
    do {
      unw_word_t ip = 0;
      if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || ip == 0) break;
      r.walk_ips[n++] = reinterpret_cast<void*>(ip);
    } while (n < r.walk_cap && unw_step(&c) > 0);
  }
  r.walk_n = n;
}

// First sight of `pc` (or of its generation): find its module and rule, store it.
MT_NOINLINE uint64_t rule_resolve(uint64_t pc, uint64_t gen) {
  BusyScope busy(kOwnAllocs);  // (libelf and libdw allocate through the hooks)
  // No handler of the program's runs meanwhile (the signals that a fault raises stay open): one
  // that allocated would find the recorder inside libdw, its events lost.
  sigset_t old;
  block_async_signals(&old);
  pthread_mutex_lock(&unwind_mutex);
  const uint64_t rule = resolve_on_own_stack(pc, gen);
  pthread_mutex_unlock(&unwind_mutex);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return rule;
}

}  // namespace

MT_NOINLINE int libunwind_backtrace(void** ips, int cap, const UnwindMemo* m) {
  // libunwind's walk takes several KiB of the stack it runs on (its cursor, the DWARF it
  // parses): with less than kWalkRoom of the thread's own stack left, it runs on the resolver's.
  constexpr uintptr_t kWalkRoom = 16 * 1024;
  const auto sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  if (!m || sp < m->stack_lo || sp >= m->stack_hi || sp - m->stack_lo >= kWalkRoom) return unw_backtrace(ips, cap);
  sigset_t old;
  block_async_signals(&old);
  pthread_mutex_lock(&unwind_mutex);
  Resolver& r = g_resolver;
  r.walk_ips = ips;
  r.walk_cap = cap;
  r.walk_n = -1;
  int n = -1;
  if (unw_getcontext(&r.walk_from) == 0 && run_on_resolver_stack(walker_entry)) n = r.walk_n;
  pthread_mutex_unlock(&unwind_mutex);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return n >= 0 ? n : unw_backtrace(ips, cap);
}

bool on_resolver_stack(uintptr_t p) {
  const uintptr_t lo = g_resolver_lo.load(std::memory_order_acquire);
  return lo && p >= lo && p < lo + kResolverStack;
}

void unwind_modules_unloaded() {
  uint32_t next = (g_rule_gen.load(std::memory_order_relaxed) + 1) & kGenMask;
  if (next == 0) next = 1;
  g_rule_gen.store(next, std::memory_order_release);
}

namespace {

// Where the memo stops being what the stack holds, given that frame `r` is in the same state
// (ip, sp, bp) now as when it was stepped: stepping is a function of that state, the cached
// rule of ip and the slots it reads, so equal slots give equal frames. Returns the first frame
// (from r toward the outermost) whose caller differs, or -1 when all of them hold. The loads
// are independent of each other, unlike a step's chain.
inline int memo_first_break(const UnwindMemo* m, int r) {
  for (int q = r; q > 0; --q) {
    const UnwindFrame& f = m->f[q];
    const UnwindFrame& caller = m->f[q - 1];
    if (*slot(caller.sp, ra_off(f.rule)) != caller.ip) return q;
    if ((f.rule & kRbpSaved) && *slot(caller.sp, rbp_off(f.rule)) != caller.bp) return q;
  }
  if (m->ends_with_zero_ra && *slot(m->end_cfa, ra_off(m->f[0].rule)) != 0) return 0;
  return -1;
}

inline bool slot_at(uint64_t addr, uint64_t base, uint32_t& at) {
  const uint64_t d = addr - base;
  if (addr < base || d >= kNoSlot) return false;
  at = static_cast<uint32_t>(d);
  return true;
}

}  // namespace

MT_NOINLINE bool kept_holds(const KeptStack* __restrict e) {
  const uint64_t base = e->sp;
  const int n = e->n;
  // The loads are independent of each other: no branch on them, two frames a step. (The slots
  // are where they were: the start sp is the same.)
  uint64_t diff = 0;
  int k = 1;
  for (; k + 1 < n; k += 2) diff |= (*e->ra_slot[k] ^ e->ip[k]) | (*e->ra_slot[k + 1] ^ e->ip[k + 1]);
  if (k < n) diff |= *e->ra_slot[k] ^ e->ip[k];
  for (int j = 0; j < e->nbp; ++j) diff |= *slot(base, e->bp_at[j]) ^ e->bp_val[j];
  return !diff && (e->zero_ra_at == kNoSlot || *slot(base, e->zero_ra_at) == 0);
}

std::atomic<uint32_t> g_kept_tables{0};

void kept_table_free(KeptStack* t) {
  if (!t) return;
  syscall(SYS_munmap, t, sizeof(KeptStack) * kKeptStacks);
  MEMTIDE_CHECK(g_kept_tables.load(std::memory_order_relaxed) > 0);
  g_kept_tables.fetch_sub(1, std::memory_order_relaxed);
}

MT_NOINLINE bool kept_table_map(UnwindMemo* m) {
  m->kept_wait = 0;  // if none can be had now, try again after another round
  if (g_kept_tables.fetch_add(1, std::memory_order_relaxed) >= kMaxKeptTables) {
    g_kept_tables.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  // Zero pages: all empty. (The system call, not mmap(): that is the program's, interposed.)
  void* t = reinterpret_cast<void*>(syscall(SYS_mmap, nullptr, sizeof(KeptStack) * kKeptStacks, PROT_READ | PROT_WRITE,
                                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (t == MAP_FAILED) {
    g_kept_tables.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  m->kept = static_cast<KeptStack*>(t);
  return true;
}

namespace {

// The walk just done left the whole stack (n frames) in the memo: keep it in `e`, the slot
// of its start state, and tell stack_id to give it its id.
inline void kept_store(UnwindMemo* m, KeptStack* e, void** out, int n, uint64_t gen) {
  if (!e || m->n != n || m->gen != gen || n > kKeptFrames) return;
  e->gen = 0;
  const UnwindFrame* leaf = &m->f[n - 1];
  const uint64_t base = leaf->sp;
  // A frame's rbp matters only if a CFA is computed from it: by its own rule, or by an outer
  // frame's while no rule in between restores rbp (in code without frame pointers rbp holds
  // data, which may differ while the stack is the same). From the outermost frame in.
  const uint64_t outer = m->f[0].rule;
  bool bp_used = !(outer & kEnd) && (outer & kCfaRbp);
  int nbp = 0;
  for (int k = n - 1; k >= 1; --k) {
    const UnwindFrame& fr = m->f[n - 1 - k];
    const uint64_t rule = m->f[n - k].rule;  // of the frame it was stepped from
    e->ip[k] = fr.ip;
    uint32_t ra_at;
    if (!slot_at(fr.sp + static_cast<uint64_t>(ra_off(rule)), base, ra_at)) return;
    e->ra_slot[k] = slot(base, ra_at);
    if ((rule & kRbpSaved) && bp_used) {
      if (!slot_at(fr.sp + static_cast<uint64_t>(rbp_off(rule)), base, e->bp_at[nbp])) return;
      e->bp_val[nbp++] = fr.bp;
    }
    bp_used = (rule & kCfaRbp) || (!(rule & kRbpSaved) && bp_used);  // the rbp of frame k - 1
  }
  MEMTIDE_CHECK(nbp <= kKeptFrames);
  e->nbp = nbp;
  e->ip[0] = leaf->ip;
  e->bp_used = bp_used;
  e->zero_ra_at = kNoSlot;
  if (m->ends_with_zero_ra &&
      !slot_at(m->end_cfa + static_cast<uint64_t>(ra_off(m->f[0].rule)), base, e->zero_ra_at))
    return;
  e->sp = leaf->sp;
  e->bp = leaf->bp;
  e->n = n;
  e->has_id = false;
  e->gen = gen;
  m->kept_for_id = e;
  m->kept_for_id_known = false;
  m->kept_for_id_ips = out;
  m->kept_for_id_n = n;
}

// The walk ended on its own (outermost frame reached): it becomes the memo.
inline void memo_store(UnwindMemo* m, int n, bool zero_ra, uint64_t end_cfa, uint64_t gen) {
  if (!m) return;
  if (n > kMemoFrames || m->walk[0].sp < m->stack_lo || m->walk[n - 1].sp >= m->stack_hi) {
    m->n = 0;
    return;
  }
  for (int i = 0; i < n; ++i) m->f[n - 1 - i] = m->walk[i];
  m->n = n;
  m->ends_with_zero_ra = zero_ra;
  m->end_cfa = end_cfa;
  m->gen = gen;
}

}  // namespace

// Returns the number of return addresses stored (the first is inside this function), or -1
// when a frame is not one this unwinder steps (the caller then asks libunwind).
MT_NOINLINE int fast_backtrace(void** out, int cap, UnwindMemo* m, const UnwindStart* from, bool id_ok,
                               const KeptLookup* pre) {
  if (m) m->kept_for_id = nullptr;
  if (MT_UNLIKELY(g_rules_full.load(std::memory_order_relaxed))) return -1;
  uint64_t ip, sp, bp;
  if (from) {
    ip = from->ip;
    sp = from->sp;
    bp = from->bp;
    if (MT_UNLIKELY(ip == 0)) return 0;
  } else {
    asm volatile("leaq 0(%%rip), %0\n\tmovq %%rsp, %1\n\tmovq %%rbp, %2" : "=r"(ip), "=r"(sp), "=r"(bp));
  }
  // The first frame's address is exact when captured here; every other one is a return
  // address, looked up at the call instruction before it.
  const bool exact_leaf = from == nullptr;
  const uint64_t gen = g_rule_gen.load(std::memory_order_acquire);
  // Cursor into the memo, from its leaf toward its outermost frame (sp grows that way).
  if (m && (sp < m->stack_lo || sp >= m->stack_hi)) {  // not on the thread's own stack, or not known yet
    if (!(MT_UNLIKELY(m->stack_pending) && thread_stack_bounds(m) && sp >= m->stack_lo && sp < m->stack_hi)) m = nullptr;
  }
  // On the thread's own stack every slot read lies between sp and the stack's top: a CFA
  // beyond it means a rule does not fit this code, and libunwind takes the stack.
  const uint64_t top = m ? m->stack_hi : ~0ull;
  // A stack seen before from this very state (only for walks that start at a return address:
  // the exact leaf inside this function is looked up differently). Several stacks may start
  // from one state (one function called from different places at the same depth): each way
  // of the set holds one; a walk that finds none replaces the least recently used.
  KeptStack* keep_in = nullptr;
  KeptStack* hit = nullptr;
  if (pre && pre->done) {
    hit = m ? pre->hit : nullptr;
    keep_in = m ? pre->victim : nullptr;
  } else if (m && !exact_leaf && kept_table(m) && kept_wanted(m)) {
    hit = kept_probe(m, ip, sp, bp, cap, gen, &keep_in);
  }
  if (hit) {
    m->kept_for_id = hit;
    m->kept_for_id_known = hit->has_id;
    if (id_ok && hit->has_id) {
      m->kept_for_id_ips = nullptr;
      return kKeptStackId;
    }
    std::memcpy(out, hit->ip, static_cast<size_t>(hit->n) * sizeof(uint64_t));
    m->kept_for_id_ips = out;
    m->kept_for_id_n = hit->n;
    return hit->n;
  }
  int r = (m && m->gen == gen) ? m->n - 1 : -1;
  uint64_t pc = exact_leaf ? ip : ip - 1;
  int n = 0;
  while (n < cap) {
    out[n] = reinterpret_cast<void*>(ip);
    if (r >= 0) {
      while (r >= 0 && m->f[r].sp < sp) --r;
      if (r >= 0 && m->f[r].sp == sp && m->f[r].ip == ip && m->f[r].bp == bp) {
        const int q = memo_first_break(m, r);
        if (q < 0) {
          const int stepped = n;
          for (int k = r; k >= 0 && n < cap; --k) out[n++] = reinterpret_cast<void*>(m->f[k].ip);
          // The memo keeps its frames 0..r and gets this walk's new ones below them.
          if (r + 1 + stepped <= kMemoFrames) {
            for (int i = 0; i < stepped; ++i) m->f[r + stepped - i] = m->walk[i];
            m->n = r + 1 + stepped;
          } else {
            m->n = 0;
          }
          kept_store(m, keep_in, out, n, gen);
          return n;
        }
        // Frames r..q are unchanged: take them from the memo; q's caller is stepped for real.
        for (int k = r; k > q; --k) {
          if (n < kMemoFrames) m->walk[n] = m->f[k];
          out[n++] = reinterpret_cast<void*>(m->f[k].ip);
          if (n == cap) return n;
        }
        ip = m->f[q].ip;
        sp = m->f[q].sp;
        bp = m->f[q].bp;
        pc = (n == 0 && exact_leaf) ? ip : ip - 1;
        out[n] = reinterpret_cast<void*>(ip);
        r = q - 1;
      }
    }
    uint64_t rule = 0;
    if (m && n < kMemoFrames && m->walk[n].ip == ip && ((m->walk[n].rule >> kGenShift) & kGenMask) == gen) {
      rule = m->walk[n].rule;  // same code address at the same depth as in an earlier walk
    } else {
      rule = rule_find(pc, gen);
      if (MT_UNLIKELY(!rule)) rule = rule_resolve(pc, gen);
    }
    if (MT_UNLIKELY(rule & kNone)) return -1;
    if (rule & kEnd) {
      if (m && n < kMemoFrames) m->walk[n] = UnwindFrame{ip, sp, bp, rule};
      memo_store(m, n + 1, false, 0, gen);
      kept_store(m, keep_in, out, n + 1, gen);
      return n + 1;
    }
    const uint64_t cfa = ((rule & kCfaRbp) ? bp : sp) + static_cast<uint64_t>(cfa_off(rule));
    if (MT_UNLIKELY(cfa <= sp || cfa > top)) return -1;  // the stack only grows toward the callers
    if (m && n < kMemoFrames) m->walk[n] = UnwindFrame{ip, sp, bp, rule};
    ++n;
    const uint64_t ra = *slot(cfa, ra_off(rule));
    if (rule & kRbpSaved) bp = *slot(cfa, rbp_off(rule));
    sp = cfa;
    if (ra == 0) {
      memo_store(m, n, true, cfa, gen);
      kept_store(m, keep_in, out, n, gen);
      return n;
    }
    ip = ra;
    pc = ra - 1;  // the call instruction, not what follows it
  }
  return n;
}

}  // namespace memtide::rec
