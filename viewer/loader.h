// The loader: one background thread that reads and analyses traces and builds every view
// model, publishing immutable Snapshots (viewer/snapshot.h). The UI thread only states what
// it wants (a file, a time window, a baseline to compare with, pause) and picks up the latest
// snapshot each frame; it never waits for the loader.
//
// Work is driven by the difference between the wanted state and the published one, most
// urgent first: open a file, analyse a window, load the baseline, build what a view asked for,
// analyse the baseline for the selected window, refresh a live file. A job
// whose input changed while it ran is abandoned at its next check (the analysis is stopped
// from its progress callback; the replay keeps its state in RAII objects, so unwinding out of
// analyze_file is clean).
//
// A file that a recorder is still writing is opened as an analysis::Session that each live
// refresh advances over the blocks appended since the last one; its snapshot replaces the
// whole-trace model, and the symbolizer (with its cache) is kept while the modules stay the same.
// A selected time window is replayed from the checkpoint before it (the file's start when it
// has none) up to its end only: its cost follows its width, not the file's size. On opening,
// the whole run's timeline is read without a replay (scan_timeline) and shown first.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "viewer/snapshot.h"

namespace memtide::viewer {

struct LoaderProgress {
  bool busy = false;
  std::string phase;   // "reading", "symbols", "call trees", ...
  float fraction = 0;  // of the current phase, 0..1 (negative: unknown)
};

class Loader {
 public:
  struct Options {
    std::size_t series_points = 4096;
    std::chrono::milliseconds live_interval{500};  // how often a live file is re-read
    bool follow = true;  // follow files whose recorder is still writing
    // Live refreshes resume one replay (analysis::Session) and read only the appended blocks;
    // false: every refresh analyses the whole file again (for measurements).
    bool incremental = true;
  };
  Loader() : Loader(Options{}) {}
  explicit Loader(Options o);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  void open(const std::string& path);
  void set_window(TimeRange r);  // relative to the trace start; empty: the whole trace
  void open_baseline(const std::string& path);
  void close_baseline();
  void set_paused(bool paused);  // live mode: stop (or resume) refreshing
  // Call trees are built per metric when a view first asks for one (allocated bytes from the
  // start); the Trees view's tables need every metric. Wants only grow.
  void want_metric(analysis::Metric m);
  void want_tables();
  // The leaks and flamegraphs of anonymous mappings or custom pools (heap: always built).
  void want_domain(analysis::Domain d);

  std::shared_ptr<const Snapshot> snapshot() const;
  // Hands a snapshot the UI no longer shows back to the loader thread, which frees it there
  // (freeing call trees and models takes milliseconds: not on the UI thread).
  void retire(std::shared_ptr<const Snapshot> old);
  LoaderProgress progress() const;
  // Nothing wanted is missing and nothing runs (a live file may still be refreshed later).
  bool idle() const;

 private:
  struct Want {
    std::string path;
    uint64_t path_gen = 0;
    TimeRange window;
    uint64_t window_gen = 0;
    std::string baseline;
    uint64_t baseline_gen = 0;
    bool paused = false;
    std::array<bool, kMetricCount> metrics{true};  // Metric::Allocated
    bool tables = false;
    std::array<bool, analysis::kDomainCount> domains{true};  // Domain::Heap
  };
  struct Have {
    uint64_t path_gen = 0, window_gen = 0, baseline_gen = 0;
    bool view_done = false;
  };
  struct Work;  // the loader thread's own state (symbolizers, whole-trace view)
  struct Job;   // one job's inputs and the checks that abandon it when they change
  enum class JobKind : uint8_t { None, Open, Window, Baseline, Extend, CompareWindow, Refresh };

  void run();
  JobKind next_job_locked() const;  // mu_ held
  void open_job(Job& j);
  void window_job(Job& j);
  void baseline_job(Job& j);
  void extend_job(Job& j);
  void compare_window_job(Job& j);
  void refresh_job(Job& j);
  void publish(const std::shared_ptr<Snapshot>& s);
  std::shared_ptr<Snapshot> copy_current() const;
  void set_phase(const char* phase, float fraction);
  bool view_missing_locked() const;  // the published view lacks something wanted (mu_ held)
  // The published comparison is not for the published view's window (mu_ held).
  bool compare_missing_locked() const;

  Options opt_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Want want_;
  Have have_;
  bool quit_ = false;
  bool running_ = false;
  std::shared_ptr<const Snapshot> current_;
  std::vector<std::shared_ptr<const Snapshot>> retired_;
  LoaderProgress progress_;
  std::unique_ptr<Work> work_;
  std::thread thread_;
};

}  // namespace memtide::viewer
