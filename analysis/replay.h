// One streaming replay of a trace into a Model (analysis/model.h).
//
// The trace's per-thread streams are merged by time (formats/merge.h) and replayed in that
// order; a second thread reads and decodes the blocks. Memory: the live blocks (LiveMap, at
// most 128 MiB up to 512K blocks, 43 to 85 bytes each beyond), per distinct stack a few dozen
// bytes per domain, the stack trie (16 bytes per node) and the events of the merger's window
// between two watermarks (32 bytes each, plus up to 32 MiB decoded ahead by the reader
// thread); nothing grows with the length of the trace.
//
//   ReplayOptions o;  o.from = 2'000'000'000;      // "allocations made after 2 s"
//   AnalyzeResult r = analyze_file("trace.mtide", o);
//   if (!r.ok()) { ... r.error ... }  else use r.model
//
// A file that a recorder is still writing is followed with a Session: each advance() replays
// the blocks appended since the previous call, and snapshot() finishes a copy of the state into
// a Model, so a refresh costs time in proportion to the new data (plus a pass over the live
// blocks and the stacks for the snapshot), not to the whole file. analyze_file is a Session
// advanced once and finished.
//
//   Session s;
//   if (std::string e = s.open("w.mtide"); !e.empty()) { ... }
//   for (;;) { s.advance(); show(s.snapshot()); if (!fmt::is_being_written(path)) break; wait(); }
//   s.advance(); s.finish(); show(s.snapshot());
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "analysis/model.h"

namespace memtide::analysis {

struct ReplayOptions {
  // Window of allocations to count, relative to the start of the trace (ns). Unset: unbounded.
  // With `from`, the replay starts at the latest checkpoint at or before it (and before `at`):
  // the model is the same, but for the whole-run figures that only the events before the
  // checkpoint make (the heap's series and the threads' names before it).
  std::optional<uint64_t> from, to;
  // "Live at" time for Metric::LiveAt, relative to the start (ns). Unset: not computed.
  std::optional<uint64_t> at;
  bool per_stack = true;  // false: totals, peak and leaks counts only (faster, less memory)
  bool stack_history = false;  // Model::stack_history: live heap bytes by stack over time (growth)
  std::size_t series_points = 2048;
  // Called now and then with (bytes read, file size).
  std::function<void(uint64_t, uint64_t)> progress;
  // Called with each module as its load is replayed (a SymbolPreload's add, say).
  std::function<void(const ModuleInfo&)> on_module;
};

struct AnalyzeResult {
  std::string error;  // set when the file could not be opened / is not a trace
  std::unique_ptr<Model> model;
  bool ok() const { return error.empty() && model != nullptr; }
};

AnalyzeResult analyze_file(const std::string& path, const ReplayOptions& options = {});
AnalyzeResult analyze_memory(std::span<const uint8_t> data, const ReplayOptions& options = {});

// A resumable replay of one trace (see the top of this file). Not thread-safe: one thread
// calls it at a time. An exception thrown by the progress callback ends advance() and leaves
// the session broken() (blocks read ahead were dropped): start a new one.
class Session {
 public:
  explicit Session(ReplayOptions options = {});
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  // Opens the trace and checks its header; the reason when it cannot be read, else empty.
  std::string open(const std::string& path);
  std::string open_memory(std::span<const uint8_t> data);  // the memory must outlive the session

  struct Progress {
    uint64_t blocks = 0;       // blocks replayed by this call
    uint64_t bytes = 0;        // file bytes consumed by this call (whole blocks)
    bool waiting = false;      // the file ends inside a block (the writer is still at it)
  };
  // Reads every complete block appended since the last call and replays what the streams'
  // watermarks release (events after the latest watermark wait for the next one, or finish()).
  Progress advance();
  // No more blocks will be read: releases the queued events and reports a truncated tail.
  // advance() does nothing afterwards.
  void finish();
  bool finished() const;
  bool broken() const;

  // A Model of everything replayed so far: totals, peak so far, leaks = counted blocks live
  // now, series so far. The session goes on unchanged.
  std::unique_ptr<Model> snapshot() const;

  // The checkpoint a windowed replay started from (its number in the file, 1...), 0 when it
  // replayed from the start (formats/checkpoint.h; MEMTIDE_FULL_REPLAY=1 forces that).
  uint64_t checkpoint() const;
  uint64_t offset() const;      // file offset of the next block to read
  bool fell_behind() const;     // FileReader::fell_behind: open a new session to go on
  uint64_t bytes_read() const;  // bytes fetched from the file since open (FileReader::bytes_read)

 private:
  struct Impl;
  std::unique_ptr<Impl> p_;
};

}  // namespace memtide::analysis
