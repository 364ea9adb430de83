// Symbols: return addresses to function (demangled), file:line and inlined frames.
//
// Sources, in order of preference:
//   1. Symbols records embedded in the trace by `memtide symbolize` (a copied trace keeps names);
//   2. the module's file on disk, through elfutils libdw (DWARF, separate debug files found
//      by build-id, the ELF symbol table), only when its build-id equals the recorded one;
//   3. "module+0xoffset" (no debug info, missing or changed file), with the module's problem
//      reported by problems(), never a guess from the wrong file.
// Frames are return addresses: the code looked up is ip - 1 (the call instruction).
// Results are cached per module offset; one Dwfl session per module, opened on first use.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "analysis/model.h"

namespace memtide::analysis {

struct Frame {
  std::string_view function;  // demangled; empty when unknown
  std::string_view file;      // empty when unknown
  uint32_t line = 0;
  std::string_view module;    // module path; empty when the address is in no known module
  uint64_t offset = 0;        // module offset of the return address (or the address itself)
  bool inlined = false;       // inlined into the frame before it
};

enum class ModuleState : uint8_t {
  Ok,           // file found, build-id matches (or none was recorded), debug info present
  NoDebugInfo,  // symbol table only: functions but no file:line, no inlined frames
  Embedded,     // names come from the trace's Symbols records
  Missing,      // the file is not there (or cannot be read)
  Mismatch,     // the file's build-id differs from the recorded one
  NoFile,       // not a file (vdso, anonymous code)
};
const char* module_state_name(ModuleState s);

struct ModuleProblem {
  std::string path;
  ModuleState state = ModuleState::Ok;
  std::string detail;  // one line
};

namespace detail {
struct ModuleSession;  // one module's file and debug information, opened with libdw
}

// Opens modules' files and debug information on a thread of its own, ahead of the Symbolizer
// that will need them: reading and decompressing DWARF (libc's, say) is a good part of a
// report's time, and it can run while the trace is replayed. Feed it the modules as the replay
// meets them (ReplayOptions::on_module); a Symbolizer made with it takes what it opened.
class SymbolPreload {
 public:
  SymbolPreload();
  ~SymbolPreload();
  SymbolPreload(const SymbolPreload&) = delete;
  SymbolPreload& operator=(const SymbolPreload&) = delete;

  // Queues the module's file (a path; the same file and build-id once). Any thread.
  void add(const ModuleInfo& m);
  // Files opened so far.
  std::size_t opened() const;

 private:
  friend class Symbolizer;
  // Waits for the queued files, then hands over the one opened for `m` (null: none).
  std::unique_ptr<detail::ModuleSession> take(const ModuleInfo& m);
  struct Impl;
  std::unique_ptr<Impl> p_;
};

class Symbolizer {
 public:
  struct Options {
    bool use_embedded = true;  // prefer Symbols records of the trace
    bool use_files = true;     // read modules from disk
    bool inlines = true;       // expand inlined frames
    bool scope_index = true;   // find an address's scopes by its subprogram (false: dwarf_getscopes)
  };

  explicit Symbolizer(const Model& model) : Symbolizer(model, Options{}) {}
  // `preload` (optional, outliving this) may hold the modules' files opened already.
  Symbolizer(const Model& model, Options options, SymbolPreload* preload = nullptr);
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Frames of one return address: the function the code belongs to, then the functions inlined
  // into it, innermost last. Never empty.
  std::span<const Frame> resolve(uint64_t ip);
  // The whole stack, outermost caller first, allocation site last.
  void stack(StackId id, std::vector<Frame>& out);

  // Resolves a module offset from the file alone (no embedded symbols); for `memtide
  // symbolize`. Empty when the module's file cannot be used.
  std::vector<Frame> resolve_in_file(const ModuleInfo& m, uint64_t offset);
  ModuleState file_state(const ModuleInfo& m);

  // Modules needed so far whose names could not (all) be resolved.
  std::vector<ModuleProblem> problems() const;

 private:
  using ModuleSession = detail::ModuleSession;
  ModuleSession& session(const ModuleInfo& m);
  std::string_view intern(std::string_view s);
  void resolve_uncached(uint64_t ip, std::vector<Frame>& out);

  const Model& model_;
  Options opt_;
  SymbolPreload* preload_ = nullptr;
  std::unordered_set<std::string> strings_;
  std::unordered_map<uint64_t, std::unique_ptr<ModuleSession>> sessions_;  // by module index
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> cache_;     // ip -> [begin, end) in frames_
  std::vector<Frame> frames_;
  std::vector<uint64_t> scratch_;
};

// "operator new(unsigned long)" from "_Znwm"; the input when it is not a mangled name.
std::string demangle(std::string_view name);

// "function (file:line)", "module+0x1a2b", "0x7f..."; the file is shortened to its basename
// when `short_file`.
std::string format_frame(const Frame& f, bool short_file = true);
// The label of a frame in flamegraphs and trees: the function, else module+0xoffset.
std::string frame_label(const Frame& f);
std::string_view basename_of(std::string_view path);
// Whether the ELF file at `path` exports a sanitizer runtime's entry point (__asan_init,
// __lsan_init, __msan_init, __tsan_init, __hwasan_init): its malloc is the sanitizer's.
bool has_sanitizer_runtime(const std::string& path);
// Bytes as lower-case hex ("a1b2..."), as build-ids are written.
std::string hex_bytes(std::string_view bytes);

}  // namespace memtide::analysis
