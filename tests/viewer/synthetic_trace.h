// Small synthetic traces for the viewer tests (tests/trace_builder.h underneath).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "formats/writer.h"
#include "tests/trace_builder.h"

namespace memtide::viewer::test {

inline constexpr uint64_t kStart = 1'000'000'000;  // monotonic start of the synthetic process
inline constexpr uint64_t kMs = 1'000'000;

// One process, one stream (0): the viewer tests' shorthand over test::TraceBuilder.
class Synthetic {
 public:
  // To memory (path empty) or to a file; `lock` holds the writer's flock like a recorder.
  explicit Synthetic(const std::string& path = {}, bool lock = false) : b_(options(path, lock)) {}

  // A chain of stack nodes first..first+n-1 under `parent`, outermost caller first.
  Synthetic& stack(uint64_t first, uint64_t parent, std::initializer_list<uint64_t> ips) {
    b_.stack(0, first, parent, ips);
    return *this;
  }
  Synthetic& malloc(uint64_t t, uint64_t addr, uint64_t size, uint64_t stack) {
    b_.malloc(0, t, addr, size, stack);
    return *this;
  }
  // Any API: anonymous mmap (Api::Mmap), a custom pool's block (Api::Custom), ...
  Synthetic& alloc(uint64_t t, fmt::Api api, uint64_t addr, uint64_t size, uint64_t stack) {
    b_.alloc(0, t, api, addr, size, stack);
    return *this;
  }
  Synthetic& release(uint64_t t, fmt::Api api, uint64_t addr, uint64_t length = 0) {
    b_.release(0, t, api, addr, length);
    return *this;
  }
  Synthetic& free(uint64_t t, uint64_t addr) {
    b_.free(0, t, addr);
    return *this;
  }
  Synthetic& rss(uint64_t t, uint64_t bytes) {
    b_.counters(t, bytes);
    return *this;
  }
  Synthetic& mark(uint64_t t, std::string_view label) {
    b_.marker(t, label);
    return *this;
  }
  // A watermark: what a live view may show so far (docs/FORMAT.md section 8).
  Synthetic& flush(uint64_t t) {
    b_.watermark(t);
    return *this;
  }
  // The leak scan's records (formats/records.h, Scan): one region and its words, complete.
  Synthetic& scan(fmt::ScanKind kind, uint64_t start, uint64_t end,
                  std::initializer_list<std::pair<uint64_t, uint64_t>> refs) {
    b_.scan_region(0, kind, start, end).scan_refs(refs).scan_done(1, (end - start) / 8, refs.size());
    return *this;
  }
  const std::vector<uint8_t>& end(uint64_t t) { return b_.end(t); }
  const std::vector<uint8_t>& close() { return b_.close(); }  // without an End record

 private:
  static memtide::test::TraceBuilder::Options options(const std::string& path, bool lock) {
    memtide::test::TraceBuilder::Options o;
    o.path = path;
    o.lock = lock;
    o.start = kStart;
    o.pid = 4242;
    o.exe = "/usr/bin/synthetic";
    o.argv = {"synthetic", "--work"};
    return o;
  }
  memtide::test::TraceBuilder b_;
};

// The standard test program: main (0x1000) calls work (0x2000) which calls leaf_a (0x3000,
// 3 x 100 bytes, one leaked) and leaf_b (0x4000, 1 x 1000 bytes, freed); main also calls
// init (0x5000, 50 bytes leaked at 1 ms). Stack ids: 1 main, 2 work, 3 leaf_a, 4 leaf_b, 5 init.
inline Synthetic& standard_program(Synthetic& s) {
  s.stack(1, 0, {0x1000}).stack(2, 1, {0x2000}).stack(3, 2, {0x3000}).stack(4, 2, {0x4000}).stack(5, 1, {0x5000});
  s.malloc(1 * kMs, 0x10000, 50, 5);
  s.rss(2 * kMs, 4096);
  s.malloc(10 * kMs, 0x20000, 100, 3).malloc(11 * kMs, 0x20100, 100, 3).malloc(12 * kMs, 0x20200, 100, 3);
  s.mark(15 * kMs, "phase two");
  s.malloc(20 * kMs, 0x30000, 1000, 4);
  s.rss(25 * kMs, 8192);
  s.free(30 * kMs, 0x30000).free(31 * kMs, 0x20000).free(32 * kMs, 0x20100);
  return s;
}

// The standard program plus the other domains: afterwards main maps 64 KiB anonymously at
// 33 ms from map_arena (0x6000, stack 6; still mapped at the end) and 4 KiB at 34 ms, unmapped
// at 36 ms, and takes two blocks of 256 bytes from its own pool (pool_get, 0x7000, stack 7)
// at 35 ms, one released (memtide_free) at 37 ms.
inline Synthetic& program_with_domains(Synthetic& s) {
  standard_program(s);
  s.stack(6, 1, {0x6000}).stack(7, 1, {0x7000});
  s.alloc(33 * kMs, fmt::Api::Mmap, 0x7f0000000000, 65536, 6);
  s.alloc(34 * kMs, fmt::Api::Mmap, 0x7f0000100000, 4096, 6);
  s.alloc(35 * kMs, fmt::Api::Custom, 0x50000, 256, 7).alloc(35 * kMs + 1, fmt::Api::Custom, 0x50100, 256, 7);
  s.release(36 * kMs, fmt::Api::Munmap, 0x7f0000100000, 4096);
  s.release(37 * kMs, fmt::Api::Custom, 0x50000);
  return s;
}

}  // namespace memtide::viewer::test
