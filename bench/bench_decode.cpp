// bench_decode: how fast a trace reads back.
//
//   bench_decode [--events N] [--streams S] [--runs R] [--keep PATH]
//
// Writes a synthetic trace (default 20M alloc/free events over 4 streams, watermarks every
// simulated millisecond) with TraceWriter to a temporary file, then times, median of R runs:
//   file order   FileReader + LZ4 + decode_block with a template visitor that sums fields
//   virtual      the same through RecordVisitor (one virtual call per record)
//   merged       FileReader + EventMerger (global time order) with the template visitor
// and prints events/s and bytes/event.
//
// The workload imitates a program's allocator traffic: per-thread size-class free lists with
// LIFO reuse and bump allocation (so address deltas are mostly small), mostly small sizes with
// a heavy tail, ~5000 call stacks with a skewed popularity, frees biased to recent blocks.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "formats/decoder.h"
#include "formats/merge.h"
#include "formats/reader.h"
#include "formats/writer.h"

namespace {

using namespace memtide::fmt;
using Clock = std::chrono::steady_clock;

struct Args {
  uint64_t events = 20'000'000;
  unsigned streams = 4;
  int runs = 5;
  std::string keep;
};

// ---------------------------------------------------------------------------------------
// Synthetic workload
// ---------------------------------------------------------------------------------------

struct ThreadSim {
  std::mt19937_64 rng;
  uint64_t time = 0;
  uint64_t arena = 0;
  uint64_t bump = 0;
  std::vector<std::vector<uint64_t>> free_lists;  // per size class
  struct Live {
    uint64_t addr;
    uint32_t cls;
  };
  std::vector<Live> live;

  static uint32_t size_class(uint64_t size) {
    return size <= 16 ? 0 : static_cast<uint32_t>(64 - __builtin_clzll(size - 1)) - 4;  // 16, 32, 64, ...
  }
  static uint64_t class_size(uint32_t cls) { return 16ull << cls; }
};

uint64_t draw_size(std::mt19937_64& rng) {
  // Mostly 8..256 bytes, sometimes KiBs, rarely MiBs.
  const double u = std::uniform_real_distribution<double>(0, 1)(rng);
  if (u < 0.85) return 8 + rng() % 249;
  if (u < 0.99) return 256 + rng() % 8000;
  return 65536 + rng() % (4 << 20);
}

uint64_t draw_stack(std::mt19937_64& rng) {
  // Skewed popularity over ~5000 stacks: a few sites make most allocations.
  const double u = std::uniform_real_distribution<double>(0, 1)(rng);
  return 1 + static_cast<uint64_t>(std::pow(u, 3.0) * 5000);
}

void write_trace(const std::string& path, const Args& a) {
  TraceWriter w;
  w.open(path);
  ProcessInfo pi;
  pi.pid = 1234;
  pi.page_size = 4096;
  pi.exe = "/usr/bin/bench-workload";
  pi.cwd = "/";
  const std::string_view argv[] = {"bench-workload"};
  w.append(0, pi, argv);
  // Stack definitions: a trie of plausible depth.
  {
    std::mt19937_64 rng(7);
    std::vector<uint64_t> ips(24);
    for (uint64_t id = 1; id <= 5000; id += 24) {
      for (auto& ip : ips) ip = 0x555555554000 + rng() % 0x200000;
      w.append(0, StackDef{id, id > 24 ? rng() % (id - 1) + 1 : 0, 24, ips.data()});
    }
  }
  std::vector<ThreadSim> th(a.streams);
  for (unsigned i = 0; i < a.streams; ++i) {
    th[i].rng.seed(100 + i);
    th[i].arena = 0x7f0000000000ull + (static_cast<uint64_t>(i) << 32);
    th[i].bump = th[i].arena;
    th[i].free_lists.resize(24);
    th[i].time = 1000 + i;
  }
  uint64_t next_watermark = 1'000'000;
  for (uint64_t n = 0; n < a.events; ++n) {
    // The thread with the earliest clock acts next (keeps the file roughly in time order,
    // as a real recorder's would be).
    unsigned s = 0;
    for (unsigned i = 1; i < a.streams; ++i)
      if (th[i].time < th[s].time) s = i;
    ThreadSim& t = th[s];
    t.time += 20 + t.rng() % 200;
    const bool do_free = !t.live.empty() && (t.live.size() > 20000 || t.rng() % 100 < 48);
    if (do_free) {
      // Recent blocks die young: pick from the end most of the time.
      const std::size_t k = t.rng() % 10 < 7 ? t.live.size() - 1 - t.rng() % std::min<std::size_t>(t.live.size(), 16)
                                              : t.rng() % t.live.size();
      const auto victim = t.live[k];
      t.live[k] = t.live.back();
      t.live.pop_back();
      t.free_lists[victim.cls].push_back(victim.addr);
      w.append(s + 1, Free{t.time, victim.addr, 0, Api::Free});
    } else {
      const uint64_t size = draw_size(t.rng);
      const uint32_t cls = std::min<uint32_t>(ThreadSim::size_class(size), 23);
      uint64_t addr;
      if (!t.free_lists[cls].empty()) {
        addr = t.free_lists[cls].back();
        t.free_lists[cls].pop_back();
      } else {
        addr = t.bump;
        t.bump += ThreadSim::class_size(cls);
      }
      t.live.push_back({addr, cls});
      w.append(s + 1, Alloc{t.time, addr, size, draw_stack(t.rng), 0, t.rng() % 8 == 0 ? Api::New : Api::Malloc});
    }
    if (t.time >= next_watermark) {
      w.watermark(t.time);
      next_watermark += 1'000'000;
    }
  }
  uint64_t end_time = 0;
  for (const auto& t : th) end_time = std::max(end_time, t.time);
  w.end(End{end_time + 1, EndReason::Exit, 0, 0, 0, 0});
  w.close();
}

// ---------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------

struct SumVisitor : NullVisitor {
  uint64_t events = 0, sum = 0;
  void on_alloc(uint32_t, const Alloc& x) {
    ++events;
    sum += x.addr + x.size + x.stack + x.time;
  }
  void on_free(uint32_t, const Free& x) {
    ++events;
    sum += x.addr + x.time;
  }
};

struct VirtualSumVisitor : RecordVisitor {
  uint64_t events = 0, sum = 0;
  void on_alloc(uint32_t, const Alloc& x) override {
    ++events;
    sum += x.addr + x.size + x.stack + x.time;
  }
  void on_free(uint32_t, const Free& x) override {
    ++events;
    sum += x.addr + x.time;
  }
};

// CPU time of this thread: the machine may be shared, and the target is events/s per core.
double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Timing {
  double seconds = 0;  // CPU
  double wall = 0;
  uint64_t events = 0, sum = 0;
  uint64_t peak_buffer = 0;
};

template <class V>
Timing decode_file_order(const std::string& path) {
  const auto t0 = Clock::now();
  const double c0 = cpu_now();
  FileReader r;
  if (!r.open(path).ok()) std::abort();
  RecordDecoder dec;
  V v;
  ReadResult res;
  if constexpr (std::is_base_of_v<RecordVisitor, V>) {
    RecordVisitor& base = v;  // through the vtable, as a plugin-style consumer would
    res = read_records(r, dec, base);
  } else {
    res = read_records(r, dec, v);
  }
  if (!res.end_of_file()) std::abort();
  return {cpu_now() - c0, std::chrono::duration<double>(Clock::now() - t0).count(), v.events, v.sum, 0};
}

Timing decode_merged(const std::string& path) {
  const auto t0 = Clock::now();
  const double c0 = cpu_now();
  FileReader r;
  if (!r.open(path).ok()) std::abort();
  EventMerger m;
  SumVisitor v;
  if (!read_merged(r, m, v).end_of_file()) std::abort();
  return {cpu_now() - c0, std::chrono::duration<double>(Clock::now() - t0).count(), v.events, v.sum,
          m.stats().peak_buffered_bytes};
}

template <class F>
void measure(const char* name, int runs, uint64_t file_size, F f) {
  std::vector<double> secs, walls;
  Timing last;
  for (int i = 0; i < runs; ++i) {
    last = f();
    secs.push_back(last.seconds);
    walls.push_back(last.wall);
  }
  std::sort(secs.begin(), secs.end());
  std::sort(walls.begin(), walls.end());
  const double med = secs[secs.size() / 2], wall = walls[walls.size() / 2];
  std::printf("%-12s %7.3f s cpu (%7.3f s wall)  %6.1f M events/s/core  %6.1f MB/s of file", name, med, wall,
              static_cast<double>(last.events) / med / 1e6, static_cast<double>(file_size) / med / 1e6);
  if (last.peak_buffer) std::printf("  (merge buffer peak %.1f KiB)", static_cast<double>(last.peak_buffer) / 1024);
  std::printf("  [checksum %016" PRIx64 "]\n", last.sum);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_decode: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--events")
      a.events = std::strtoull(value(), nullptr, 10);
    else if (arg == "--streams")
      a.streams = static_cast<unsigned>(std::max(1ul, std::strtoul(value(), nullptr, 10)));
    else if (arg == "--runs")
      a.runs = std::max(1, std::atoi(value()));
    else if (arg == "--keep")
      a.keep = value();
    else {
      std::fprintf(stderr, "usage: bench_decode [--events N] [--streams S] [--runs R] [--keep PATH]\n");
      return 2;
    }
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = !a.keep.empty() ? a.keep
                                           : std::string(tmp ? tmp : "/tmp") + "/bench_decode_" +
                                                 std::to_string(::getpid()) + ".mtide";
  const auto t0 = Clock::now();
  write_trace(path, a);
  const double write_s = std::chrono::duration<double>(Clock::now() - t0).count();
  FileReader r;
  if (!r.open(path).ok()) return 1;
  const uint64_t size = r.size();
  std::printf("trace: %" PRIu64 " alloc/free events in %u streams, %.1f MB on disk, %.2f bytes/event (written in %.1f s)\n",
              a.events, a.streams, static_cast<double>(size) / 1e6, static_cast<double>(size) / static_cast<double>(a.events),
              write_s);
  std::printf("median of %d runs (file in page cache):\n", a.runs);
  measure("file order", a.runs, size, [&] { return decode_file_order<SumVisitor>(path); });
  measure("virtual", a.runs, size, [&] { return decode_file_order<VirtualSumVisitor>(path); });
  measure("merged", a.runs, size, [&] { return decode_merged(path); });
  if (a.keep.empty()) ::unlink(path.c_str());
  return 0;
}
