// Recording a running process (`memtide attach`; attach.h).
//
// The injector (gdb, scripts/memtide-inject.py) dlopens libmemtide.so into the process and
// calls memtide_attach_start(config). From then on the program's calls reach the shims
// because every module's relocated entries for the interposed functions (R_X86_64_JUMP_SLOT in
// DT_JMPREL, R_X86_64_GLOB_DAT in DT_RELA) are rewritten to them; the shims forward to the C
// library as they do under LD_PRELOAD. A byte written to the control FIFO, or the FIFO's last
// writer gone (`memtide attach` ended, however), stops the recording: the entries get their
// old values back and the trace its End record.
//
// Sections:
//   [1] How libmemtide was loaded
//   [2] The configuration
//   [3] The redirected functions
//   [4] Rewriting the entries
//   [5] Start, the control thread, detach
//   [6] Threads of a previous recording, fork
#include "recorder/attach.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "recorder/backing.h"
#include "recorder/base.h"
#include "recorder/lifecycle.h"
#include "recorder/options.h"
#include "recorder/proc_maps.h"
#include "recorder/own_heap.h"
#include "recorder/process.h"
#include "recorder/recorder.h"
#include "recorder/state.h"
#include "recorder/trace_state.h"
#include "recorder/threads.h"
#include "recorder/trace_file.h"
#include "recorder/writer.h"

namespace memtide::rec {

namespace {

// ---------------------------------------------------------------------------------------
// [1] How libmemtide was loaded
// ---------------------------------------------------------------------------------------
struct LoadOrder {
  uintptr_t own = 0;
  int own_at = -1, libc_at = -1, index = 0;
};

bool ends_with_libc(const char* name) {
  const char* base = std::strrchr(name, '/');
  base = base ? base + 1 : name;
  return std::strncmp(base, "libc.so", 7) == 0;
}

int note_order(dl_phdr_info* info, size_t, void* data) {
  auto* o = static_cast<LoadOrder*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (o->own >= lo && o->own < lo + ph.p_memsz && o->own_at < 0) o->own_at = o->index;
  }
  if (info->dlpi_name && ends_with_libc(info->dlpi_name) && o->libc_at < 0) o->libc_at = o->index;
  ++o->index;
  return 0;
}

}  // namespace

bool loaded_after_libc() {
  // The loader binds a symbol to its first definition in load order: libmemtide interposes
  // only when it comes before libc (LD_PRELOAD, or the executable's own needs).
  LoadOrder o;
  o.own = reinterpret_cast<uintptr_t>(&loaded_after_libc);
  dl_iterate_phdr(note_order, &o);
  return o.own_at >= 0 && o.libc_at >= 0 && o.own_at > o.libc_at;
}

namespace {

// ---------------------------------------------------------------------------------------
// [2] The configuration: a file, read without the program's heap
// ---------------------------------------------------------------------------------------
struct Config {
  Options opts;
  char control[1024] = {};
  char status[1024] = {};
  char text[2048] = {};  // the options as the trace's ProcessInfo names them
};
Config g_config;

bool read_config(const char* path, Config& c) {
  static char buf[8192];
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = 0, r;
  while (n < static_cast<ssize_t>(sizeof buf) - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0) n += r;
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  c = Config{};
  size_t tn = 0;
  for (char* line = buf; *line;) {
    char* end = std::strchr(line, '\n');
    if (end) *end = 0;
    char* eq = std::strchr(line, '=');
    if (eq) {
      *eq = 0;
      const char* value = eq + 1;
      if (!std::strcmp(line, "control")) std::snprintf(c.control, sizeof c.control, "%s", value);
      else if (!std::strcmp(line, "status")) std::snprintf(c.status, sizeof c.status, "%s", value);
      else if (const char* problem = apply_option(c.opts, line, value))
        message("ignoring %s=%s: %s", line, value, problem);
      else {
        const int w = std::snprintf(c.text + tn, sizeof c.text - tn, "%s=%s\n", line, value);
        if (w > 0 && static_cast<size_t>(w) < sizeof c.text - tn) tn += static_cast<size_t>(w);
      }
    }
    if (!end) break;
    line = end + 1;
  }
  // Not an option: the recording began while the program ran (readers count the frees of
  // blocks allocated before it apart).
  const int w = std::snprintf(c.text + tn, sizeof c.text - tn, "attached=1\n");
  (void)w;
  return c.control[0] && c.status[0];
}

// ---------------------------------------------------------------------------------------
// [3] The redirected functions: libmemtide's own definitions (preload.cpp), and the ones the
//     loader bound the program to, which the entries must hold to be redirected
// ---------------------------------------------------------------------------------------
// The entries attach redirects: hooks.inc's rows but those it keeps.
enum HookAttach : uint8_t { kMallocFamily, kRedirect, kKeep };
struct HookName {
  const char* name;
  HookAttach attach;
};
constexpr HookName kHookRows[] = {
#define MEMTIDE_HOOK(field, symbol, attach, ret, params) {#symbol, attach},
#define MEMTIDE_SHIM(symbol, attach) {#symbol, attach},
#include "recorder/hooks.inc"
#undef MEMTIDE_SHIM
#undef MEMTIDE_HOOK
};
constexpr int count_redirected() {
  int n = 0;
  for (const HookName& h : kHookRows) n += h.attach != kKeep;
  return n;
}
constexpr int kHooks = count_redirected();
struct HookNames {
  const char* name[kHooks];
  bool malloc_family[kHooks];
};
constexpr HookNames redirected() {
  HookNames out{};
  int n = 0;
  for (const HookName& h : kHookRows)
    if (h.attach != kKeep) {
      out.name[n] = h.name;
      out.malloc_family[n++] = h.attach == kMallocFamily;
    }
  return out;
}
constexpr HookNames kRedirected = redirected();
constexpr const char* const (&kHookNames)[kHooks] = kRedirected.name;

struct Hook {
  void* shim = nullptr;   // libmemtide's
  void* bound = nullptr;  // what the program's entries hold (dlsym(RTLD_DEFAULT))
  void* def = nullptr;    // the definition: `bound`, or behind it when `bound` is a non-PIE
                          // executable's stub (the entries of the other modules hold the stub)
};
Hook g_hooks[kHooks];
uintptr_t g_own_base = 0;

// Whether `p` is defined by the C library or the C++ runtime (a definition of the program's
// own, an allocator built in, keeps its calls: redirected, its blocks would be freed by glibc).
bool system_definition(void* p) {
  Dl_info info{};
  if (!dladdr(p, &info) || !info.dli_fname) return false;
  const char* base = std::strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  return std::strncmp(base, "libc.so", 7) == 0 || std::strncmp(base, "libstdc++.so", 12) == 0 ||
         std::strncmp(base, "ld-linux", 8) == 0;
}

// Whether `p` is defined by a shared library other than a sanitizer's runtime: an allocator
// library (jemalloc, tcmalloc, mimalloc) that the program's entries already point at, to which
// the shims forward as they would to glibc. (One built into the executable keeps its own calls,
// which no entry redirects.)
bool shared_allocator(void* p) {
  Dl_info info{};
  struct link_map* map = nullptr;
  if (!dladdr1(p, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) || !map || !map->l_prev) return false;
  const char* base = info.dli_fname ? std::strrchr(info.dli_fname, '/') : nullptr;
  base = base ? base + 1 : info.dli_fname;
  if (!base || !*base) return false;
  for (const char* san : {"libasan.so", "libhwasan.so", "liblsan.so", "libmsan.so", "libtsan.so", "libubsan.so"})
    if (std::strncmp(base, san, std::strlen(san)) == 0) return false;
  return true;
}

// A canonical PLT stub in the executable: dlsym finds it, but it is no definition.
bool is_stub(void* p) {
  Dl_info info{};
  void* entry = nullptr;
  if (!dladdr1(p, &info, &entry, RTLD_DL_SYMENT) || !entry) return false;
  return static_cast<const ElfW(Sym)*>(entry)->st_shndx == SHN_UNDEF;
}

int resolve_hooks() {
  Dl_info own{};
  if (!dladdr(reinterpret_cast<void*>(&resolve_hooks), &own) || !own.dli_fname) return kAttachBadConfig;
  g_own_base = reinterpret_cast<uintptr_t>(own.dli_fbase);
  void* self = dlopen(own.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (!self || !libc) return kAttachBadConfig;
  for (int i = 0; i < kHooks; ++i) {
    Hook& h = g_hooks[i];
    h = Hook{};
    h.shim = dlsym(self, kHookNames[i]);
    void* bound = dlsym(RTLD_DEFAULT, kHookNames[i]);
    if (!h.shim || !bound) continue;
    if (is_stub(bound)) {
      h.bound = bound;
      h.def = dlsym(libc, kHookNames[i]);
    } else if (system_definition(bound) || (kRedirected.malloc_family[i] && shared_allocator(bound))) {
      h.bound = h.def = bound;
    } else if (kRedirected.malloc_family[i]) {
      message("%s is defined in the program itself: memtide attach cannot redirect the calls to it", kHookNames[i]);
      return kAttachForeignMalloc;
    }
  }
  dlclose(self);
  dlclose(libc);
  // The shims forward to what the program was bound to. (resolve_backing looks after
  // libmemtide in its own dependencies, where mimalloc's malloc comes before glibc's.)
  auto def = [](const char* name) {
    for (int i = 0; i < kHooks; ++i)
      if (!std::strcmp(kHookNames[i], name)) return g_hooks[i].def;
    return static_cast<void*>(nullptr);
  };
  auto set = [&](auto& fn, const char* name) {
    if (void* p = def(name)) fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  set(backing.malloc, "malloc");
  set(backing.calloc, "calloc");
  set(backing.realloc, "realloc");
  set(backing.reallocarray, "reallocarray");
  set(backing.posix_memalign, "posix_memalign");
  set(backing.aligned_alloc, "aligned_alloc");
  set(backing.memalign, "memalign");
  set(backing.valloc, "valloc");
  set(backing.pvalloc, "pvalloc");
  set(real.malloc, "malloc");
  set(real.free, "free");
  set(real.calloc, "calloc");
  set(real.realloc, "realloc");
  set(real.reallocarray, "reallocarray");
  set(real.posix_memalign, "posix_memalign");
  set(real.aligned_alloc, "aligned_alloc");
  set(real.memalign, "memalign");
  set(real.valloc, "valloc");
  set(real.pvalloc, "pvalloc");
  set(real.malloc_usable_size, "malloc_usable_size");
  return kAttachOk;
}

// ---------------------------------------------------------------------------------------
// [4] Rewriting the entries: each rewritten one is remembered with its old value
// ---------------------------------------------------------------------------------------
struct Patch {
  void** slot;
  void* old;
  void* shim;
};
Patch* g_patches = nullptr;  // mapped, grown by doubling
size_t g_npatches = 0, g_patch_cap = 0;
pthread_mutex_t g_patch_mutex = MT_MUTEX_INITIALIZER;
std::atomic<bool> g_attached{false};

bool remember(void** slot, void* old, void* shim) {
  for (size_t i = 0; i < g_npatches; ++i)
    if (g_patches[i].slot == slot) {  // a module unloaded, another loaded at its place
      g_patches[i] = Patch{slot, old, shim};
      return true;
    }
  if (g_npatches == g_patch_cap) {
    const size_t cap = g_patch_cap ? g_patch_cap * 2 : 1024;
    void* m = mmap(nullptr, cap * sizeof(Patch), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return false;
    if (g_patches) {
      std::memcpy(m, g_patches, g_npatches * sizeof(Patch));
      munmap(g_patches, g_patch_cap * sizeof(Patch));
    }
    g_patches = static_cast<Patch*>(m);
    g_patch_cap = cap;
  }
  g_patches[g_npatches++] = Patch{slot, old, shim};
  return true;
}

// Writes `value` into `slot`, which may lie in the read-only part (RELRO) of its module.
bool store_entry(void** slot, void* value, uintptr_t relro_lo, uintptr_t relro_hi) {
  const auto a = reinterpret_cast<uintptr_t>(slot);
  const uintptr_t page = a & ~static_cast<uintptr_t>(4095);
  const bool relro = a >= relro_lo && a < relro_hi;
  if (relro && mprotect(reinterpret_cast<void*>(page), 4096, PROT_READ | PROT_WRITE) != 0) return false;
  __atomic_store_n(slot, value, __ATOMIC_RELEASE);
  if (relro) mprotect(reinterpret_cast<void*>(page), 4096, PROT_READ);
  return true;
}

struct Module {
  uintptr_t base = 0, lo = ~uintptr_t{0}, hi = 0, relro_lo = 0, relro_hi = 0;
  const ElfW(Dyn)* dynamic = nullptr;
};

Module module_of(const dl_phdr_info* info) {
  Module m;
  m.base = info->dlpi_addr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t lo = m.base + ph.p_vaddr;
    if (ph.p_type == PT_LOAD) {
      if (lo < m.lo) m.lo = lo;
      if (lo + ph.p_memsz > m.hi) m.hi = lo + ph.p_memsz;
    } else if (ph.p_type == PT_DYNAMIC) {
      m.dynamic = reinterpret_cast<const ElfW(Dyn)*>(lo);
    } else if (ph.p_type == PT_GNU_RELRO) {
      m.relro_lo = lo & ~static_cast<uintptr_t>(4095);
      m.relro_hi = (lo + ph.p_memsz + 4095) & ~static_cast<uintptr_t>(4095);
    }
  }
  return m;
}

bool skipped_module(const dl_phdr_info* info) {
  if (info->dlpi_addr == g_own_base && g_own_base) return true;  // libmemtide itself
  const char* name = info->dlpi_name ? info->dlpi_name : "";
  const char* base = std::strrchr(name, '/');
  base = base ? base + 1 : name;
  // The loader (it calls its own malloc while it starts, and its entries are its own) and the vDSO.
  return std::strncmp(base, "ld-linux", 8) == 0 || std::strncmp(base, "ld-", 3) == 0 ||
         std::strncmp(base, "linux-vdso", 10) == 0 || std::strncmp(base, "linux-gate", 10) == 0;
}

int hook_index(const char* name) {
  for (int i = 0; i < kHooks; ++i)
    if (name[0] == kHookNames[i][0] && !std::strcmp(name, kHookNames[i])) return i;
  return -1;
}

void patch_relocations(const Module& m, const ElfW(Rela)* rel, size_t count, const ElfW(Sym)* symtab,
                       const char* strtab, size_t strsz) {
  for (size_t i = 0; i < count; ++i) {
    const auto type = ELF64_R_TYPE(rel[i].r_info);
    if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
    const size_t sym = ELF64_R_SYM(rel[i].r_info);
    if (!sym) continue;
    const uint32_t name_at = symtab[sym].st_name;
    if (strsz && name_at >= strsz) continue;
    const int h = hook_index(strtab + name_at);
    if (h < 0 || !g_hooks[h].shim || !g_hooks[h].bound) continue;
    auto** slot = reinterpret_cast<void**>(m.base + rel[i].r_offset);
    void* cur = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    const auto c = reinterpret_cast<uintptr_t>(cur);
    // Bound to the C library's definition; or, lazily bound and not yet called, pointing into
    // its own module's PLT (restored as it was, the loader binds it at its first call). A
    // module that defines the function itself (mimalloc) and calls its own keeps that.
    const auto def = reinterpret_cast<uintptr_t>(g_hooks[h].bound);
    const bool lazy = type == R_X86_64_JUMP_SLOT && c >= m.lo && c < m.hi && !(def >= m.lo && def < m.hi);
    if (cur == g_hooks[h].shim || !(cur == g_hooks[h].bound || (cur && cur == g_hooks[h].def) || lazy)) continue;
    if (!remember(slot, cur, g_hooks[h].shim)) return;
    if (!store_entry(slot, g_hooks[h].shim, m.relro_lo, m.relro_hi)) --g_npatches;
  }
}

int patch_module(dl_phdr_info* info, size_t, void*) {
  if (skipped_module(info)) return 0;
  const Module m = module_of(info);
  if (!m.dynamic) return 0;
  // glibc relocates these entries of the dynamic section in place (the vDSO's are not).
  auto addr = [&](ElfW(Addr) p) { return p < m.base ? p + m.base : p; };
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  size_t strsz = 0, jmprel_sz = 0, rela_sz = 0;
  const ElfW(Rela)* jmprel = nullptr;
  const ElfW(Rela)* rela = nullptr;
  bool plt_rela = true;
  for (const ElfW(Dyn)* d = m.dynamic; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym)*>(addr(d->d_un.d_ptr)); break;
      case DT_STRTAB: strtab = reinterpret_cast<const char*>(addr(d->d_un.d_ptr)); break;
      case DT_STRSZ: strsz = d->d_un.d_val; break;
      case DT_JMPREL: jmprel = reinterpret_cast<const ElfW(Rela)*>(addr(d->d_un.d_ptr)); break;
      case DT_PLTRELSZ: jmprel_sz = d->d_un.d_val; break;
      case DT_PLTREL: plt_rela = d->d_un.d_val == DT_RELA; break;
      case DT_RELA: rela = reinterpret_cast<const ElfW(Rela)*>(addr(d->d_un.d_ptr)); break;
      case DT_RELASZ: rela_sz = d->d_un.d_val; break;
      default: break;
    }
  }
  if (!symtab || !strtab) return 0;
  if (jmprel && plt_rela) patch_relocations(m, jmprel, jmprel_sz / sizeof(ElfW(Rela)), symtab, strtab, strsz);
  if (rela) patch_relocations(m, rela, rela_sz / sizeof(ElfW(Rela)), symtab, strtab, strsz);
  return 0;
}

// The definitions' symbols, redirected: a module loaded while attached has its entries bound by
// the loader (and its constructors run) before dlopen returns and its entries can be rewritten,
// so every lookup of a redirected name made meanwhile must find the shim. The loader computes a
// definition's address from its module's load address and the symbol's st_value in the dynamic
// symbol table: each defining module's entry gets the shim's offset from its module, and its
// own value back at the detach. (Entries bound this way hold the shim after the detach, which
// forwards as the entries it restores did.)
struct SymbolPatch {
  ElfW(Sym)* sym;
  ElfW(Addr) old;
};
SymbolPatch g_symbols[kHooks];
int g_nsymbols = 0;

// Writes st_value of `sym`, whose page is read-only (and executable where it is so).
bool store_symbol(ElfW(Sym)* sym, ElfW(Addr) value) {
  const auto a = reinterpret_cast<uintptr_t>(&sym->st_value);
  const uintptr_t page = a & ~static_cast<uintptr_t>(4095);
  if ((a + sizeof(ElfW(Addr)) - 1) / 4096 != a / 4096) return false;  // (never across pages)
  int prot = -1;
  read_mappings([&](const Mapping& m) {
    if (a < m.lo || a >= m.hi) return true;
    prot = (m.readable ? PROT_READ : 0) | (m.writable ? PROT_WRITE : 0) | (m.executable ? PROT_EXEC : 0);
    return false;
  });
  if (prot < 0) return false;
  if (!(prot & PROT_WRITE) && mprotect(reinterpret_cast<void*>(page), 4096, prot | PROT_WRITE) != 0) return false;
  __atomic_store_n(&sym->st_value, value, __ATOMIC_RELEASE);
  if (!(prot & PROT_WRITE)) mprotect(reinterpret_cast<void*>(page), 4096, prot);
  return true;
}

void redirect_symbols() {
  g_nsymbols = 0;
  for (int i = 0; i < kHooks; ++i) {
    const Hook& h = g_hooks[i];
    if (!h.shim || !h.def) continue;
    Dl_info info{};
    ElfW(Sym)* sym = nullptr;
    struct link_map* map = nullptr;
    if (!dladdr1(h.def, &info, reinterpret_cast<void**>(&sym), RTLD_DL_SYMENT) || !sym ||
        !dladdr1(h.def, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) || !map)
      continue;
    // (Only the definition itself: not an alias dladdr found at its address under another name.)
    if (!info.dli_sname || std::strcmp(info.dli_sname, kHookNames[i]) != 0) continue;
    if (map->l_addr + sym->st_value != reinterpret_cast<ElfW(Addr)>(h.def)) continue;
    const ElfW(Addr) old = sym->st_value;
    if (store_symbol(sym, reinterpret_cast<ElfW(Addr)>(h.shim) - map->l_addr)) g_symbols[g_nsymbols++] = {sym, old};
  }
}

void restore_symbols() {
  for (int i = 0; i < g_nsymbols; ++i) store_symbol(g_symbols[i].sym, g_symbols[i].old);
  g_nsymbols = 0;
}

// The loaded modules' address ranges and RELRO parts, to restore only entries still mapped.
struct Loaded {
  Module m[1024];
  int n = 0;
};

int note_loaded(dl_phdr_info* info, size_t, void* data) {
  auto* l = static_cast<Loaded*>(data);
  if (l->n < 1024 && !skipped_module(info)) l->m[l->n++] = module_of(info);
  return 0;
}

void restore_all() {
  static Loaded loaded;  // (under g_patch_mutex)
  loaded.n = 0;
  dl_iterate_phdr(note_loaded, &loaded);
  for (size_t i = 0; i < g_npatches; ++i) {
    const Patch& p = g_patches[i];
    const auto a = reinterpret_cast<uintptr_t>(p.slot);
    for (int k = 0; k < loaded.n; ++k) {
      const Module& m = loaded.m[k];
      if (a < m.lo || a >= m.hi) continue;
      if (__atomic_load_n(p.slot, __ATOMIC_ACQUIRE) == p.shim) store_entry(p.slot, p.old, m.relro_lo, m.relro_hi);
      break;
    }
  }
  g_npatches = 0;
}

// ---------------------------------------------------------------------------------------
// [5] Start, the control thread, detach
// ---------------------------------------------------------------------------------------
pthread_t g_control{};
bool g_handlers_installed = false;

// `DIR/NAME` holds `text` (written under a temporary name, then renamed: whoever waits for it
// reads it whole).
void write_status(const char* name, const char* text) {
  char path[1200], tmp[1300];
  std::snprintf(path, sizeof path, "%s/%s", g_config.status, name);
  std::snprintf(tmp, sizeof tmp, "%s.tmp", path);
  const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!write(fd, text, std::strlen(text));
  close(fd);
  rename(tmp, path);
}

void detach() {
  pthread_mutex_lock(&g_patch_mutex);
  restore_symbols();
  restore_all();
  g_attached.store(false);
  pthread_mutex_unlock(&g_patch_mutex);
  char path[sizeof recording.path + 2];
  std::snprintf(path, sizeof path, "%s\n", recording.path);
  finish_detached();
  write_status("done", path);
}

void* control_main(void* fifo_fd) {
  ++tls_busy;  // the recorder's own thread: never recorded
  tls_recorder_thread = true;
  note_recorder_thread();
  prctl(PR_SET_NAME, "memtide-attach");
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(fifo_fd));
  char c;
  for (;;) {
    const ssize_t n = read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    break;  // a byte, or the end: `memtide attach` asks or has gone
  }
  close(fd);
  detach();
  return nullptr;
}

}  // namespace

int attach_start(const char* config) {
  BusyScope busy(kOwnAllocs);  // (dlopen, dlsym, the recorder's start, a thread)
  const int state = recording.state.load();
  if (g_attached.load() || state == kActive || state == kStarting || !loaded_after_libc()) return kAttachAlreadyRecording;
  if (!config || !read_config(config, g_config)) return kAttachBadConfig;
  resolve_backing();
  if (const int r = resolve_hooks()) return r;
  // The control FIFO, opened before anything changes: `memtide attach` holds its other end.
  const int fifo = open(g_config.control, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fifo < 0) return kAttachBadConfig;
  fcntl(fifo, F_SETFL, 0);
  if (!start_attached(g_config.opts)) {
    close(fifo);
    return kAttachNoTrace;
  }
  if (!g_handlers_installed) {
    g_handlers_installed = true;
    install_exit_status_handler();  // (at_quick_exit's was installed by the constructor)
  }
  pthread_mutex_lock(&g_patch_mutex);
  g_attached.store(true);
  dl_iterate_phdr(patch_module, nullptr);
  redirect_symbols();
  pthread_mutex_unlock(&g_patch_mutex);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  // The control thread takes none of the program's signals (a process-directed one would stop
  // the read; the program's handlers expect the program's threads).
  const int r = spawn_recorder_thread(&g_control, &attr, control_main, reinterpret_cast<void*>(static_cast<intptr_t>(fifo)),
                                      /*keep_single=*/false);  // (it patches modules: the loader's locks)
  pthread_attr_destroy(&attr);
  if (r != 0) {
    close(fifo);
    detach();
    return kAttachNoThread;
  }
  char path[sizeof recording.path + 2];
  std::snprintf(path, sizeof path, "%s\n", recording.path);
  write_status("started", path);
  return kAttachOk;
}

bool attached() { return g_attached.load(std::memory_order_relaxed); }

bool attach_message(const char* line, size_t n) {
  if (!g_attached.load(std::memory_order_relaxed) || !g_config.status[0]) return false;
  char path[1200];
  std::snprintf(path, sizeof path, "%s/messages", g_config.status);
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return true;  // (never the program's stderr)
  (void)!write(fd, line, n);
  close(fd);
  return true;
}

const char* attach_options_text() { return g_attached.load() || g_config.text[0] ? g_config.text : nullptr; }

void attach_modules_changed() {
  pthread_mutex_lock(&g_patch_mutex);
  if (g_attached.load()) dl_iterate_phdr(patch_module, nullptr);
  pthread_mutex_unlock(&g_patch_mutex);
}

// ---------------------------------------------------------------------------------------
// [6] Threads of a previous recording, fork
// ---------------------------------------------------------------------------------------
void attach_restart_streams() {
  // No thread records now (its entries are restored); each state starts again as a thread's
  // first event would make it: a new stream with its start and name, no stack ids of the
  // previous trace (the table of stacks starts again).
  pthread_mutex_lock(&recording.registry_mutex);
  Stream* prev = nullptr;
  for (Stream* s = recording.registry; s;) {
    Stream* next = s->reg_next;
    // The stream is a ThreadState's first member.
    auto* ts = reinterpret_cast<ThreadState*>(s);
    if (syscall(SYS_tgkill, getpid(), ts->tid, 0) != 0) {  // the thread has ended since: dropped
      if (prev) prev->reg_next = next;
      else recording.registry = next;
      if (next) next->reg_prev = prev;
      s = next;
      continue;
    }
    const uint32_t index = s->index;
    stream_init(s, index, g_trace.start_time);
    s->reg_next = next;
    s->reg_prev = prev;
    std::memset(ts->cache, 0, sizeof ts->cache);
    ts->path.n = 0;
    ts->memo.gen = 0;
    ts->memo.n = 0;
    ts->memo.kept_for_id = nullptr;
    if (ts->memo.kept) {
      kept_table_free(ts->memo.kept);
      ts->memo.kept = nullptr;
    }
    append_thread_start(s, ts->tid);
    prev = s;
    s = next;
  }
  pthread_mutex_unlock(&recording.registry_mutex);
}

void attach_fork_child() {
  // The child is not recorded: its entries get their old values back, the parent's file and
  // writer are left to the parent.
  mutex_init_in_child(&g_patch_mutex);
  restore_all();
  g_attached.store(false);
  recording.state.store(kStopped);
  begin_trace(TraceOrigin::kForkChild);  // (a trace with no file: the child is not recorded)
}

}  // namespace memtide::rec
