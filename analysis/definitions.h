// What symbolising a trace needs, read without replaying its events: the modules, the stack
// trie, the symbols already embedded, and whether the trace ended (End).
//
// In a file whose blocks carry hints (fmt::kFileFlagBlockHints: every block holding a StackDef
// or Symbols record says so in its header), only the process stream's blocks and the flagged
// ones are read and decompressed; the rest are stepped over by their 48-byte headers. A dense
// trace of 28 million events is then a few dozen blocks to decode instead of 2,600. Files
// without hints are decoded whole (every record is still skipped cheaply, but decompressed).
//
//   DefinitionReader d;
//   if (std::string e = d.open("t.mtide"); !e.empty()) { ... }
//   d.advance();            // again later for a file that is still being written
//   d.finish();
//   for (const ModuleInfo& m : d.model().modules) ...
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "analysis/model.h"

namespace memtide::analysis {

class DefinitionReader {
 public:
  DefinitionReader();
  ~DefinitionReader();
  DefinitionReader(const DefinitionReader&) = delete;
  DefinitionReader& operator=(const DefinitionReader&) = delete;

  // Opens the trace and checks its header; the reason when it cannot be read, else empty.
  std::string open(const std::string& path);

  struct Progress {
    uint64_t blocks_read = 0;     // decompressed and decoded by this call
    uint64_t blocks_skipped = 0;  // stepped over by their headers
    bool waiting = false;         // the file ends inside a block (the writer may still be at it)
  };
  // Reads every complete block appended since the last call. Corrupt blocks are skipped (with
  // a warning in the model); an I/O error ends the reading.
  Progress advance();
  // No more blocks will come: orders the embedded symbols and notes a truncated tail.
  void finish();

  const Model& model() const;
  // The return addresses of the StackDef records read since the last call (repeats included):
  // what a symboliser following the file has not seen yet.
  std::vector<uint64_t> take_new_ips();
  uint64_t offset() const;       // file offset of the next block to read
  bool writer_alive() const;     // a recorder still holds its lock on the file
  bool fell_behind() const;      // FileReader::fell_behind: open it again to go on
  bool has_hints() const;        // the file flags its StackDef and Symbols blocks

 private:
  struct Impl;
  std::unique_ptr<Impl> p_;
};

// Ids of the modules that the trace holds Symbols records for, read from the blocks flagged as
// holding them. Empty for a file without block hints (or on any error): the caller then learns
// of embedded symbols only from its replay.
std::set<uint64_t> embedded_symbol_modules(const std::string& path);

}  // namespace memtide::analysis
