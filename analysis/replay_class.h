// The Replayer (replay.cpp): a visitor whose handlers inline into the loop that plays the merged
// events. Private to the replay's files (replay.cpp, replay_mmap.cpp): the session drives it
// through replayer.h.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "analysis/live_map.h"
#include "analysis/reach.h"
#include "analysis/replay.h"
#include "analysis/replay_state.h"
#include "formats/checkpoint.h"
#include "formats/decoder.h"
#include "formats/sampling.h"

namespace memtide::analysis::detail {

using namespace memtide::fmt;  // (the record types, throughout the handlers)

// ---------------------------------------------------------------------------------------
// [1] Working state: replay_state.h
// ---------------------------------------------------------------------------------------
// [2] Replayer
// ---------------------------------------------------------------------------------------

class Replayer : public NullVisitor {
 public:
  Replayer(Model& m, const ReplayOptions& o) : m_(m), opt_(o), windowed_(o.from || o.to) {
    for (auto& d : dom_) d.per_stack = o.per_stack;
    if (o.stack_history && o.per_stack) dom_[0].history = std::make_unique<HistoryRecorder>(), dom_[0].next_mark = 0;
    m_.per_stack = o.per_stack;
    m_.heap_series = Series(o.series_points);
    m_.rss_series = Series(o.series_points);
    m_.mmap_series = Series(o.series_points);
    m_.custom_series = Series(o.series_points);
  }

  void on_process_info(uint32_t, const ProcessInfo& x) {
    if (m_.have_process) return;
    m_.have_process = true;
    ProcessSummary& p = m_.process;
    p.pid = x.pid;
    p.ppid = x.ppid;
    p.realtime_start_ns = x.realtime_start_ns;
    p.monotonic_start_ns = x.monotonic_start_ns;
    p.page_size = x.page_size;
    p.mode = x.mode;
    p.sample_interval = x.sample_interval;
    interval_ = x.mode == RecordingMode::Sampled ? x.sample_interval : 0;
    if (interval_) m_.sampling.note(0, interval_);
    p.exe = x.exe;
    p.cwd = x.cwd;
    OptionIterator opts(x);
    for (std::string_view name, value; opts.next(name, value);)
      if (name == "program_malloc") p.program_malloc = value;
      else if (name == "attached") p.attached = value == "1";
    ArgvIterator it(x);
    for (std::string_view a; it.next(a);) p.argv.emplace_back(a);
  }
  void on_module_load(uint32_t, const ModuleLoad& x) {
    if (!admit(x.time)) return;
    m_.modules.push_back(module_info(x));
    if (opt_.on_module) opt_.on_module(m_.modules.back());
  }
  void on_module_unload(uint32_t, const ModuleUnload& x) {
    if (!admit(x.time)) return;
    unload_module(m_, x);
  }
  void on_thread_start(uint32_t, const ThreadStart& x) {
    if (!admit(x.time)) return;
    ThreadInfo& t = thread(static_cast<uint32_t>(x.thread));
    t.os_tid = x.os_tid;
    t.parent = static_cast<uint32_t>(x.parent);
    t.start_time = x.time;
  }
  void on_thread_name(uint32_t, const ThreadName& x) {
    if (!admit(x.time)) return;
    thread(static_cast<uint32_t>(x.thread)).name = x.name;
  }
  void on_thread_exit(uint32_t, const ThreadExit& x) {
    if (!admit(x.time)) return;
    thread(static_cast<uint32_t>(x.thread)).exit_time = x.time;
  }
  void on_stack_def(uint32_t, const StackDef& x) { m_.stack_table.define(x.first_id, x.parent_id, x.ips, x.count); }
  void on_counters(uint32_t, const Counters& x) {
    if (!admit(x.time)) return;
    m_.rss_series.add(x.time, x.rss_bytes);
    m_.peak_rss = std::max(m_.peak_rss, x.rss_bytes);
  }
  void on_marker(uint32_t s, const Marker& x) {
    if (s != 0 && x.time < skip_before_) return;  // a thread's, in the checkpoint's heads (seed_marker)
    if (!admit(x.time)) return;
    if (x.switches_sampling()) switch_sampling(x.time, x.sampling_interval());
    if (m_.markers.size() >= 100000) {
      ++m_.markers_dropped;
      return;
    }
    m_.markers.push_back({x.time, ThreadId(s), std::string(x.label)});
  }
  void on_watermark(uint32_t, const Watermark& x) { admit(x.time); }
  // memtide_sample(): the recording switched between exact and sampled (a Marker's field).
  void switch_sampling(uint64_t time, uint64_t interval) {
    if (interval_ == 0 && interval != 0 && (live_[0].size() || live_[1].size())) convert_exact_blocks(time);
    interval_ = interval;
    m_.sampling.note(time, interval);
  }
  void on_end(uint32_t, const End& x) {
    if (!admit(x.time)) return;  // (a window that stops before it: the session reads it from the tail)
    m_.complete = true;
    m_.end = x;
  }
  // (After a window's stop: the names are read from the tail by the session, and the scan at
  // exit is of the blocks live at the end, not at the window's.)
  void on_symbols(uint32_t, const Symbols& x) {
    if (!passed_) add_embedded(m_, x);
  }
  void on_scan(uint32_t, const Scan& x) {
    if (!passed_) scan_.add(x);
  }

  void on_alloc(uint32_t stream, const Alloc& a) {
    if (windowed_)
      alloc<true>(stream, a);
    else
      alloc<false>(stream, a);
  }
  void on_free(uint32_t stream, const Free& f) {
    if (windowed_)
      free<true>(stream, f);
    else
      free<false>(stream, f);
  }
  // W: whether the statistics have a window (from/to), so that a block may not be counted;
  // the replay of a whole trace (no window) is compiled without those tests.
  bool windowed() const { return windowed_; }
  // A kept trace read from its first checkpoint without a window (replayer.h): the blocks seeded
  // from it keep their stacks, and those never freed are leaks (before_range_*).
  void count_before_range() { before_range_ = true; }
  template <bool W>
  [[gnu::always_inline]] void alloc(uint32_t stream, const Alloc& a) {
    if (W && (a.time < skip_before_ || a.time > edge_)) [[unlikely]] {
      // Before the checkpoint the replay started from (in its live blocks), or past the window.
      if (a.time < skip_before_ || !edge(a.time)) return;
    }
    note_time(a.time);
    ++m_.events;
    const uint64_t bytes = std::min<uint64_t>(a.size, kMaxBlockBytes);
    switch (api_class(a.api)) {
      case ApiClass::Heap: [[likely]] heap_alloc<Domain::Heap, W>(stream, a, bytes); return;
      case ApiClass::Mmap: mmap_alloc(stream, a, std::min<uint64_t>(a.weight ? a.weight : a.size, kMaxBlockBytes)); return;
      case ApiClass::Custom: heap_alloc<Domain::Custom, W>(stream, a, bytes); return;
      case ApiClass::Bad: ++m_.anomalies.bad_records; return;
    }
  }
  template <bool W>
  [[gnu::always_inline]] void free(uint32_t stream, const Free& f) {
    if (W && (f.time < skip_before_ || f.time > edge_)) [[unlikely]] {
      if (f.time < skip_before_ || !edge(f.time)) return;
    }
    note_time(f.time);
    ++m_.events;
    switch (api_class(f.api)) {
      case ApiClass::Heap: [[likely]] heap_free<Domain::Heap, W>(stream, f); return;
      case ApiClass::Mmap: mmap_free(stream, f); return;
      case ApiClass::Custom: heap_free<Domain::Custom, W>(stream, f); return;
      case ApiClass::Bad: ++m_.anomalies.bad_records; return;
    }
  }

  // The heap's live map slot where the block at `addr` would be (play(): a few events ahead,
  // so that the slot is in cache when its event comes).
  [[gnu::always_inline]] void prefetch_heap_block(uint64_t addr) const { live_[0].prefetch(addr); }

  // Finishes `out`, a copy of the model being built, as if the trace ended here: leaks, peaks
  // by stack, threads, warnings. The replay's own state is not changed, so it can go on.
  void finish_into(Model& out) const;
  // Whether the replay went past the window's stop (its end, or `at` when later): the session
  // reads no further.
  bool passed() const { return passed_; }
  // A windowed replay from a checkpoint (replayer.h): its live blocks, not counted, and its time,
  // before which events are in them.
  void seed(CheckpointDomain d, const CheckpointEntry& e);
  void seed_done(const CheckpointHead& h);
  void seed_marker(const CheckpointHead::MarkerCopy& x) {
    if (x.sampling) m_.sampling.note(x.time, x.sampling - 1);
    if (m_.markers.size() < 100000) m_.markers.push_back({x.time, ThreadId(static_cast<uint32_t>(x.stream)), x.label});
    else ++m_.markers_dropped;
  }

 private:
  [[gnu::always_inline]] void note_time(uint64_t t) {
    if (!based_) [[unlikely]]
      set_base(t);
    if (t > m_.last_time) m_.last_time = t;
    if (t > m_.at_time && !at_done_) [[unlikely]]
      snapshot_at();
  }
  void set_base(uint64_t first) {
    based_ = true;
    apply_base(m_, first);
    // A window with an end stops there (or at `at`, later): nothing after it changes its figures.
    if (windowed_ && opt_.to) {
      stop_ = std::max(m_.window_to, opt_.at ? m_.at_time : 0);
      edge_ = m_.window_to < stop_ ? m_.window_to : stop_;
    }
  }
  // Whether a record timed `t` is replayed: not after the window's stop (edge() past it).
  [[gnu::always_inline]] bool admit(uint64_t t) {
    if (t > edge_) [[unlikely]]
      if (!edge(t)) return false;
    note_time(t);
    return true;
  }
  // A record after the window's end (edge_): past the stop, nothing more is replayed; before it
  // (`at` later than the window's end), the window's figures are frozen as they stand.
  [[gnu::noinline]] bool edge(uint64_t t) {
    if (t > stop_) {
      passed_ = true;
      return false;
    }
    freeze();
    edge_ = stop_;
    return true;
  }
  void apply_base(Model& m, uint64_t first) const {
    m.first_time = first;
    m.time_base = m.have_process && m.process.monotonic_start_ns && m.process.monotonic_start_ns <= first
                      ? m.process.monotonic_start_ns
                      : first;
    m.last_time = first;
    if (opt_.from) m.window_from = m.time_base + *opt_.from;
    if (opt_.to) m.window_to = *opt_.to > UINT64_MAX - m.time_base ? UINT64_MAX : m.time_base + *opt_.to;
    if (opt_.at) m.at_time = *opt_.at > UINT64_MAX - m.time_base ? UINT64_MAX - 1 : m.time_base + *opt_.at;
  }
  void snapshot_at() {
    at_done_ = true;
    for (auto& d : dom_) d.snapshot_at();
  }
  bool counted(uint64_t t) const { return t >= m_.window_from && t <= m_.window_to; }

  ThreadInfo& thread(uint32_t id) {
    auto [it, fresh] = thread_index_.try_emplace(id, static_cast<uint32_t>(m_.threads.size()));
    if (fresh) {
      m_.threads.emplace_back();
      m_.threads.back().id = ThreadId(id);
    }
    return m_.threads[it->second];
  }
  // Per-thread counters of the stream, or nullptr for an implausible stream number.
  [[gnu::always_inline]] ThreadWork* thread_work(uint32_t stream) {
    if (stream < threads_size_) [[likely]]
      return &threads_data_[stream];
    if (stream >= kMaxThreadSlots) return nullptr;
    threads_.resize(stream + 1);
    threads_data_ = threads_.data();
    threads_size_ = threads_.size();
    return &threads_[stream];
  }

  // The domain of an api (one lookup for every event), or Bad for an unknown one.
  enum class ApiClass : uint8_t { Heap, Mmap, Custom, Bad };
  static ApiClass api_class(Api a) {
    static constexpr struct Table {
      ApiClass c[256];
      constexpr Table() : c{} {
        for (unsigned i = 0; i < 256; ++i) {
          const Domain d = domain_of(static_cast<Api>(i));
          c[i] = i >= kApiCount ? ApiClass::Bad : d == Domain::Mmap ? ApiClass::Mmap : d == Domain::Custom ? ApiClass::Custom : ApiClass::Heap;
        }
      }
    } table;
    return table.c[static_cast<uint8_t>(a)];
  }
  // A heap-like domain's block (D: Heap or Custom; W: windowed()).
  template <Domain D, bool W>
  void heap_alloc(uint32_t stream, const Alloc& a, uint64_t bytes);
  template <Domain D, bool W>
  void heap_free(uint32_t stream, const Free& f);
  template <Domain D, bool W>
  void release(uint64_t addr, const LiveBlock& b, uint64_t time);
  // What the live block at `addr` stands for; a sampled one's weight is forgotten if `forget`.
  Weighted weighted(unsigned map, uint64_t addr, const LiveBlock& b, bool forget) {
    if (!b.sampled) [[likely]]
      return {b.bytes, 1};
    return weighted_slow(map, addr, b, forget);
  }
  [[gnu::noinline]] Weighted weighted_slow(unsigned map, uint64_t addr, const LiveBlock& b, bool forget);
  void convert_exact_blocks(uint64_t time);
  void unknown_free(Domain d, uint32_t stream, const Free& f);
  void mmap_alloc(uint32_t stream, const Alloc& a, uint64_t bytes);
  void mmap_free(uint32_t stream, const Free& f);
  uint64_t unmap(uint64_t lo, uint64_t hi, uint64_t time);

  Model& m_;
  const ReplayOptions& opt_;
  uint64_t mmap_all_live_ = 0, custom_all_live_ = 0;  // every live mapping / custom block, for the series
  bool based_ = false;
  bool at_done_ = false;
  const bool windowed_;
  DomainState dom_[kDomainCount];
  LiveMap<LiveBlock> live_[2];  // heap, custom
  uint64_t heap_all_live_ = 0;  // every live heap block, for the series
  std::vector<ThreadWork> threads_;  // by stream
  ThreadWork* threads_data_ = nullptr;  // threads_'s data and size, for thread_work()
  std::size_t threads_size_ = 0;
  std::unordered_map<uint32_t, uint32_t> thread_index_;
  std::map<uint64_t, MapRange> ranges_;  // mmap: start -> range
  std::unordered_map<uint64_t, Mapping> mappings_;
  uint64_t next_mapping_ = 1;
  std::map<std::tuple<uint64_t, uint8_t, uint8_t>, size_t> mismatch_index_;
  std::map<std::tuple<uint8_t, uint32_t, uint8_t>, size_t> unknown_index_;
  ScanData scan_;  // the leak scan at exit
  // Sampled recording: the interval in effect (0: exact), and the weights of the live sampled
  // blocks (heap, custom) by address.
  uint64_t interval_ = 0;
  std::unordered_map<uint64_t, uint64_t> weights_[2];
  uint64_t skip_before_ = 0;  // (windowed) the checkpoint's time
  // A kept trace's range (count_before_range()): the blocks not counted are those made before it.
  bool before_range_ = false;
  // A window with an end: the time after which nothing is replayed (its end, or `at` when
  // later), the next time at which something happens (the window's end when `at` is later:
  // freeze()), and whether a record past the stop was seen.
  uint64_t stop_ = UINT64_MAX, edge_ = UINT64_MAX;
  bool passed_ = false;
  // The window's figures as they stood at its end, when `at` is later (replay.cpp, freeze()):
  // only the figures live at `at` come from the replay after it.
  std::unique_ptr<Model> frozen_;
  void freeze();
  void finish_own(Model& out) const;
};

}  // namespace memtide::analysis::detail
