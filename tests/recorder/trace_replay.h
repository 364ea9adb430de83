// Test-side replay of a trace: reads it through the real reader and merger and checks the
// invariants an exact recording must hold (no address allocated twice, no free of an address
// that is not live), with per-API counts, the heap peak, the blocks left live, and markers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "formats/records.h"

namespace memtide::test {

struct Replay {
  bool read_ok = false;
  std::string error;            // reader error, if any
  bool ended = false;           // End record seen
  uint64_t scan_regions = 0, scan_refs = 0;  // leak scan records (Scan Region, Refs pairs)
  bool scan_done = false;                    // a Scan Done record
  fmt::EndReason end_reason = fmt::EndReason::Exit;
  uint64_t end_status = 0;
  uint64_t lost_events = 0;     // the End record's
  uint64_t end_time = 0, end_allocs = 0, end_frees = 0;  // the End record's
  uint64_t pid = 0, ppid = 0;
  std::vector<std::string> argv;

  uint64_t allocs[fmt::kApiCount] = {};
  uint64_t frees[fmt::kApiCount] = {};
  uint64_t bytes[fmt::kApiCount] = {};
  uint64_t heap_allocs = 0, heap_frees = 0;  // malloc family and new/delete (not mmap/custom)

  uint64_t short_records = 0, full_records = 0;  // Alloc and Free records by form (file order)

  uint64_t double_allocs = 0;   // an address allocated while live
  uint64_t unknown_frees = 0;   // a heap free of an address that is not live
  uint64_t out_of_order = 0;    // merged records whose time went backwards
  // Per stream: its Allocs and Frees, and those timed the same as the stream's Alloc or Free
  // before them (a reused time, or a clock that did not move).
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> events_and_same_times;

  uint64_t live_bytes = 0, peak_bytes = 0, peak_time = 0;  // heap blocks only
  std::map<uint64_t, uint64_t> live_by_size;                // size -> blocks live at the end
  std::unordered_map<uint64_t, uint64_t> allocs_by_size;    // size -> Allocs of that size
  std::map<std::string, uint64_t> marker_times;
  std::map<uint64_t, std::vector<uint64_t>> alloc_times;  // size -> times of its first 64 allocations
  uint64_t stack_defs = 0, max_stack_id_used = 0, max_stack_id_defined = 0;
  uint64_t stacks_undefined = 0;  // allocations whose stack id was never defined
  uint64_t module_unloads = 0;
  uint64_t modules = 0, counters = 0, threads = 0, thread_names = 0, watermarks = 0;
  uint64_t symbols = 0;  // Symbols records (the names memtide run's follower appends)
  // Frames of the stacks defined that lie in libmemtide's own code (its interposers must not
  // show in a stack: the program called the functions they stand for).
  uint64_t frames_in_recorder = 0;
  std::vector<std::pair<uint64_t, uint64_t>> rss_series;  // (time, rss_bytes) of each Counters record
  std::vector<std::string> thread_name_list;
  std::vector<std::string> module_paths;
  uint64_t first_time = 0, last_time = 0;
  uint64_t max_stack_depth = 0;                        // frames of the deepest stack used
  std::map<uint64_t, std::vector<uint64_t>> leaf_ips;  // size -> the leaf frame of each allocation
  std::map<uint64_t, std::vector<uint64_t>> caller_ips;  // size -> the frame above the leaf (0: none)
  struct Module {
    std::string path;
    uint64_t bias;
  };
  std::vector<Module> modules_loaded;
  // Block hints (fmt::kFileFlagBlockHints): blocks holding StackDef records, and how many of
  // them lack kBlockFlagStacks (a reader trusting the hints would miss their stacks).
  bool block_hints = false;
  bool exact_watermarks = false;  // fmt::kFileFlagExactWatermarks (the merge used it)
  uint64_t blocks = 0, stack_blocks = 0, unflagged_stack_blocks = 0;
  // Alloc and Free records in blocks flagged kBlockFlagStacks: the writer puts a block's
  // StackDefs in a block of their own, so that a reader of the stacks decodes no events.
  uint64_t events_in_stack_blocks = 0;
};

// Each complete checkpoint of a trace against the replay at its time: its head's heap totals
// and per-stream counts, and what the replay of the records timed before it holds.
struct CheckpointSeen {
  uint64_t seq = 0, time = 0, prev = 0, interval = 0;
  uint64_t bytes = 0, blocks = 0;                // the head's (heap domain)
  uint64_t replay_bytes = 0, replay_blocks = 0;  // the replay's live heap blocks
  std::string streams_differ;                    // how the per-stream counts differ ("": they agree)
};
std::vector<CheckpointSeen> checkpoints_of(const std::string& path);

Replay replay_trace(const std::string& path);

}  // namespace memtide::test
