// Synthetic traces for the analysis tests, written with formats/writer.h into memory.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "analysis/replay.h"
#include "formats/writer.h"

namespace memtide::test {

class TraceBuilder {
 public:
  static constexpr uint64_t kStart = 1'000'000;  // monotonic start of the synthetic process

  // `block_bytes`: the raw payload size at which a block is flushed (small: many blocks).
  explicit TraceBuilder(std::size_t block_bytes = fmt::TraceWriter::Options{}.block_bytes) {
    fmt::TraceWriter::Options o;
    o.lock = false;
    o.block_bytes = block_bytes;
    w_.open_memory(bytes_, o);
    fmt::ProcessInfo p;
    p.pid = 42;
    p.monotonic_start_ns = kStart;
    p.exe = "/synthetic";
    w_.append(0, p, {});
  }

  // Defines a chain of nodes first..first+n-1 under `parent` with the given return addresses.
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
  // Times are relative to kStart.
  TraceBuilder& alloc(uint32_t stream, uint64_t t, fmt::Api api, uint64_t addr, uint64_t size, uint64_t stack) {
    fmt::Alloc a;
    a.time = kStart + t;
    a.api = api;
    a.addr = addr;
    a.size = size;
    a.stack = stack;
    w_.append(stream, a);
    return *this;
  }
  TraceBuilder& malloc(uint32_t stream, uint64_t t, uint64_t addr, uint64_t size, uint64_t stack) {
    return alloc(stream, t, fmt::Api::Malloc, addr, size, stack);
  }
  TraceBuilder& release(uint32_t stream, uint64_t t, fmt::Api api, uint64_t addr, uint64_t length = 0) {
    fmt::Free f;
    f.time = kStart + t;
    f.api = api;
    f.addr = addr;
    f.length = length;
    w_.append(stream, f);
    return *this;
  }
  TraceBuilder& free(uint32_t stream, uint64_t t, uint64_t addr) { return release(stream, t, fmt::Api::Free, addr); }
  TraceBuilder& counters(uint64_t t, uint64_t rss) {
    fmt::Counters c;
    c.time = kStart + t;
    c.rss_bytes = rss;
    w_.append(0, c);
    return *this;
  }
  TraceBuilder& module(uint64_t t, uint64_t id, const std::string& path, uint64_t bias, uint64_t vaddr, uint64_t memsz,
                       const std::string& build_id) {
    path_ = path;
    build_id_ = build_id;
    fmt::ModuleLoad m;
    m.time = kStart + t;
    m.module_id = id;
    m.load_bias = bias;
    m.path = path_;
    m.build_id = build_id_;
    m.nseg = 1;
    m.segments[0] = {vaddr, memsz, fmt::kSegRead | fmt::kSegExec};
    w_.append(0, m);
    return *this;
  }
  TraceBuilder& watermark(uint64_t t) {
    w_.watermark(kStart + t);
    return *this;
  }
  TraceBuilder& flush() {
    w_.flush_all();
    return *this;
  }
  // Ends the trace with an End record (a trace without one looks killed).
  const std::vector<uint8_t>& end(uint64_t t) {
    fmt::End e;
    e.time = kStart + t;
    w_.end(e);
    w_.close();
    return bytes_;
  }
  const std::vector<uint8_t>& close() {
    w_.close();
    return bytes_;
  }

 private:
  std::vector<uint8_t> bytes_;
  fmt::TraceWriter w_;
  std::string path_, build_id_;
};

// Analyses bytes and fails the test when the trace cannot be opened.
inline std::unique_ptr<analysis::Model> analyze(const std::vector<uint8_t>& bytes, analysis::ReplayOptions o = {}) {
  analysis::AnalyzeResult r = analysis::analyze_memory(bytes, o);
  if (!r.ok()) return nullptr;
  return std::move(r.model);
}

inline const analysis::StackMetrics* stack_metrics(const analysis::Model& m, uint64_t stack,
                                                   analysis::Domain d = analysis::Domain::Heap) {
  for (const auto& s : m.stacks[static_cast<unsigned>(d)])
    if (s.stack.value == stack) return &s.m;
  return nullptr;
}

}  // namespace memtide::test
