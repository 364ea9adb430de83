// Sections: [1] names and formatting  [2] module sessions (libdw)  [3] DWARF lookup
//           [4] Symbolizer  [5] SymbolPreload
#include "analysis/symbols.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

#include "analysis/function_index.h"

namespace memtide::analysis {

// ---------------------------------------------------------------------------------------
// [1] Names and formatting
// ---------------------------------------------------------------------------------------

std::string demangle(std::string_view name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return std::string(name);
  const std::string z(name);
  int status = 0;
  char* d = abi::__cxa_demangle(z.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !d) return z;
  std::string out(d);
  std::free(d);
  return out;
}

std::string_view basename_of(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

namespace {
std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}
}  // namespace

std::string frame_label(const Frame& f) {
  if (!f.function.empty()) return std::string(f.function);
  if (!f.module.empty()) return std::string(basename_of(f.module)) + "+" + hex(f.offset);
  return hex(f.offset);
}

std::string format_frame(const Frame& f, bool short_file) {
  std::string s = frame_label(f);
  if (!f.file.empty()) {
    s += " (";
    s += short_file ? basename_of(f.file) : f.file;
    if (f.line) s += ":" + std::to_string(f.line);
    s += ")";
  }
  if (!f.function.empty() && !f.module.empty()) {
    s += " [";
    s += basename_of(f.module);
    s += "]";
  }
  if (f.inlined) s += " (inlined)";
  return s;
}

const char* module_state_name(ModuleState s) {
  switch (s) {
    case ModuleState::Ok: return "ok";
    case ModuleState::NoDebugInfo: return "no debug info";
    case ModuleState::Embedded: return "embedded symbols";
    case ModuleState::Missing: return "missing";
    case ModuleState::Mismatch: return "build-id mismatch";
    case ModuleState::NoFile: return "no file";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------
// [2] Module sessions
// ---------------------------------------------------------------------------------------


// The scopes (subprogram, lexical blocks, inlined subroutines) containing an address, as
// dwarf_getscopes + dwarf_getscopes_die give them, without walking the whole compilation unit
// at every call: the unit's concrete subprograms and their address ranges are listed once, and
// an address descends from its subprogram only. dwarf_getscopes walks every DIE of the unit
// each time, which is what naming the thousand addresses of a python3 trace (libpython's
// large units) spent most of its 0.7 s on.
class ScopeIndex {
 public:
  // Innermost scope first, up to the subprogram. False when no listed subprogram holds `pc`
  // (the caller then asks dwarf_getscopes).
  bool find(Dwarf_Die* cudie, Dwarf_Addr pc, std::vector<Dwarf_Die>& out) {
    out.clear();
    const std::vector<Range>& unit = this->unit(cudie);
    auto it = std::upper_bound(unit.begin(), unit.end(), pc, [](Dwarf_Addr a, const Range& r) { return a < r.lo; });
    if (it == unit.begin() || pc >= std::prev(it)->hi) return false;
    --it;
    // Aliases (assembly entry points) share a range: the first in the unit, as dwarf_getscopes.
    while (it != unit.begin() && std::prev(it)->lo == it->lo && pc < std::prev(it)->hi) --it;
    Dwarf_Die cur = it->die;
    out.push_back(cur);
    for (int depth = 0; depth < 256; ++depth) {  // a cycle in a hostile file stops here
      Dwarf_Die child;
      bool deeper = false;
      if (dwarf_child(&cur, &child) == 0) {
        do {
          if (dwarf_haspc(&child, pc) == 1) {
            deeper = true;
            break;
          }
        } while (dwarf_siblingof(&child, &child) == 0);
      }
      if (!deeper) break;
      cur = child;
      out.push_back(cur);
    }
    std::reverse(out.begin(), out.end());
    return true;
  }

 private:
  struct Range {
    Dwarf_Addr lo, hi;
    Dwarf_Die die;
  };

  const std::vector<Range>& unit(Dwarf_Die* cudie) {
    auto [it, fresh] = units_.try_emplace(dwarf_dieoffset(cudie));
    if (fresh) {
      collect(cudie, it->second, 0);
      std::stable_sort(it->second.begin(), it->second.end(), [](const Range& a, const Range& b) { return a.lo < b.lo; });
    }
    return it->second;
  }

  // Concrete subprograms, also inside namespaces and classes (in-class member definitions).
  static void collect(Dwarf_Die* parent, std::vector<Range>& out, int depth) {
    Dwarf_Die child;
    if (depth > 32 || dwarf_child(parent, &child) != 0) return;
    do {
      switch (dwarf_tag(&child)) {
        case DW_TAG_subprogram: {
          Dwarf_Addr base = 0, lo = 0, hi = 0;
          for (ptrdiff_t off = 0; (off = dwarf_ranges(&child, off, &base, &lo, &hi)) > 0;)
            if (lo < hi) out.push_back({lo, hi, child});
          break;
        }
        case DW_TAG_namespace:
        case DW_TAG_class_type:
        case DW_TAG_structure_type:
        case DW_TAG_union_type:
        case DW_TAG_module:
          collect(&child, out, depth + 1);
          break;
        default:
          break;
      }
    } while (dwarf_siblingof(&child, &child) == 0);
  }

  std::unordered_map<Dwarf_Off, std::vector<Range>> units_;  // by the unit DIE's offset
};

struct detail::ModuleSession {
  ModuleState state = ModuleState::Missing;
  std::string detail;
  Dwfl* dwfl = nullptr;
  Dwfl_Module* mod = nullptr;
  FunctionIndex functions;
  ScopeIndex scopes;
  bool used = false;         // asked for at least once
  bool fell_back = false;    // some address could not be named from this module
  std::unordered_map<uint64_t, std::vector<Frame>> by_offset;
  ~ModuleSession() {
    if (dwfl) dwfl_end(dwfl);
  }
};

std::string hex_bytes(std::string_view b) {
  std::string s;
  char buf[4];
  for (unsigned char c : b) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    s += buf;
  }
  return s;
}

namespace {

const Dwfl_Callbacks kCallbacks = {
    nullptr,  // find_elf: not used, the file is opened by us
    dwfl_standard_find_debuginfo,
    dwfl_offline_section_address,
    nullptr,
};

// ---------------------------------------------------------------------------------------
// [3] DWARF lookup
// ---------------------------------------------------------------------------------------

const char* die_name(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  const char* n = nullptr;
  if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) || dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr))
    n = dwarf_formstring(&attr);
  if (!n && dwarf_attr_integrate(die, DW_AT_name, &attr)) n = dwarf_formstring(&attr);
  return n;
}

struct RawFrame {
  std::string function, file;
  uint32_t line = 0;
};

// Innermost first.
void dwarf_frames(Dwfl_Module* mod, const FunctionIndex& functions, ScopeIndex* scope_index, Dwarf_Addr addr,
                  bool inlines, std::vector<RawFrame>& out) {
  out.clear();
  const char* file = nullptr;
  int line = 0;
  Dwarf_Addr line_addr = 0;
  if (Dwfl_Line* l = dwfl_module_getsrc(mod, addr)) file = dwfl_lineinfo(l, &line_addr, &line, nullptr, nullptr, nullptr);
  const char* symname = functions.find(addr);
  if (!symname && functions.label_may_name(addr)) {
    GElf_Off symoff = 0;
    GElf_Sym sym;
    symname = dwfl_module_addrinfo(mod, addr, &symoff, &sym, nullptr, nullptr, nullptr);
  }

  Dwarf_Addr bias = 0;
  Dwarf_Die* cudie = dwfl_module_addrdie(mod, addr, &bias);
  if (cudie) {
    // dwarf_getscopes follows an inlined subroutine into its abstract definition; the chain of
    // concrete callers comes from the innermost scope's physical parents (dwarf_getscopes_die),
    // as eu-addr2line -i does.
    // With a ScopeIndex, its chain (from the innermost scope to the subprogram) stands in.
    Dwarf_Die* scopes = nullptr;
    int n = 0;
    std::vector<Dwarf_Die> chain;
    if (scope_index && scope_index->find(cudie, addr - bias, chain)) {
      scopes = static_cast<Dwarf_Die*>(std::malloc(chain.size() * sizeof(Dwarf_Die)));
      if (scopes) {
        std::copy(chain.begin(), chain.end(), scopes);
        n = static_cast<int>(chain.size());
      }
    } else {
      n = dwarf_getscopes(cudie, addr - bias, &scopes);
      if (n > 0) {
        Dwarf_Die innermost = scopes[0];
        std::free(scopes);
        scopes = nullptr;
        n = dwarf_getscopes_die(&innermost, &scopes);
      }
    }
    Dwarf_Files* files = nullptr;
    size_t nfiles = 0;
    bool have_files = false;
    std::string cur_file = file ? file : "";
    uint32_t cur_line = line > 0 ? static_cast<uint32_t>(line) : 0;
    for (int i = 0; i < n; ++i) {
      Dwarf_Die* s = &scopes[i];
      const int tag = dwarf_tag(s);
      if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram) continue;
      const char* nm = die_name(s);
      if (tag == DW_TAG_subprogram && symname && (!nm || std::strchr(nm, ':') == nullptr)) {
        // The symbol table has the mangled (qualified) name where DWARF may have a bare one.
        const std::string d = demangle(symname);
        if (!nm || d.find(nm) != std::string::npos) nm = symname;
      }
      out.push_back({nm ? demangle(nm) : std::string(), cur_file, cur_line});
      if (tag == DW_TAG_subprogram || !inlines) break;
      // The caller's position is the inlined call site.
      Dwarf_Attribute attr;
      Dwarf_Word v = 0;
      cur_file.clear();
      cur_line = 0;
      if (dwarf_attr(s, DW_AT_call_file, &attr) && dwarf_formudata(&attr, &v) == 0) {
        if (!have_files) have_files = dwarf_getsrcfiles(cudie, &files, &nfiles) == 0;
        if (have_files && v < nfiles)
          if (const char* f = dwarf_filesrc(files, v, nullptr, nullptr)) cur_file = f;
      }
      if (dwarf_attr(s, DW_AT_call_line, &attr) && dwarf_formudata(&attr, &v) == 0) cur_line = static_cast<uint32_t>(v);
    }
    std::free(scopes);
  }
  if (out.empty() && file) {
    // No function of the debug information covers the address (start-up code from crt1.o,
    // say): the line found is the nearest one before it, which may belong to other code. It is
    // kept only when it lies within the address's own symbol; no file:line is better than
    // another function's (`_start (stl_vector.h:733)`).
    GElf_Off symoff = 0;
    GElf_Sym sym;
    if (!dwfl_module_addrinfo(mod, addr, &symoff, &sym, nullptr, nullptr, nullptr) || line_addr < addr - symoff) {
      file = nullptr;
      line = 0;
    }
  }
  if (out.empty() && (symname || file))
    out.push_back({symname ? demangle(symname) : std::string(), file ? file : "", line > 0 ? static_cast<uint32_t>(line) : 0});
}

// Opens the module's file and its debug information; the session says what it found.
std::unique_ptr<detail::ModuleSession> open_session(const ModuleInfo& m) {
  auto slot = std::make_unique<detail::ModuleSession>();
  detail::ModuleSession& s = *slot;
  if (m.path.empty() || m.path[0] != '/') {
    s.state = ModuleState::NoFile;
    s.detail = "not a file";
    return slot;
  }
  const int fd = ::open(m.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    s.state = ModuleState::Missing;
    s.detail = std::string("cannot open: ") + std::strerror(errno);
    return slot;
  }
  s.dwfl = dwfl_begin(&kCallbacks);
  if (!s.dwfl) {
    ::close(fd);
    s.detail = dwfl_errmsg(-1);
    return slot;
  }
  // Placed at 0: lookups use module offsets, valid for any load address (ET_EXEC ignores it
  // and has a load bias of 0 anyway).
  s.mod = dwfl_report_elf(s.dwfl, std::string(basename_of(m.path)).c_str(), m.path.c_str(), fd, 0, false);
  dwfl_report_end(s.dwfl, nullptr, nullptr);
  if (!s.mod) {
    s.state = ModuleState::Missing;
    s.detail = std::string("not a readable ELF file: ") + dwfl_errmsg(-1);
    return slot;
  }
  GElf_Addr bias = 0;
  dwfl_module_getelf(s.mod, &bias);
  const unsigned char* bits = nullptr;
  GElf_Addr vaddr = 0;
  const int n = dwfl_module_build_id(s.mod, &bits, &vaddr);
  const std::string_view disk = n > 0 ? std::string_view(reinterpret_cast<const char*>(bits), static_cast<size_t>(n)) : "";
  if (!m.build_id.empty() && disk != m.build_id) {
    s.state = ModuleState::Mismatch;
    s.detail = "the file changed since recording (build-id " + (disk.empty() ? std::string("none") : hex_bytes(disk)) +
               " on disk, " + hex_bytes(m.build_id) + " recorded)";
    return slot;
  }
  Dwarf_Addr dbias = 0;
  s.state = dwfl_module_getdwarf(s.mod, &dbias) ? ModuleState::Ok : ModuleState::NoDebugInfo;
  s.functions.build(s.mod);
  return slot;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// [4] Symbolizer
// ---------------------------------------------------------------------------------------

Symbolizer::Symbolizer(const Model& model, Options options, SymbolPreload* preload)
    : model_(model), opt_(options), preload_(preload) {}
Symbolizer::~Symbolizer() = default;

std::string_view Symbolizer::intern(std::string_view s) {
  if (s.empty()) return {};
  return *strings_.emplace(s).first;
}

Symbolizer::ModuleSession& Symbolizer::session(const ModuleInfo& m) {
  const uint64_t key = static_cast<uint64_t>(&m - model_.modules.data());
  auto& slot = sessions_[key];
  if (slot) return *slot;
  if (preload_) slot = preload_->take(m);
  if (!slot) slot = open_session(m);
  return *slot;
}

ModuleState Symbolizer::file_state(const ModuleInfo& m) {
  ModuleSession& s = session(m);
  s.used = true;
  return s.state;
}

std::vector<Frame> Symbolizer::resolve_in_file(const ModuleInfo& m, uint64_t offset) {
  ModuleSession& s = session(m);
  s.used = true;
  if (s.state != ModuleState::Ok && s.state != ModuleState::NoDebugInfo) return {};
  auto it = s.by_offset.find(offset);
  if (it != s.by_offset.end()) return it->second;
  std::vector<RawFrame> raw;
  dwarf_frames(s.mod, s.functions, opt_.scope_index ? &s.scopes : nullptr, offset ? offset - 1 : 0, opt_.inlines, raw);
  std::vector<Frame> out;
  for (auto r = raw.rbegin(); r != raw.rend(); ++r)
    out.push_back({intern(r->function), intern(r->file), r->line, intern(m.path), offset, r != raw.rbegin()});
  s.by_offset.emplace(offset, out);
  return out;
}

void Symbolizer::resolve_uncached(uint64_t ip, std::vector<Frame>& out) {
  out.clear();
  const ModuleInfo* m = model_.module_at(ip);
  if (!m) {
    out.push_back({{}, {}, 0, {}, ip, false});
    return;
  }
  const uint64_t off = ip - m->load_bias;
  const std::string_view path = intern(m->path);
  if (opt_.use_embedded) {
    auto e = model_.embedded.find(m->id.value);
    if (e != model_.embedded.end()) {
      const std::vector<EmbeddedSymbol>& v = e->second;
      auto lo = std::lower_bound(v.begin(), v.end(), off, [](const EmbeddedSymbol& a, uint64_t o) { return a.offset < o; });
      for (auto it = lo; it != v.end() && it->offset == off; ++it) {
        if (!opt_.inlines && it->inline_depth > 0) break;
        out.push_back({intern(it->function), intern(it->file), it->line, path, off, it->inline_depth > 0});
      }
      if (!out.empty()) return;
    }
  }
  if (opt_.use_files) {
    out = resolve_in_file(*m, off);
    if (!out.empty()) return;
    session(*m).fell_back = true;
  }
  out.push_back({{}, {}, 0, path, off, false});
}

std::span<const Frame> Symbolizer::resolve(uint64_t ip) {
  auto it = cache_.find(ip);
  if (it == cache_.end()) {
    std::vector<Frame> tmp;
    resolve_uncached(ip, tmp);
    const auto begin = static_cast<uint32_t>(frames_.size());
    frames_.insert(frames_.end(), tmp.begin(), tmp.end());
    it = cache_.emplace(ip, std::make_pair(begin, static_cast<uint32_t>(frames_.size()))).first;
  }
  return {frames_.data() + it->second.first, frames_.data() + it->second.second};
}

void Symbolizer::stack(StackId id, std::vector<Frame>& out) {
  out.clear();
  std::vector<uint64_t> ips;
  if (!model_.stack_table.frames(id, ips)) out.push_back({"<unknown>", {}, 0, {}, 0, false});
  for (uint64_t ip : ips)
    for (const Frame& f : resolve(ip)) out.push_back(f);
}

std::vector<ModuleProblem> Symbolizer::problems() const {
  std::vector<ModuleProblem> out;
  for (const auto& [key, s] : sessions_) {
    if (!s->used) continue;
    if (s->state == ModuleState::Missing || s->state == ModuleState::Mismatch)
      out.push_back({model_.modules[key].path, s->state, s->detail});
  }
  std::sort(out.begin(), out.end(), [](const ModuleProblem& a, const ModuleProblem& b) { return a.path < b.path; });
  return out;
}

// ---------------------------------------------------------------------------------------
// [5] SymbolPreload
// ---------------------------------------------------------------------------------------

struct SymbolPreload::Impl {
  using Key = std::pair<std::string, std::string>;  // path, build-id
  std::mutex mu;
  std::condition_variable cv;
  std::deque<ModuleInfo> queue;
  std::map<Key, std::unique_ptr<detail::ModuleSession>> opened;  // by the preload thread
  std::set<Key> queued;  // added and not yet taken
  std::size_t done = 0;
  bool stop = false;
  std::thread thread;

  void run() {
    std::unique_lock<std::mutex> l(mu);
    for (;;) {
      cv.wait(l, [this] { return stop || !queue.empty(); });
      if (queue.empty()) return;  // stopped
      const ModuleInfo m = std::move(queue.front());
      queue.pop_front();
      l.unlock();
      std::unique_ptr<detail::ModuleSession> s = open_session(m);
      l.lock();
      opened[{m.path, m.build_id}] = std::move(s);
      ++done;
      cv.notify_all();
    }
  }
};

SymbolPreload::SymbolPreload() : p_(std::make_unique<Impl>()) {
  try {
    p_->thread = std::thread([this] { p_->run(); });
  } catch (const std::system_error&) {
    // No thread: add() does nothing, and the Symbolizer opens the files itself.
  }
}

SymbolPreload::~SymbolPreload() {
  {
    std::lock_guard<std::mutex> l(p_->mu);
    p_->stop = true;
    p_->queue.clear();
  }
  p_->cv.notify_all();
  if (p_->thread.joinable()) p_->thread.join();
}

void SymbolPreload::add(const ModuleInfo& m) {
  if (m.path.empty() || m.path[0] != '/' || !p_->thread.joinable()) return;
  std::lock_guard<std::mutex> l(p_->mu);
  if (p_->stop || !p_->queued.insert(Impl::Key{m.path, m.build_id}).second) return;
  p_->queue.push_back(m);
  p_->cv.notify_all();
}

std::size_t SymbolPreload::opened() const {
  std::lock_guard<std::mutex> l(p_->mu);
  return p_->done;
}

std::unique_ptr<detail::ModuleSession> SymbolPreload::take(const ModuleInfo& m) {
  std::unique_lock<std::mutex> l(p_->mu);
  const Impl::Key key{m.path, m.build_id};
  if (!p_->queued.count(key)) return nullptr;  // never queued: the Symbolizer opens it
  p_->cv.wait(l, [&] { return p_->opened.count(key) != 0; });
  std::unique_ptr<detail::ModuleSession> s = std::move(p_->opened[key]);
  p_->opened.erase(key);
  p_->queued.erase(key);  // a second module with this file opens its own
  return s;
}

bool has_sanitizer_runtime(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  bool found = false;
  for (Elf_Scn* scn = nullptr; elf && !found && (scn = elf_nextscn(elf, scn));) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    for (std::size_t i = 0; data && !found && i < sh.sh_size / sh.sh_entsize; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym) || sym.st_shndx == SHN_UNDEF) continue;
      const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (!name) continue;
      for (const char* entry : {"__asan_init", "__lsan_init", "__msan_init", "__tsan_init", "__hwasan_init"})
        found |= std::strcmp(name, entry) == 0;
    }
  }
  if (elf) elf_end(elf);
  close(fd);
  return found;
}

}  // namespace memtide::analysis
