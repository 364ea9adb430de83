// Process-level records: ProcessInfo (first record of the process stream) and the periodic
// Counters sample (RSS and VM size from /proc/self/statm, the allocator's in-use bytes).
#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "formats/encoder.h"
#include "recorder/internal.h"

namespace memtide::rec {

namespace {
int g_statm_fd = -1;
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

  size_t on = 0;
  for (const OptionInfo& info : kOptions) {
    const char* v = std::getenv(info.env);
    if (!v) continue;
    const int w = std::snprintf(opts + on, sizeof opts - on, "%s=%s\n", info.env, v);
    if (w < 0 || static_cast<size_t>(w) >= sizeof opts - on) break;
    on += static_cast<size_t>(w);
  }

  timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  const uint64_t realtime = static_cast<uint64_t>(rt.tv_sec) * 1000000000ull + static_cast<uint64_t>(rt.tv_nsec);

  fmt::RecordBuilder b(buf, sizeof buf, fmt::RecordType::ProcessInfo);
  b.varint(static_cast<uint64_t>(getpid())).varint(static_cast<uint64_t>(getppid()));
  b.varint(realtime).varint(g.start_time).varint(static_cast<uint64_t>(g_page_size));
  b.u8(static_cast<uint8_t>(fmt::RecordingMode::Exact)).varint(0).varint(g.opts.max_depth);
  b.varint(static_cast<uint64_t>(g.opts.counter_interval_ms) * 1000000ull);
  b.bytes(exe, std::strlen(exe)).bytes(cwd, std::strlen(cwd));
  b.varint(argc);
  for (size_t i = 0; i < cn;) {
    const size_t len = strnlen(cmdline + i, cn - i);
    b.bytes(cmdline + i, len);
    i += len + 1;
  }
  b.bytes(opts, on);
  const size_t n = b.finish();
  if (n) append_record(s, buf, n);
}

namespace {
uint64_t g_last_heap = 0, g_last_heap_time = 0;  // the writer's last mallinfo2() answer
}  // namespace

void process_counters_reset() {
  g_last_heap = g_last_heap_time = 0;
  if (g_statm_fd >= 0) close(g_statm_fd);
  g_statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
}

void append_counters(Stream* s) {
  uint64_t rss = 0, vm = 0, heap = 0;
  if (g_statm_fd >= 0) {
    char buf[128];
    const ssize_t n = pread(g_statm_fd, buf, sizeof buf - 1, 0);
    if (n > 0) {
      buf[n] = 0;
      unsigned long size = 0, resident = 0;
      if (std::sscanf(buf, "%lu %lu", &size, &resident) == 2) {
        vm = size * static_cast<uint64_t>(g_page_size);
        rss = resident * static_cast<uint64_t>(g_page_size);
      }
    }
  }
  // glibc's own view of its heap. mallinfo2() walks every bin of every arena under the arena's
  // lock, which stalls the program's allocations: it is asked at most every 100 ms and its
  // last answer repeated in between.
  if (g.opts.allocator == AllocatorKind::System) {
    const uint64_t now = now_ns();
    if (g_last_heap_time == 0 || now - g_last_heap_time >= 100000000ull) {
      const struct mallinfo2 mi = mallinfo2();
      g_last_heap = mi.uordblks + mi.hblkhd;
      g_last_heap_time = now;
    }
    heap = g_last_heap;
  }
  uint8_t rec[64];
  pthread_mutex_lock(&g.shared_mutex);
  const uint64_t t = stream_time(s, now_ns());
  fmt::RecordBuilder b(rec, sizeof rec, fmt::RecordType::Counters);
  b.varint(t - s->last_time).varint(rss).varint(vm).varint(heap).varint(0);
  const size_t n = b.finish();
  if (n && append_record(s, rec, n)) s->last_time = t;
  pthread_mutex_unlock(&g.shared_mutex);
}

}  // namespace memtide::rec
