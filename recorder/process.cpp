// Process-level records: ProcessInfo (first record of the process stream) and the periodic
// Counters sample (RSS and VM size from /proc/self/statm), written when they change.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string_view>

#include "formats/encoder.h"
#include "formats/record_builders.h"
#include "recorder/attach.h"
#include "recorder/clock.h"
#include "recorder/process.h"
#include "recorder/sampling.h"
#include "recorder/state.h"
#include "recorder/stream.h"
#include "recorder/trace_file.h"
#include "recorder/trace_state.h"

namespace memtide::rec {

namespace {
long g_page_size = 4096;

// Reads a whole small /proc file into buf (NUL-terminated); returns its length.
size_t read_proc(const char* path, char* buf, size_t cap) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t n = 0;
  while (n + 1 < cap) {
    const ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r <= 0) break;
    n += static_cast<size_t>(r);
  }
  close(fd);
  buf[n] = 0;
  return n;
}
// The arguments of /proc/self/cmdline (`n` bytes, each argument ended by a NUL but perhaps
// the last, cut off), as the range of string views encode_process_info takes.
struct NulSeparated {
  const char* p;
  size_t n;
  uint64_t count;
  struct Iter {
    const char* p;
    const char* end;
    std::string_view operator*() const { return std::string_view(p, strnlen(p, static_cast<size_t>(end - p))); }
    Iter& operator++() {
      p += (**this).size() + 1;
      if (p > end) p = end;
      return *this;
    }
    bool operator!=(const Iter& o) const { return p != o.p; }
  };
  uint64_t size() const { return count; }
  Iter begin() const { return Iter{p, p + n}; }
  Iter end() const { return Iter{p + n, p + n}; }
};
}  // namespace

void append_process_info(Stream* s) {
  static char exe[4096], cwd[4096], cmdline[32768], opts[2048];
  static uint8_t buf[sizeof exe + sizeof cwd + sizeof cmdline + sizeof opts + 4096];
  g_page_size = sysconf(_SC_PAGESIZE);

  const ssize_t en = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[en > 0 ? en : 0] = 0;
  if (!getcwd(cwd, sizeof cwd)) cwd[0] = 0;
  const size_t cn = read_proc("/proc/self/cmdline", cmdline, sizeof cmdline);
  uint64_t argc = 0;
  for (size_t i = 0; i < cn; ++i) argc += cmdline[i] == 0;
  if (cn && cmdline[cn - 1] != 0) ++argc;  // cut off: count the partial last argument

  // The options as the environment gave them at start-up (a forked child's come from its
  // parent's: with --no-follow the variables have left the environment since).
  static size_t on = 0;
  static bool have_opts = false;
  if (const char* given = attach_options_text()) {  // attached: the options as given, each time
    on = strnlen(given, sizeof opts);
    std::memcpy(opts, given, on);
  } else if (!have_opts) {
    have_opts = true;
    for (const OptionInfo& info : kOptions) {
      const char* v = std::getenv(info.env);
      if (!v) continue;
      const int w = std::snprintf(opts + on, sizeof opts - on, "%s=%s\n", info.env, v);
      if (w < 0 || static_cast<size_t>(w) >= sizeof opts - on) break;
      on += static_cast<size_t>(w);
    }
    // Not an option: the program's own malloc, which its allocations went to (readers say
    // that they were not recorded, and the leak gate cannot pass such a trace).
    if (recording.foreign_malloc_in) {
      const int w = std::snprintf(opts + on, sizeof opts - on, "program_malloc=%s\n", recording.foreign_malloc_in);
      if (w > 0 && static_cast<size_t>(w) < sizeof opts - on) on += static_cast<size_t>(w);
    }
  }

  timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  const uint64_t realtime = static_cast<uint64_t>(rt.tv_sec) * 1000000000ull + static_cast<uint64_t>(rt.tv_nsec);

  fmt::ProcessInfo info;
  info.pid = static_cast<uint64_t>(getpid());
  info.ppid = static_cast<uint64_t>(getppid());
  info.realtime_start_ns = realtime;
  info.monotonic_start_ns = g_trace.start_time;
  info.page_size = static_cast<uint64_t>(g_page_size);
  const uint64_t interval = sampling::g_interval.load();
  info.mode = interval ? fmt::RecordingMode::Sampled : fmt::RecordingMode::Exact;
  info.sample_interval = interval;
  info.max_depth = recording.opts.max_depth;
  info.counter_interval_ns = static_cast<uint64_t>(recording.opts.counter_interval_ms) * 1000000ull;
  info.exe = std::string_view(exe, std::strlen(exe));
  info.cwd = std::string_view(cwd, std::strlen(cwd));
  info.options = std::string_view(opts, on);
  const size_t n = fmt::encode_process_info(buf, sizeof buf, info, NulSeparated{cmdline, cn, argc});
  if (n) append_record(s, buf, n);
}

namespace {
// The counters as last read and as last written (the series a reader draws from them).
using CounterSample = ProcessCounters::Sample;

void write_counters(Stream* s, const CounterSample& c) {
  uint8_t rec[64];
  const uint64_t t = stream_time(s, c.time);
  const size_t n = fmt::encode_counters(rec, sizeof rec, s->last_time, fmt::Counters{t, c.rss, c.vm, 0, 0});
  if (n && append_record(s, rec, n)) s->last_time = t;
}
}  // namespace

bool sample_counters(Stream* s, bool write) {
  CounterSample c;
  ProcessCounters& p = g_trace.counters;
  if (!p.statm_tried) {  // (the trace's first sample; out of the program's reach)
    p.statm_tried = true;
    const int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    p.statm_fd = fd >= 0 ? move_out_of_reach(fd, kTraceFdSpare) : -1;
  }
  if (g_trace.counters.statm_fd >= 0) {
    char buf[128];
    const ssize_t n = pread(g_trace.counters.statm_fd, buf, sizeof buf - 1, 0);
    if (n > 0) {
      buf[n] = 0;
      unsigned long size = 0, resident = 0;
      if (std::sscanf(buf, "%lu %lu", &size, &resident) == 2) {
        c.vm = size * static_cast<uint64_t>(g_page_size);
        c.rss = resident * static_cast<uint64_t>(g_page_size);
      }
    }
  }
  // The allocator's own count of its heap is not asked for: glibc's mallinfo2() walks every
  // free chunk of an arena with the arena's lock held, so the program's allocations wait for
  // it, a time that grows with the free chunks (a program with millions of them would spend
  // its time waiting). heap_live_bytes stays 0; the heap comes from the events.
  pthread_mutex_lock(&recording.shared_mutex);
  c.time = now_ns();
  c.valid = true;
  const CounterSample& w = g_trace.counters.written;
  bool moved = false;
  // The same values as the last written: kept back (an idle program's trace does not grow by a
  // record per interval), unless a heartbeat is due. On a change, the last unchanged reading is
  // written first, so that a reader's series steps where the values changed instead of ramping
  // from the last written one.
  if (!write && w.valid && c.rss == w.rss && c.vm == w.vm && c.time - w.time < kCounterHeartbeatNs) {
    g_trace.counters.unwritten = c;
  } else {
    const CounterSample& u = g_trace.counters.unwritten;
    if (u.valid && (c.rss != w.rss || c.vm != w.vm)) write_counters(s, u);
    write_counters(s, c);
    moved = !w.valid || c.rss != w.rss || c.vm != w.vm;
    g_trace.counters.written = c;
    g_trace.counters.unwritten = CounterSample{};
  }
  pthread_mutex_unlock(&recording.shared_mutex);
  return moved;
}

}  // namespace memtide::rec
