// The state of one trace: everything a trace begins without and builds as it is written, in one
// object, `g_trace`, constant-initialised (hooks may run before any constructor) and built anew
// in place by begin_trace (trace_state.cpp) for each trace the process writes: at program start,
// in a fork child, at an attach and at each attach after a detach. What lives as long as the
// process (the options, the backing allocator, the registry of threads, the recorder's heap, the
// locks) stays in `Recording` (state.h).
//
// A few values of a trace stay outside it, where the measured hot path reads them as plain
// globals beside the other words it touches (a load from a fixed address, no object to reach):
// the clock's epoch (g_clock_epoch, clock.h), the unwinder's kept tables (g_kept_tables,
// unwind.h), whether the watermarks are exact (g_exact_watermarks, clock.h) and the sampling
// state (sampling.h). begin_trace sets each of them, and nothing else does at a trace's start.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "formats/records.h"
#include "recorder/base.h"
#include "recorder/checkpoint_state.h"

namespace memtide::rec {

struct Chunk;

// Where a trace begins; the few real differences between them are in begin_trace.
enum class TraceOrigin {
  kProgramStart,  // the recorder's start-up, preloaded
  kForkChild,     // the child of a fork of a recorded process: a trace of its own
  kAttach,        // the first attach to a running process
  kReattach,      // an attach after a detach: a recorder whose threads keep their states
};

// The writer (writer.cpp): its compression buffers, the queue of sealed chunks, the End.
struct WriterTrace {
  uint8_t* out = nullptr;  // compressed block buffer
  size_t out_cap = 0;
  uint8_t* cut = nullptr;  // a block's payload cut from its chunk (fmt::cut_block)
  size_t cut_cap = 0;
  uint8_t* stacks = nullptr;  // the StackDefs taken out of it
  size_t stacks_cap = 0;
  Chunk* queue_head = nullptr;  // sealed chunks, under recording.queue_mutex
  Chunk* queue_tail = nullptr;
  std::atomic<size_t> queued{0};  // their bytes
  bool stop = false;              // asked to write the End and end
  bool running = false;           // its thread runs
  pthread_t thread{};
  int end_reason = 0;
  uint64_t end_status = 0;
  bool finished = false;   // End written (under done_mutex)
  bool last_pass = false;  // the final pass, before the End record
  uint64_t last_watermark = 0;
  uint32_t quiet_passes = 0;
  unsigned idle_level = 0;
  // Everything recorded before this time (now_ns) is in the file: when the last flush pass
  // began, or when the writer last found nothing to write. A SIGKILL loses what came after it,
  // so an allocating thread that finds it more than two flush intervals old waits for the
  // writer (wait_for_pass): a writer starved of CPU by more busy threads than cores keeps the
  // promise of a loss bounded by the flush interval (about two of them under such load).
  std::atomic<uint64_t> written_up_to{0};
  uint64_t exited_allocs = 0, exited_frees = 0;  // totals of finished streams
  pthread_mutex_t done_mutex = MT_MUTEX_INITIALIZER;
  pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
};

// The trace file or kept set being written (trace_file.cpp).
inline constexpr uint32_t kClosedSlots = 256;  // closed segments remembered, by number modulo it
struct FileTrace {
  dev_t dev = 0;  // the file's identity, to tell a replaced file
  ino_t ino = 0;
  bool write_failed = false;
  // Bytes written (of every segment of a set), and whether the size limit stopped the
  // recording: one more block, the End record's, is written in the room kept for it.
  uint64_t bytes = 0;
  bool pointer_ok = false;  // the header has the checkpoint pointer, written at an offset
  bool capped = false, capped_ended = false;
  fmt::EndReason capped_reason = fmt::EndReason::Detached;
  bool sampled_at_open = false;
  uint64_t last_head = 0;  // the latest checkpoint head: a new segment's header points at it
  // A kept set (MEMTIDE_KEEP): its stem and name, the current segment's number (0: a single
  // file) and its byte 0 in the set's offsets.
  char stem[4096 - 32] = {};  // (room for ".<number>.mtide" in a path)
  char set_name[4096] = {};
  uint32_t segment = 0;
  uint64_t segment_base = 0;
  uint32_t oldest = 1;  // the oldest segment not removed
  uint64_t closed_bytes[kClosedSlots] = {};  // sizes of the closed segments not removed
  uint64_t closed_total = 0;
  uint64_t events_from = 0;  // the current segment's first byte after its prologue
  uint64_t segment_start[kClosedSlots] = {};  // each segment's first byte
  uint64_t base_from = 0;   // the first byte the newest checkpoint's replay needs
  uint64_t base_bytes = 0;  // that checkpoint's size
  uint64_t base_end = 0;    // the first byte after it
  bool keep_too_small = false;  // the set cannot hold two of the latest checkpoint's size
  bool small_keep_said = false;
  bool rotating = false;
};

// The tables each segment of a kept set repeats in its prologue (segments.cpp).
struct SegmentTables {
  struct Bytes {
    uint8_t* data = nullptr;
    size_t size = 0, cap = 0;
    bool append(const uint8_t* p, size_t n);
    void release() {
      mem_free(data);
      *this = Bytes{};
    }
  };
  struct Module {
    uint64_t id, time;
    Bytes rest;  // the record's fields after its dt
  };
  Bytes process;  // the ProcessInfo record
  Bytes stacks;   // every StackDef record so far
  Module* modules = nullptr;
  size_t nmodules = 0, modules_cap = 0;
  fmt::DecodeScratch* scratch = nullptr;
  bool failed = false;  // out of memory: segments lack tables (readers then miss names)
};

// The stack table (stacks.cpp): a trie of return addresses and an index of whole stacks.
struct StackTables {
  struct IndexEntry {
    std::atomic<uint64_t> hash;  // 0: empty
    uint32_t id;
  };
  struct Index {
    uint64_t mask;
    uint64_t used;
    Index* retired;  // previous (smaller) table, kept alive for readers
    IndexEntry slots[];
  };
  struct TrieEntry {
    uint64_t key;
    uint32_t parent;
    uint32_t id;  // 0: empty
  };
  struct Trie {
    uint64_t mask = 0;
    uint64_t used = 0;
    TrieEntry* slots = nullptr;
  };
  std::atomic<Index*> index{nullptr};
  Trie trie;
  uint32_t next_id = 1;  // 0 is the root (empty stack)
};

// The modules the trace has named (modules.cpp).
inline constexpr int kMaxModules = 4096;
struct ModuleTable {
  struct Known {
    uintptr_t bias;
    uint64_t name_hash;
    uint32_t id;
    bool seen;
  };
  Known known[kMaxModules] = {};
  int nknown = 0;
  uint32_t next_id = 1;
};

// The process's counters (process.cpp): /proc/self/statm, read by the writer, and the last
// sample written and not written.
struct ProcessCounters {
  struct Sample {
    uint64_t time = 0, rss = 0, vm = 0;
    bool valid = false;
  };
  int statm_fd = -1;  // opened at the first sample (-1: it could not be)
  bool statm_tried = false;
  Sample written, unwritten;
};

struct TraceState {
  TraceOrigin origin = TraceOrigin::kProgramStart;
  uint64_t start_time = 0;                 // now_ns at its start: its times count from it
  std::atomic<uint32_t> next_stream{1};    // the next thread's stream index (0: the process's)
  // Events a signal handler made while it had interrupted the recorder (note_busy_reentry).
  std::atomic<uint64_t> lost_events{0};
  WriterTrace writer;
  ckpt::CheckpointTrace checkpoint;
  std::atomic<size_t> checkpoint_backlog{0};  // events decoded and not yet applied
  FileTrace file;
  SegmentTables segments;
  StackTables stacks;
  ModuleTable modules;
  ProcessCounters counters;
};
extern TraceState g_trace MT_HIDDEN;

// Begins a trace: gives back what the last one held on the recorder's heap, builds g_trace anew
// in place and sets the hot path's globals (above) for it. With the start mutex held, before the
// trace file is opened; the fork child calls it in its one thread.
void begin_trace(TraceOrigin origin);

}  // namespace memtide::rec
