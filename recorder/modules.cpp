// Loaded modules: the set present at start and each change after dlopen / dlclose, with path,
// build-id, load bias and PT_LOAD segments, so that stacks can be symbolised after the
// process is gone.
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <cstring>
#include <string_view>

#include "formats/encoder.h"
#include "formats/record_builders.h"
#include "recorder/clock.h"
#include "recorder/modules.h"
#include "recorder/state.h"
#include "recorder/stream.h"
#include "recorder/trace_state.h"
#include "recorder/unwind.h"

namespace memtide::rec {

pthread_mutex_t modules_mutex = MT_MUTEX_INITIALIZER;

// The GNU build-id note among a loaded module's PT_NOTE segments.
bool loaded_build_id(const ElfW(Phdr)* phdr, int phnum, uintptr_t bias, const uint8_t*& id, size_t& len) {
  for (int i = 0; i < phnum; ++i) {
    const ElfW(Phdr)& ph = phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const auto* p = reinterpret_cast<const uint8_t*>(bias + ph.p_vaddr);
    const uint8_t* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) nh;
      std::memcpy(&nh, p, sizeof nh);
      const uint8_t* name = p + sizeof nh;
      const uint8_t* desc = name + ((nh.n_namesz + 3) & ~3u);
      const uint8_t* next = desc + ((nh.n_descsz + 3) & ~3u);
      if (next > end) break;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        id = desc;
        len = nh.n_descsz;
        return true;
      }
      p = next;
    }
  }
  return false;
}

namespace {

using Known = ModuleTable::Known;
char g_exe[4096];

uint64_t hash_str(const char* s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 1099511628211ull;
  return h;
}

void find_build_id(const dl_phdr_info* info, const uint8_t*& id, size_t& len) {
  id = nullptr;
  len = 0;
  loaded_build_id(info->dlpi_phdr, info->dlpi_phnum, info->dlpi_addr, id, len);
}

void emit_load(const dl_phdr_info* info, const char* path, uint32_t id) {
  static uint8_t buf[8192 + 256 * 3 * wire::kMaxVarint];  // under modules_mutex
  static fmt::ModuleLoad rec;                            // (kMaxSegments of them: not on the stack)
  const uint8_t* build_id;
  size_t build_id_len;
  find_build_id(info, build_id, build_id_len);
  rec.module_id = id;
  rec.load_bias = info->dlpi_addr;
  rec.path = std::string_view(path, std::strlen(path));
  rec.build_id = std::string_view(reinterpret_cast<const char*>(build_id), build_id_len);
  rec.nseg = 0;
  for (int i = 0; i < info->dlpi_phnum && rec.nseg < fmt::kMaxSegments; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uint8_t flags = static_cast<uint8_t>(((ph.p_flags & PF_R) ? fmt::kSegRead : 0) |
                                               ((ph.p_flags & PF_W) ? fmt::kSegWrite : 0) |
                                               ((ph.p_flags & PF_X) ? fmt::kSegExec : 0));
    rec.segments[rec.nseg++] = fmt::Segment{ph.p_vaddr, ph.p_memsz, flags};
  }
  Stream* s = &recording.shared;
  pthread_mutex_lock(&recording.shared_mutex);
  rec.time = stream_time(s, now_ns());
  const size_t n = fmt::encode_module_load(buf, sizeof buf, s->last_time, rec);
  if (n && append_record(s, buf, n)) s->last_time = rec.time;
  pthread_mutex_unlock(&recording.shared_mutex);
}

void emit_unload(uint32_t id) {
  uint8_t buf[32];
  Stream* s = &recording.shared;
  pthread_mutex_lock(&recording.shared_mutex);
  const uint64_t t = stream_time(s, now_ns());
  const size_t n = fmt::encode_module_unload(buf, sizeof buf, s->last_time, fmt::ModuleUnload{t, id});
  if (n && append_record(s, buf, n)) s->last_time = t;
  pthread_mutex_unlock(&recording.shared_mutex);
}

int scan_one(dl_phdr_info* info, size_t, void*) {
  const char* name = info->dlpi_name;
  if (!name || !*name) {
    // The main program (empty name); the vdso has a name but no file.
    if (info->dlpi_phnum == 0) return 0;
    name = g_exe;
  }
  const uint64_t h = hash_str(name);
  for (int i = 0; i < g_trace.modules.nknown; ++i) {
    if (g_trace.modules.known[i].bias == info->dlpi_addr && g_trace.modules.known[i].name_hash == h) {
      g_trace.modules.known[i].seen = true;
      return 0;
    }
  }
  if (g_trace.modules.nknown == kMaxModules) return 0;
  Known& k = g_trace.modules.known[g_trace.modules.nknown++];
  k = Known{info->dlpi_addr, h, g_trace.modules.next_id++, true};
  emit_load(info, name, k.id);
  return 0;
}

}  // namespace

void modules_scan() {
  pthread_mutex_lock(&modules_mutex);
  if (!g_exe[0]) {
    const ssize_t n = readlink("/proc/self/exe", g_exe, sizeof g_exe - 1);
    g_exe[n > 0 ? n : 0] = 0;
  }
  for (int i = 0; i < g_trace.modules.nknown; ++i) g_trace.modules.known[i].seen = false;
  dl_iterate_phdr(scan_one, nullptr);
  for (int i = 0; i < g_trace.modules.nknown;) {
    if (g_trace.modules.known[i].seen) {
      ++i;
      continue;
    }
    emit_unload(g_trace.modules.known[i].id);
    unwind_modules_unloaded();
    g_trace.modules.known[i] = g_trace.modules.known[--g_trace.modules.nknown];
  }
  pthread_mutex_unlock(&modules_mutex);
}

void find_own_range() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&find_own_range), &info) || !info.dli_fbase) return;
  struct Ctx {
    uintptr_t base, lo, hi;
  } ctx{reinterpret_cast<uintptr_t>(info.dli_fbase), 0, 0};
  dl_iterate_phdr(
      [](dl_phdr_info* di, size_t, void* p) {
        auto* c = static_cast<Ctx*>(p);
        if (di->dlpi_addr != c->base) return 0;
        for (int i = 0; i < di->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = di->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
          c->lo = di->dlpi_addr + ph.p_vaddr;
          c->hi = c->lo + ph.p_memsz;
          return 1;
        }
        return 0;
      },
      &ctx);
  if (ctx.hi) {
    recording.own_lo = ctx.lo;
    recording.own_hi = ctx.hi;
    recording.own_range_known = true;
  }
}

}  // namespace memtide::rec
