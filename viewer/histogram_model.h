// Sizes view model: the heap allocations by size, in power-of-two classes, as `memtide report
// --histogram` counts them (analysis/size_histogram.h), and the background job that reads them
// from the trace. The histogram needs every allocation's size, which the replay's model does
// not keep: the job reads the records of the whole file once, on a thread of its own, when the
// view is first shown (and again for another selected range, and after a live refresh).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "analysis/size_histogram.h"
#include "viewer/serial.h"
#include "viewer/timeline_model.h"

namespace memtide::viewer {

struct HistogramData {
  std::string path;
  uint64_t key = 0;  // what it was made for (HistogramJob::want)
  TimeRange window;  // relative; empty: the whole trace
  std::string error;    // no histogram (a sampled trace, a damaged file)
  std::string warning;  // a truncated tail: the classes count the blocks before it
  std::vector<analysis::SizeClass> classes;  // smallest first; the empty ones between included
  uint64_t allocations = 0, bytes = 0;
  uint64_t most_allocations = 0, most_bytes = 0;  // of a class
  uint64_t serial = next_serial();
};

HistogramData make_histogram(const analysis::SizeHistogramResult& r);

// "0 B .. 1 B", "257 B .. 512 B", "1.00 KiB .. 2.00 KiB".
std::string size_class_label(const analysis::SizeClass& c);
// The axis label under a class: its largest size ("16 B", "4 KiB", "1 MiB").
std::string size_class_tick(const analysis::SizeClass& c);

// Reads a trace's histogram on a thread of its own. Not thread-safe: the UI thread calls it.
class HistogramJob {
 public:
  HistogramJob() = default;
  ~HistogramJob();
  HistogramJob(const HistogramJob&) = delete;
  HistogramJob& operator=(const HistogramJob&) = delete;

  // The histogram of `path` as of `key` (what it depends on: a live file's refreshes, the
  // window) is wanted, of the allocations made in `window` (relative to `time_base`; empty: all):
  // starts a read unless one for it was made. A read of the same file and range goes on to its
  // end (the next read starts after it); one of another file or range is abandoned.
  void want(const std::string& path, uint64_t key, TimeRange window = {}, uint64_t time_base = 0);
  // The newest result (perhaps of an older key), null before the first.
  std::shared_ptr<const HistogramData> result() const;
  bool busy() const { return busy_.load(std::memory_order_acquire); }
  float progress() const { return progress_.load(std::memory_order_relaxed); }
  // The histogram of `path` as of `key` is made.
  bool done(const std::string& path, uint64_t key) const;

 private:
  void stop();
  mutable std::mutex mu_;
  std::shared_ptr<const HistogramData> result_;
  std::thread thread_;
  std::string path_;  // of the read running or last started
  TimeRange window_;
  std::atomic<bool> busy_{false}, stop_{false};
  std::atomic<float> progress_{0};
};

}  // namespace memtide::viewer
