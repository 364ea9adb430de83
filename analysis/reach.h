// Reachability of the heap blocks live at the end of a trace, from the recorder's scan at exit
// (recorder/leak_scan.cpp, Scan records in formats/records.h), as LeakSanitizer classifies
// leaks:
//
//   - roots: words in Root regions, and in Mapping regions and mappings the program made
//     itself (mmap records) that hold no live block (other threads' stacks, module .bss, an
//     interpreter's object arenas);
//   - a block is reachable when a root or a reachable block holds a pointer to it, to its first
//     byte or any byte inside it (an interior pointer, as LeakSanitizer counts them), except a
//     16-byte aligned address in its last 8 bytes, where glibc's allocator keeps the next
//     chunk's header (its free lists point there); a pointer just past an 8-byte block keeps it
//     (`new T[0]` of a class with a destructor: the block holds the element count);
//   - an unreachable block that another unreachable block points to is an indirect leak; the
//     other unreachable blocks are definite leaks.
//
// Words in the brk heap and in Mapping regions that hold live blocks count only when they lie
// inside a live block: the rest there is free memory or the allocator's own, whose stale
// pointers must not keep blocks alive.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/records.h"

namespace memtide::analysis {

enum class Reach : uint8_t { Definite = 0, Indirect = 1, Reachable = 2 };

class ScanData {
 public:
  void add(const fmt::Scan& x);
  bool present() const { return present_; }
  bool complete() const { return done_; }
  uint64_t regions() const { return regions_.size(); }
  uint64_t refs() const { return nrefs_; }
  uint64_t words() const { return words_; }
  uint64_t duration_ns() const { return duration_ns_; }
  // The program's own leak suppressions (its __lsan_default_suppressions()), as text.
  const std::string& program_suppressions() const { return suppressions_; }

  struct Block {
    uint64_t addr = 0, size = 0;
  };
  // One class per block of `blocks`, which must be sorted by address and not overlap.
  // `mappings`: the anonymous mappings the program itself made and still had (the trace's
  // mmap records), each a root unless a live block lies in it, like a Mapping region: the
  // kernel merges neighbouring mappings into one line of /proc/self/maps, so a region that
  // holds a block (of a chunk glibc mapped) may also hold a mapping of the program's own
  // (an interpreter's object arena) whose words are roots.
  std::vector<Reach> classify(const std::vector<Block>& blocks,
                              const std::vector<std::pair<uint64_t, uint64_t>>& mappings = {}) const;

 private:
  struct Region {
    uint64_t start, end;
    fmt::ScanKind kind;
  };
  // Calls f(loc, value) for every word, in address order.
  template <class F>
  void for_each_ref(F&& f) const;

  bool present_ = false, done_ = false;
  std::string suppressions_;
  uint64_t words_ = 0, duration_ns_ = 0;
  std::vector<Region> regions_;
  // The Refs records' pairs as they are in the file (a few bytes each, not 16): `raw_` holds
  // their bytes, `records_` where each record starts and its count.
  std::vector<uint8_t> raw_;
  struct RecordSpan {
    std::size_t offset, size;
    uint64_t count;
  };
  std::vector<RecordSpan> records_;
  uint64_t nrefs_ = 0;
};

}  // namespace memtide::analysis
