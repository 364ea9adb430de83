// Heap allocations by size, in power-of-two classes (heaptrack_print -H, memray stats), read
// straight from the trace's records: `memtide report --histogram` and the viewer's Sizes view.
//
// Class i holds the sizes in (2^(i-1), 2^i]; class 0 the sizes 0 and 1, class 1 the size 2.
// Every heap allocation counts once (realloc included); the blocks of custom pools are left
// out (they lie inside heap blocks), and so are anonymous mappings. A sampled trace has no
// histogram: its recorded allocations are a sample weighted by size.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace memtide::analysis {

struct SizeClass {
  uint64_t min_size = 0, max_size = 0;  // inclusive
  uint64_t allocations = 0, bytes = 0;
};

struct SizeHistogram {
  static constexpr unsigned kClasses = 65;
  std::array<uint64_t, kClasses> count{}, bytes{};

  static unsigned class_of(uint64_t size);
  static uint64_t min_of(unsigned i);
  static uint64_t max_of(unsigned i);
  void add(uint64_t size);
  uint64_t allocations() const;
  uint64_t total_bytes() const;
  // From the smallest to the largest non-empty class, the empty ones between included; none
  // when nothing was counted.
  std::vector<SizeClass> classes() const;
};

struct SizeHistogramResult {
  SizeHistogram histogram;
  std::string error;    // one line without the file name; set: no histogram
  std::string warning;  // a truncated tail: the histogram counts the blocks before it
  bool sampled = false;  // (then `error` says why there is no histogram)
  bool ok() const { return error.empty(); }
};

// Reads the whole trace at `path`, counting the allocations made in [from, to] (as a replay's
// window counts them; the default: all). The times are absolute, or with `from_start` relative
// to the trace's start as `report --from/--to` give them (the start the replay takes: the
// process's start in its ProcessInfo record, else the first allocation read).
// `progress(bytes read, file size)` is called after every block; returning false stops the
// reading (`error` is then "stopped").
SizeHistogramResult size_histogram_of_file(const std::string& path,
                                           const std::function<bool(uint64_t, uint64_t)>& progress = {},
                                           uint64_t from = 0, uint64_t to = UINT64_MAX, bool from_start = false);

}  // namespace memtide::analysis
