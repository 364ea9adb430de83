// Leaks view model: one row per stack with blocks not freed at the end of the trace (of the
// allocations counted in the selected window), each with its symbolised stack, plus sorting,
// filtering, the suppression line for a row, and the rows a suppression list hides.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/model.h"
#include "analysis/suppressions.h"
#include "analysis/symbols.h"
#include "viewer/serial.h"

namespace memtide::viewer {

struct LeakFrame {
  std::string function, location, module;  // location: "file.cpp:12" or "+0x1a2b"
  bool inlined = false;
  double share = 0;  // of the program's allocations whose stack holds this function (FunctionSpread)
  bool widespread = false;  // FunctionSpread::widespread: a wrapper's or constructor's, not one leak's
  // For suppressions: the source file's path as the debug info gives it ("" unknown), and
  // whether `function` is the function's name rather than a label made of its address.
  std::string file = {};
  bool named = false;
};

struct LeakRow {
  uint64_t stack = 0;
  uint64_t bytes = 0, blocks = 0;
  uint64_t samples = 0;          // a sampled trace: the recorded blocks behind bytes and blocks
  uint64_t first = 0, last = 0;  // allocation times of the leaked blocks (relative)
  // With a leak scan (heap only): of bytes/blocks, those still reachable at exit and the
  // indirect leaks; the rest are definite leaks.
  uint64_t reachable_bytes = 0, reachable_blocks = 0;
  uint64_t indirect_bytes = 0, indirect_blocks = 0;
  // A kept trace: of bytes/blocks, those allocated before its range (their first segments removed).
  uint64_t before_range_bytes = 0, before_range_blocks = 0;
  std::string site;               // the allocation site: function of the last frame
  std::string module;             // its module (file name only)
  std::vector<LeakFrame> frames;  // allocation site first
  std::size_t suggested = 0;      // frame whose function makes the best suppression
};

struct LeaksData {
  std::vector<LeakRow> rows;  // by bytes, largest first
  uint64_t total_bytes = 0, total_blocks = 0;
  bool scanned = false;  // the trace has a complete leak scan: rows carry their classes
  bool sampled = false;  // a sampled trace: bytes and blocks are estimates
  uint64_t reachable_bytes = 0, indirect_bytes = 0;
  bool kept_range = false;  // a kept trace whose first segments are gone: rows carry before_range_*
  uint64_t before_range_bytes = 0, before_range_blocks = 0;
  uint64_t stacks_without_frames = 0;  // rows beyond the frame budget
  uint64_t serial = next_serial();
};

// Collects the leaking stacks of a domain: heap blocks, anonymous mappings or custom-pool
// blocks (`max_frames` per stack; frames are kept for the `max_rows_with_frames` largest rows
// only, a bound on memory for pathological traces).
LeaksData make_leaks(const analysis::Model& m, analysis::Symbolizer& sym,
                     analysis::Domain domain = analysis::Domain::Heap, std::size_t max_frames = 128,
                     std::size_t max_rows_with_frames = 50000);

// The heap's leaking rows that a suppression list matches, as `memtide check` and `memtide
// report --suppressions` set them apart (analysis::suppress_leak, on the rows' frames: the
// first 128 from the allocation site). Rows beyond the frame budget have no frames: not matched.
struct LeakSuppression {
  std::vector<int> by_row;  // per row of the LeaksData: the suppression's index, or -1
  std::vector<analysis::Suppression> items;  // the list's, each with what it hid
  uint64_t rows = 0, blocks = 0, bytes = 0;  // suppressed
  uint64_t unmatched_rows = 0;  // rows without frames, not matched
  bool suppressed(uint32_t row) const { return row < by_row.size() && by_row[row] >= 0; }
};
LeakSuppression suppress_leaks(const LeaksData& d, const analysis::SuppressionList& list);

enum class LeakColumn : uint8_t { Bytes, Blocks, First, Last, Site, Module, Count_ };

// Indices of the rows that pass `filter` (case-insensitive substring of any frame's function,
// location or module; empty: all), ordered by `column`. With `hide_reachable`, rows whose
// blocks are all still reachable (leak scan) are left out; with `hide_suppressed`, the rows it
// matched.
std::vector<uint32_t> filter_and_sort_leaks(const LeaksData& d, std::string_view filter, LeakColumn column,
                                           bool ascending, bool hide_reachable = false,
                                           const LeakSuppression* hide_suppressed = nullptr);


// "definite", "indirect", "reachable", or a mix such as "1 of 3 reachable"; empty without a
// leak scan (leak_reach), then, in a kept trace, "N before the kept range" for the blocks
// allocated before its range.
std::string leak_kind(const LeaksData& d, const LeakRow& r);
std::string leak_reach(const LeaksData& d, const LeakRow& r);

// "leak:<function>" for the row, using frame `frame` (its function; else its module).
// Characters that LSan's pattern syntax gives a meaning to (`*`, `^`, `$`) are replaced by '*'.
std::string suppression_line(const LeakRow& row, std::size_t frame);

// The frame a suppression should name by default (analysis::suggested_frame): the first one
// from the allocation site that belongs to the program rather than to the allocator or the
// standard library, and is not widespread (an allocation wrapper such as redis's zmalloc
// would hide every leak).
std::size_t suggested_frame(const std::vector<LeakFrame>& frames);

// What a suppression line made from `row`'s frame `frame` would also hide: the other rows with
// a frame of that function (or, for a frame without one, of that module).
struct SuppressionReach {
  uint64_t other_rows = 0, other_bytes = 0;
  double share = 0;  // of the program's allocations whose stack holds the function
};
SuppressionReach suppression_reach(const LeaksData& d, const LeakRow& row, std::size_t frame);

}  // namespace memtide::viewer
