// One streaming replay of a trace into a Model (analysis/model.h).
//
// The trace's per-thread streams are merged by time (formats/merge.h) and replayed in that
// order; a second thread reads and decodes the blocks. Memory: the live blocks (LiveMap, 43 to
// 128 bytes each), per distinct stack a few dozen bytes per domain, the stack trie (16 bytes
// per node) and the events of the merger's window between two watermarks (32 bytes each, plus
// up to 128 MiB decoded ahead by the reader thread); nothing grows with the length of the trace.
//
//   ReplayOptions o;  o.from = 2'000'000'000;      // "allocations made after 2 s"
//   AnalyzeResult r = analyze_file("trace.mtide", o);
//   if (!r.ok()) { ... r.error ... }  else use r.model
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
  std::optional<uint64_t> from, to;
  // "Live at" time for Metric::LiveAt, relative to the start (ns). Unset: not computed.
  std::optional<uint64_t> at;
  bool per_stack = true;  // false: totals, peak and leaks counts only (faster, less memory)
  std::size_t series_points = 2048;
  // Called now and then with (bytes read, file size).
  std::function<void(uint64_t, uint64_t)> progress;
};

struct AnalyzeResult {
  std::string error;  // set when the file could not be opened / is not a trace
  std::unique_ptr<Model> model;
  bool ok() const { return error.empty() && model != nullptr; }
};

AnalyzeResult analyze_file(const std::string& path, const ReplayOptions& options = {});
AnalyzeResult analyze_memory(std::span<const uint8_t> data, const ReplayOptions& options = {});

// Peak memory of the calling process so far (VmHWM), for measurements.
uint64_t peak_rss_bytes();

}  // namespace memtide::analysis
