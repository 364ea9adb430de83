// The names `memtide symbolize` found, kept on disk per module, so that the next trace of the
// same program does not open and decompress the same debug information again (inflating libc's
// alone is most of what `memtide run` would add to a short program: bench/README.md).
//
// One file per module and fingerprint: the module's build-id, and the path, device, inode,
// size and modification time of both its file and its separate debug file under
// /usr/lib/debug/.build-id (or that there is none). Any change to either gives another file
// name, so an entry is never used for other code or other debug information. Only modules
// whose debug information was found are cached (ModuleState::Ok); the rest are cheap to look at
// and their problems are reported as before.
//
// Directory: $MEMTIDE_CACHE_DIR (empty: no cache), else $XDG_CACHE_HOME/memtide, else
// $HOME/.cache/memtide; files under symbols/. A file that cannot be read is ignored, one that
// cannot be written is left out: the cache only ever saves time.
//
// File: "MTSYMC1\n", then per offset: varint offset, varint frame count, and per frame
// (function first, then those inlined into it) bytes function, bytes file, varint line.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "analysis/model.h"

namespace memtide::cli {

struct CachedFrame {
  std::string function, file;
  uint64_t line = 0;
};
using CachedFrames = std::vector<CachedFrame>;  // empty: looked up, nothing names it

class SymbolCache {
 public:
  // The directory from the environment ("" when there is none or it is turned off).
  static std::string default_dir();
  explicit SymbolCache(std::string dir) : dir_(std::move(dir)) {}

  // The cached names of `m` at `offset`, or nullptr. `from_disk`: they were read from the
  // cache file (not put() by this process).
  const CachedFrames* find(const analysis::ModuleInfo& m, uint64_t offset, bool* from_disk = nullptr);
  // Whether anything is cached for `m` (its debug information was found before).
  bool known(const analysis::ModuleInfo& m);
  // Records what was found for a module whose debug information is there.
  void put(const analysis::ModuleInfo& m, uint64_t offset, CachedFrames frames);
  // Writes the modules that got new entries (merged with what another process may have
  // written meanwhile). Errors are ignored.
  void save();


 private:
  struct Module {
    std::string file;  // cache file path; empty: this module cannot be cached
    bool loaded = false, dirty = false;
    std::unordered_map<uint64_t, CachedFrames> entries;
    std::unordered_set<uint64_t> put_here;  // offsets put() by this process
  };
  Module& module(const analysis::ModuleInfo& m);

  std::string dir_;
  std::unordered_map<uint64_t, Module> modules_;  // by module id
};

}  // namespace memtide::cli
