// Synthetic traces for the tests of the analysis and of the viewer, written with
// formats/writer.h (no recorder): into memory or to a file, one record per call.
//
//   test::TraceBuilder b;                        // in memory, process start at kStart
//   b.stack(1, 1, 0, {0x1000}).malloc(1, 10, 0x10, 48, 1).free(1, 20, 0x10);
//   const std::vector<uint8_t>& bytes = b.end(30);
//
// Times are relative to the process start (Options::start).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "formats/encoder.h"
#include "formats/writer.h"

namespace memtide::test {

class TraceBuilder {
 public:
  static constexpr uint64_t kStart = 1'000'000;  // default monotonic start of the synthetic process

  struct Options {
    std::string path;  // empty: into memory (bytes())
    bool lock = false;  // hold the writer's flock, like a recorder that is still running
    // The raw payload size at which a block is flushed (small: many blocks).
    std::size_t block_bytes = fmt::TraceWriter::Options{}.block_bytes;
    uint64_t start = kStart;
    uint32_t pid = 42;
    std::string exe = "/synthetic";
    std::vector<std::string> argv;
    uint64_t sample_interval = 0;  // a sampled recording from the start (ProcessInfo's mode)
    std::string options;           // ProcessInfo's `name=value` lines
  };

  explicit TraceBuilder(Options o) : start_(o.start) {
    fmt::TraceWriter::Options wo;
    wo.lock = o.lock;
    wo.block_bytes = o.block_bytes;
    if (o.path.empty())
      w_.open_memory(bytes_, wo);
    else
      w_.open(o.path, wo);
    fmt::ProcessInfo p;
    p.pid = o.pid;
    p.ppid = 1;
    p.monotonic_start_ns = o.start;
    p.exe = o.exe;
    p.options = o.options;
    if (o.sample_interval) {
      p.mode = fmt::RecordingMode::Sampled;
      p.sample_interval = o.sample_interval;
    }
    const std::vector<std::string_view> argv(o.argv.begin(), o.argv.end());
    w_.append(0, p, argv);
  }
  // In memory, with `block_bytes` as above.
  explicit TraceBuilder(std::size_t block_bytes = fmt::TraceWriter::Options{}.block_bytes)
      : TraceBuilder(with_block_bytes(block_bytes)) {}

  uint64_t start() const { return start_; }

  // Defines a chain of nodes first..first+n-1 under `parent` with the given return addresses,
  // outermost caller first.
  TraceBuilder& stack(uint32_t stream, uint64_t first, uint64_t parent, std::initializer_list<uint64_t> ips) {
    std::vector<uint64_t> v(ips);
    fmt::StackDef d;
    d.first_id = first;
    d.parent_id = parent;
    d.count = static_cast<uint32_t>(v.size());
    d.ips = v.data();
    w_.append(stream, d);
    return *this;
  }
  // Leak scan records (formats/records.h, Scan), as the recorder writes them at exit.
  TraceBuilder& scan_region(uint64_t index, fmt::ScanKind kind, uint64_t start, uint64_t end) {
    uint8_t buf[64];
    const std::size_t n = fmt::encode_scan_region(buf, sizeof buf, index, kind, start, end);
    w_.append_record(0, {buf, n});
    return *this;
  }
  // (address of the word, its value) pairs, addresses ascending.
  TraceBuilder& scan_refs(std::initializer_list<std::pair<uint64_t, uint64_t>> refs) {
    std::vector<uint64_t> locs, values;
    for (const auto& [l, v] : refs) locs.push_back(l), values.push_back(v);
    std::vector<uint8_t> buf(16 + 24 * refs.size());
    const std::size_t n = fmt::encode_scan_refs(buf.data(), buf.size(), locs.data(), values.data(), locs.size());
    w_.append_record(0, {buf.data(), n});
    return *this;
  }
  TraceBuilder& scan_done(uint64_t regions, uint64_t words, uint64_t refs) {
    uint8_t buf[64];
    const std::size_t n = fmt::encode_scan_done(buf, sizeof buf, regions, words, refs, 1000);
    w_.append_record(0, {buf, n});
    return *this;
  }
  // Any API: malloc, anonymous mmap (Api::Mmap), a custom pool's block (Api::Custom), ...
  // `weight`: a sampled block standing for that many bytes (its SampleWeight record first).
  TraceBuilder& alloc(uint32_t stream, uint64_t t, fmt::Api api, uint64_t addr, uint64_t size, uint64_t stack,
                      uint64_t weight = 0) {
    fmt::Alloc a;
    a.time = start_ + t;
    a.api = api;
    a.addr = addr;
    a.size = size;
    a.stack = stack;
    a.weight = weight;
    w_.append(stream, a);
    return *this;
  }
  TraceBuilder& malloc(uint32_t stream, uint64_t t, uint64_t addr, uint64_t size, uint64_t stack) {
    return alloc(stream, t, fmt::Api::Malloc, addr, size, stack);
  }
  // A sampled malloc standing for `weight` bytes.
  TraceBuilder& sampled_malloc(uint32_t stream, uint64_t t, uint64_t addr, uint64_t size, uint64_t weight, uint64_t stack) {
    return alloc(stream, t, fmt::Api::Malloc, addr, size, stack, weight);
  }
  // memtide_sample(interval) at `t`: the Marker with the switch in its sampling field.
  TraceBuilder& switch_sampling(uint64_t t, uint64_t interval) {
    fmt::Marker m;
    m.time = start_ + t;
    m.label = "memtide: switch";
    m.sampling = interval + 1;
    w_.append(0, m);
    return *this;
  }
  TraceBuilder& release(uint32_t stream, uint64_t t, fmt::Api api, uint64_t addr, uint64_t length = 0) {
    fmt::Free f;
    f.time = start_ + t;
    f.api = api;
    f.addr = addr;
    f.length = length;
    w_.append(stream, f);
    return *this;
  }
  TraceBuilder& free(uint32_t stream, uint64_t t, uint64_t addr) { return release(stream, t, fmt::Api::Free, addr); }
  TraceBuilder& counters(uint64_t t, uint64_t rss) {
    fmt::Counters c;
    c.time = start_ + t;
    c.rss_bytes = rss;
    w_.append(0, c);
    return *this;
  }
  TraceBuilder& marker(uint64_t t, std::string_view label) {
    fmt::Marker m;
    m.time = start_ + t;
    m.label = label;
    w_.append(0, m);
    return *this;
  }
  TraceBuilder& module(uint64_t t, uint64_t id, const std::string& path, uint64_t bias, uint64_t vaddr, uint64_t memsz,
                       const std::string& build_id) {
    path_ = path;
    build_id_ = build_id;
    fmt::ModuleLoad m;
    m.time = start_ + t;
    m.module_id = id;
    m.load_bias = bias;
    m.path = path_;
    m.build_id = build_id_;
    m.nseg = 1;
    m.segments[0] = {vaddr, memsz, fmt::kSegRead | fmt::kSegExec};
    w_.append(0, m);
    return *this;
  }
  // A watermark (which also writes out every stream's pending records).
  TraceBuilder& watermark(uint64_t t) {
    w_.watermark(start_ + t);
    return *this;
  }
  // A record that cannot be read (a Marker whose length runs past its block): what a block
  // written by a broken recorder holds.
  TraceBuilder& bad_record(uint32_t stream) {
    const uint8_t bad[] = {fmt::tag_of(fmt::RecordType::Marker), 50};
    w_.append_record(stream, bad);
    return *this;
  }
  TraceBuilder& flush() {
    w_.flush_all();
    return *this;
  }
  // Ends the trace with an End record (a trace without one looks killed).
  const std::vector<uint8_t>& end(uint64_t t) {
    fmt::End e;
    e.time = start_ + t;
    w_.end(e);
    w_.close();
    return bytes_;
  }
  const std::vector<uint8_t>& close() {
    w_.close();
    return bytes_;
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  static Options with_block_bytes(std::size_t block_bytes) {
    Options o;
    o.block_bytes = block_bytes;
    return o;
  }

  uint64_t start_;
  std::vector<uint8_t> bytes_;
  fmt::TraceWriter w_;
  std::string path_, build_id_;
};

}  // namespace memtide::test
