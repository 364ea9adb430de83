// The analysis model: everything one replay of a trace learns, as plain immutable data shared
// by `memtide report|check|flamegraph|diff|summary` and the viewer.
//
// Sections:
//   [1] Domains and metrics (heap, mmap and custom pools are kept apart)
//   [2] Per-stack statistics
//   [3] Time series (downsampled without losing extremes)
//   [4] Anomalies: unknown frees, mismatched APIs, double allocations
//   [5] Process, threads, modules, markers
//   [6] Model
//
// Times in the model are absolute trace times (ns, CLOCK_MONOTONIC of the recorded process);
// Model::time_base is the start of the trace, so `t - time_base` is "time since start".
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/ids.h"
#include "analysis/stack_history.h"
#include "analysis/stacks.h"
#include "formats/records.h"

namespace memtide::analysis {

// ---------------------------------------------------------------------------------------
// [1] Domains and metrics
// ---------------------------------------------------------------------------------------

// Heap: malloc family and operator new/delete. Mmap: anonymous mappings (mmap/munmap/mremap).
// Custom: blocks announced with memtide_alloc/memtide_free (usually carved from heap pools,
// so counting them as heap would count their bytes twice).
enum class Domain : uint8_t { Heap, Mmap, Custom, Count };
inline constexpr unsigned kDomainCount = static_cast<unsigned>(Domain::Count);

[[gnu::always_inline]] constexpr Domain domain_of(fmt::Api a) {
  switch (fmt::family_of(a)) {
    case fmt::Family::Mmap: return Domain::Mmap;
    case fmt::Family::Custom: return Domain::Custom;
    default: return Domain::Heap;
  }
}
constexpr const char* domain_name(Domain d) {
  return d == Domain::Heap ? "heap" : d == Domain::Mmap ? "mmap" : "custom";
}

// The quantities a flamegraph or a tree can be drawn for.
enum class Metric : uint8_t {
  Allocated,   // bytes allocated
  Count,       // number of allocations
  Temporary,   // number of temporary allocations (see Totals::temporaries)
  Leaked,      // bytes not freed at the end of the trace
  Peak,        // bytes live at the high-water mark
  LiveAt,      // bytes live at ReplayOptions::at (the chosen time)
  Count_
};

// ---------------------------------------------------------------------------------------
// [2] Per-stack statistics (one entry per stack that allocated in the domain)
// ---------------------------------------------------------------------------------------

struct StackMetrics {
  uint64_t alloc_count = 0, alloc_bytes = 0;
  uint64_t temp_count = 0, temp_bytes = 0;
  uint64_t leaked_blocks = 0, leaked_bytes = 0;
  uint64_t peak_blocks = 0, peak_bytes = 0;  // live at the domain's high-water mark
  uint64_t at_blocks = 0, at_bytes = 0;      // live at ReplayOptions::at
  uint64_t first_leak_time = 0, last_leak_time = 0;  // allocation times of the leaked blocks
  // Of the leaked heap blocks, when the trace has a complete leak scan (LeakScanInfo): those
  // still reachable at exit, and the indirect leaks (reachable only from other leaks). The
  // definite leaks are the rest.
  uint64_t reachable_blocks = 0, reachable_bytes = 0;
  uint64_t indirect_blocks = 0, indirect_bytes = 0;
  uint64_t definite_bytes() const { return leaked_bytes - reachable_bytes - indirect_bytes; }
  uint64_t definite_blocks() const { return leaked_blocks - reachable_blocks - indirect_blocks; }
  // Of the leaked blocks, those allocated before the range a kept trace holds (Model::kept_from).
  uint64_t before_range_blocks = 0, before_range_bytes = 0;
  // Sampled traces: the recorded blocks behind alloc_* and leaked_*, and the variance of their
  // byte estimates (for a sampled block of s bytes with weight w: w * (w - s), the
  // Horvitz-Thompson variance estimate). Exact blocks add nothing: their figures are exact.
  uint64_t alloc_samples = 0, leaked_samples = 0;
  double alloc_var = 0, leaked_var = 0;
  void note_alloc_sample(uint64_t w, uint64_t s) {
    ++alloc_samples;
    alloc_var += static_cast<double>(w) * static_cast<double>(w - s);
  }
  void note_leak_sample(uint64_t w, uint64_t s) {
    ++leaked_samples;
    leaked_var += static_cast<double>(w) * static_cast<double>(w - s);
  }

  uint64_t value(Metric m) const {
    switch (m) {
      case Metric::Allocated: return alloc_bytes;
      case Metric::Count: return alloc_count;
      case Metric::Temporary: return temp_count;
      case Metric::Leaked: return leaked_bytes;
      case Metric::Peak: return peak_bytes;
      case Metric::LiveAt: return at_bytes;
      case Metric::Count_: break;
    }
    return 0;
  }
  // The block count that goes with value(m) (for Count and Temporary: the same number).
  uint64_t blocks(Metric m) const {
    switch (m) {
      case Metric::Allocated: case Metric::Count: return alloc_count;
      case Metric::Temporary: return temp_count;
      case Metric::Leaked: return leaked_blocks;
      case Metric::Peak: return peak_blocks;
      case Metric::LiveAt: return at_blocks;
      case Metric::Count_: break;
    }
    return 0;
  }
};

struct StackStats {
  StackId stack;
  StackMetrics m;
};

// Sampled recording (formats/sampling.h): whether any part of the trace was sampled, the
// intervals in effect and when they began, and the samples recorded.
struct SamplingInfo {
  struct Change {
    uint64_t time = 0;      // absolute; 0: from the start
    uint64_t interval = 0;  // bytes; 0: exact
  };
  std::vector<Change> changes;
  uint64_t samples = 0;        // sampled allocations
  double allocated_var = 0;    // variance of the allocated-bytes estimate
  bool sampled() const { return interval() != 0 || changes.size() > 1; }
  // The sampling interval (the last one that was not 0), or 0 for an exact trace.
  uint64_t interval() const {
    for (auto it = changes.rbegin(); it != changes.rend(); ++it)
      if (it->interval) return it->interval;
    return 0;
  }
  void note(uint64_t time, uint64_t interval) {
    if (changes.empty() && interval == 0) return;  // exact from the start: nothing to say
    changes.push_back({time, interval});
  }
  void add_sample(uint64_t w, uint64_t s) {
    ++samples;
    allocated_var += static_cast<double>(w) * static_cast<double>(w - s);
  }
};
// The 95% confidence half-width of an estimate with variance `var` (normal approximation).
inline double ci95(double var) { return var > 0 ? 1.959964 * std::sqrt(var) : 0; }

// Whole-domain totals. Every allocation statistic counts the allocations made in the window
// [ReplayOptions::from, to] only ("counted" blocks); with no window, all of them.
struct Totals {
  uint64_t allocations = 0, allocated_bytes = 0;  // counted allocations
  uint64_t frees = 0, freed_bytes = 0;            // free records / bytes released of counted blocks
  // Temporary allocation: a block freed by the thread that allocated it, with no other
  // allocation by that thread in between (heaptrack's definition, applied per thread).
  uint64_t temporaries = 0, temporary_bytes = 0;
  uint64_t peak_bytes = 0, peak_blocks = 0, peak_time = 0;  // high-water mark of counted live bytes
  uint64_t leaked_bytes = 0, leaked_blocks = 0;             // counted blocks live at the end
  uint64_t reachable_bytes = 0, reachable_blocks = 0;       // of those, still reachable (leak scan)
  uint64_t indirect_bytes = 0, indirect_blocks = 0;         // of those, indirect leaks (leak scan)
  uint64_t definite_bytes() const { return leaked_bytes - reachable_bytes - indirect_bytes; }
  uint64_t definite_blocks() const { return leaked_blocks - reachable_blocks - indirect_blocks; }
  uint64_t at_bytes = 0, at_blocks = 0;                     // counted blocks live at `at`
  // A kept trace (Model::kept_from): the blocks allocated before its range and never freed,
  // included in leaked_* (and nowhere else: not in the allocations, frees, peak or temporaries).
  uint64_t before_range_bytes = 0, before_range_blocks = 0;
};

struct ApiCount {
  uint64_t calls = 0, bytes = 0;
};

// ---------------------------------------------------------------------------------------
// [3] Time series: at most `max_points` buckets; each keeps the min, max and last value of
//     its interval, so the peak survives any amount of downsampling.
// ---------------------------------------------------------------------------------------

struct SeriesPoint {
  uint64_t time = 0;  // start of the bucket (absolute)
  uint64_t min = 0, max = 0, last = 0;
};

class Series {
 public:
  explicit Series(std::size_t max_points = 2048) : max_points_(max_points < 4 ? 4 : max_points) {}
  // Inline fast path: the value falls in the current bucket (almost every event).
  [[gnu::always_inline]] void add(uint64_t time, uint64_t value) {
    if (time >= cur_start_ && time < cur_end_) [[likely]] {
      SeriesPoint& p = points_.back();
      if (value < p.min) p.min = value;
      if (value > p.max) p.max = value;
      p.last = value;
      return;
    }
    add_slow(time, value);
  }
  const std::vector<SeriesPoint>& points() const { return points_; }
  uint64_t bucket_ns() const { return width_; }

 private:
  void add_slow(uint64_t time, uint64_t value);
  void coarsen();
  uint64_t cur_start_ = 1, cur_end_ = 0;  // [start, end) of the last bucket; empty at first
  std::size_t max_points_;
  uint64_t base_ = 0;
  uint64_t width_ = 1000;  // ns; doubles whenever the series is full
  bool started_ = false;
  std::vector<SeriesPoint> points_;
};

// ---------------------------------------------------------------------------------------
// [4] Anomalies
// ---------------------------------------------------------------------------------------

// Frees of addresses that were not live (allocated before recording started, while paused,
// twice freed, or by an allocation the recorder lost). Free records carry no stack: grouped by
// API and thread, with the first address seen.
struct UnknownFree {
  fmt::Api api = fmt::Api::Free;
  ThreadId thread;
  uint64_t count = 0;
  uint64_t first_addr = 0, first_time = 0;
};

// A block released by the wrong family (new[] by free, malloc by delete, ...); grouped by the
// allocation's stack and both APIs.
struct Mismatch {
  StackId stack;
  fmt::Api alloc_api = fmt::Api::Malloc, free_api = fmt::Api::Free;
  uint64_t count = 0, bytes = 0;
  uint64_t first_time = 0;
};

struct Anomalies {
  std::vector<UnknownFree> unknown_frees;  // per domain in `domain`
  std::array<uint64_t, kDomainCount> unknown_free_count{};
  std::vector<Mismatch> mismatches;
  uint64_t mismatch_count = 0;
  // An address allocated again while still live (a lost free): the old block is dropped.
  uint64_t double_allocs = 0;
  // Records that could not be right (unknown API, zero-length munmap, ...).
  uint64_t bad_records = 0;
  // Stack ids used by allocations but never defined by a StackDef.
  uint64_t undefined_stacks = 0;
};

// ---------------------------------------------------------------------------------------
// [5] Process, threads, modules, markers
// ---------------------------------------------------------------------------------------

struct ProcessSummary {
  uint64_t pid = 0, ppid = 0;
  uint64_t realtime_start_ns = 0, monotonic_start_ns = 0;
  uint64_t page_size = 0;
  fmt::RecordingMode mode = fmt::RecordingMode::Exact;
  uint64_t sample_interval = 0;
  std::string exe, cwd;
  std::vector<std::string> argv;
  // Set when the program had a malloc of its own, which its allocations went to instead of the
  // recorder's (the `program_malloc` line of the recording's options): where it was defined.
  std::string program_malloc;
  // The recording began while the process ran (`memtide attach`; the `attached` line).
  bool attached = false;
};

// The program as it was started: its argv[0]'s file name ("redis-server"), else the file name of
// the executable (a symlink's target: redis-server is /usr/bin/redis-check-rdb).
std::string program_name(const ProcessSummary& p);
// "redis-server (/usr/bin/redis-check-rdb)": the name as started, with the executable's path
// when its file name differs; the path alone when they agree.
std::string program_label(const ProcessSummary& p);

// What readers say of a trace whose program had a malloc of its own; empty otherwise.
std::string unrecorded_allocations_note(const ProcessSummary& p);

struct ThreadInfo {
  ThreadId id;
  uint64_t os_tid = 0;
  uint32_t parent = 0;
  std::string name;
  uint64_t start_time = 0, exit_time = 0;
  uint64_t allocations = 0, frees = 0;
};

struct ModuleInfo {
  ModuleId id;
  uint64_t load_bias = 0;
  std::string path;
  std::string build_id;  // raw bytes
  std::vector<fmt::Segment> segments;
  uint64_t load_time = 0, unload_time = 0;  // unload_time 0: still loaded at the end
  // [lo, hi): runtime address range covered by the executable segments.
  uint64_t lo = 0, hi = 0;
};

struct MarkerInfo {
  uint64_t time = 0;
  ThreadId thread;
  std::string label;
};

// ---------------------------------------------------------------------------------------
// [6] Model
// ---------------------------------------------------------------------------------------

// Symbols embedded in the trace by `memtide symbolize` (Symbols records), per module.
struct EmbeddedSymbol {
  uint64_t offset = 0;  // module offset of the return address
  std::string function, file;
  uint32_t line = 0;
  uint32_t inline_depth = 0;  // 0: the function the code belongs to; k > 0: inlined k levels deep
};

struct Model {
  // Where the trace stands.
  bool complete = false;          // an End record was read
  // The reachability scan the recorder made at exit (--leak-scan), if any: with a complete one
  // the heap's leaks are classified (StackMetrics::reachable_*, indirect_*).
  struct LeakScanInfo {
    bool present = false, complete = false;
    uint64_t regions = 0, words = 0, refs = 0, duration_ns = 0;
    std::string program_suppressions;  // the program's __lsan_default_suppressions()
  } leak_scan;
  std::optional<fmt::End> end;
  bool truncated = false;         // the file ended inside a block: analysed up to the cut
  bool corrupt = false;           // a bad block or record was skipped
  std::vector<std::string> warnings;
  uint64_t file_size = 0;
  uint64_t events = 0;            // Alloc + Free records
  SamplingInfo sampling;          // figures of a sampled trace are estimates

  ProcessSummary process;
  bool have_process = false;
  uint64_t time_base = 0;          // start of the trace (ProcessInfo, or the first event)
  uint64_t first_time = 0, last_time = 0;
  uint64_t duration() const { return last_time > time_base ? last_time - time_base : 0; }

  // The window the statistics were restricted to (absolute; 0 / UINT64_MAX: unbounded) and
  // the "live at" time.
  uint64_t window_from = 0, window_to = UINT64_MAX;
  uint64_t at_time = UINT64_MAX;
  bool has_window() const { return window_from != 0 || window_to != UINT64_MAX; }
  // A kept trace whose first segments are gone, read without a window: where the range it holds
  // starts (absolute; the time of its first checkpoint, which is also window_from), else 0. Its
  // leaks include the blocks that checkpoint holds and that were never freed (before_range_*).
  uint64_t kept_from = 0;
  // A window asked of a kept set whose first segments are gone: where what the set holds begins
  // (the window counts from there; 0: not clipped).
  uint64_t window_clipped_from = 0;

  std::array<Totals, kDomainCount> totals{};
  std::array<ApiCount, fmt::kApiCount> alloc_api{};  // counted allocations per API
  std::array<ApiCount, fmt::kApiCount> free_api{};   // free records per API (bytes: known blocks)
  const Totals& heap() const { return totals[0]; }

  // Per-stack statistics per domain (only stacks with something to show; unordered).
  std::array<std::vector<StackStats>, kDomainCount> stacks;
  bool per_stack = true;  // false when replayed in summary mode

  StackTable stack_table;
  std::vector<ModuleInfo> modules;
  // Symbols records, per module id, sorted by (offset, inline_depth); later records win.
  std::unordered_map<uint64_t, std::vector<EmbeddedSymbol>> embedded;
  std::vector<ThreadInfo> threads;
  std::vector<MarkerInfo> markers;
  uint64_t markers_dropped = 0;

  Series heap_series;  // live heap bytes (all heap blocks, not only the window's)
  Series rss_series;   // RSS from Counters records
  Series mmap_series;    // live bytes of anonymous mappings (all of them); empty without mappings
  Series custom_series;  // live bytes of custom pool blocks (all of them); empty without any
  uint64_t peak_rss = 0;
  // Live heap bytes by stack over time (counted blocks): empty unless ReplayOptions::stack_history.
  StackHistory stack_history;

  Anomalies anomalies;
  // An attached trace (ProcessSummary::attached): frees of blocks allocated before the
  // recording, per domain (analysis/attached.h). Counted here instead of in `anomalies`.
  std::array<uint64_t, kDomainCount> freed_before_recording{};

  const ModuleInfo* module(ModuleId id) const;
  // The module whose executable segments contain `ip` (the latest loaded, when several did).
  const ModuleInfo* module_at(uint64_t ip) const;
};

// What a ModuleLoad record adds to Model::modules (its address ranges worked out), and what a
// ModuleUnload changes (the latest load of that id still loaded gets its unload time).
ModuleInfo module_info(const fmt::ModuleLoad& x);
void unload_module(Model& m, const fmt::ModuleUnload& x);
// Adds a Symbols record's entries to Model::embedded; sort_embedded() orders them for lookups
// once every record has been read.
void add_embedded(Model& m, const fmt::Symbols& x);
void sort_embedded(Model& m);

}  // namespace memtide::analysis
