// One encoder per record (the layouts of records.h, section [4]), written once for both writers
// of traces: the recorder, which runs inside malloc, and TraceWriter (formats/writer.h). Each
// writes the whole record (tag and length included) into out[0, cap) and returns its size, 0
// when it does not fit. A timed record's time is written as its delta from `prev_time`, the
// stream's time register (at most x.time). No allocation, no exception.
//
// (Alloc and Free have their own encoders with the short forms, encode_alloc / encode_free in
// records.h; the Scan records are encode_scan_* in encoder.h.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "formats/encoder.h"
#include "formats/records.h"

namespace memtide::fmt {

// `argv` is any range of std::string_view (its size() elements are written in order).
template <class Argv>
inline std::size_t encode_process_info(uint8_t* out, std::size_t cap, const ProcessInfo& x, const Argv& argv) {
  RecordBuilder b(out, cap, RecordType::ProcessInfo);
  b.varint(x.pid).varint(x.ppid).varint(x.realtime_start_ns).varint(x.monotonic_start_ns).varint(x.page_size);
  b.u8(static_cast<uint8_t>(x.mode)).varint(x.sample_interval).varint(x.max_depth).varint(x.counter_interval_ns);
  b.bytes(x.exe).bytes(x.cwd).varint(argv.size());
  for (std::string_view a : argv) b.bytes(a);
  b.bytes(x.options);
  return b.finish();
}

// At most kMaxSegments of x.nseg segments are written.
inline std::size_t encode_module_load(uint8_t* out, std::size_t cap, uint64_t prev_time, const ModuleLoad& x) {
  const uint32_t nseg = x.nseg < kMaxSegments ? x.nseg : kMaxSegments;
  RecordBuilder b(out, cap, RecordType::ModuleLoad);
  b.varint(x.time - prev_time).varint(x.module_id).varint(x.load_bias).bytes(x.path).bytes(x.build_id);
  b.varint(nseg);
  for (uint32_t i = 0; i < nseg; ++i) b.varint(x.segments[i].vaddr).varint(x.segments[i].memsz).u8(x.segments[i].flags);
  return b.finish();
}

inline std::size_t encode_module_unload(uint8_t* out, std::size_t cap, uint64_t prev_time, const ModuleUnload& x) {
  RecordBuilder b(out, cap, RecordType::ModuleUnload);
  b.varint(x.time - prev_time).varint(x.module_id);
  return b.finish();
}

inline std::size_t encode_thread_start(uint8_t* out, std::size_t cap, uint64_t prev_time, const ThreadStart& x) {
  RecordBuilder b(out, cap, RecordType::ThreadStart);
  b.varint(x.time - prev_time).varint(x.thread).varint(x.os_tid).varint(x.parent);
  return b.finish();
}

inline std::size_t encode_thread_name(uint8_t* out, std::size_t cap, uint64_t prev_time, const ThreadName& x) {
  RecordBuilder b(out, cap, RecordType::ThreadName);
  b.varint(x.time - prev_time).varint(x.thread).bytes(x.name);
  return b.finish();
}

inline std::size_t encode_thread_exit(uint8_t* out, std::size_t cap, uint64_t prev_time, const ThreadExit& x) {
  RecordBuilder b(out, cap, RecordType::ThreadExit);
  b.varint(x.time - prev_time).varint(x.thread);
  return b.finish();
}

// Untimed. x.count frames from x.ips, outermost first.
inline std::size_t encode_stack_def(uint8_t* out, std::size_t cap, const StackDef& x) {
  RecordBuilder b(out, cap, RecordType::StackDef);
  b.varint(x.first_id).varint(x.parent_id).varint(x.count);
  uint64_t prev = 0;
  for (uint32_t i = 0; i < x.count; ++i) {
    b.svarint(static_cast<int64_t>(x.ips[i] - prev));
    prev = x.ips[i];
  }
  return b.finish();
}

inline std::size_t encode_counters(uint8_t* out, std::size_t cap, uint64_t prev_time, const Counters& x) {
  RecordBuilder b(out, cap, RecordType::Counters);
  b.varint(x.time - prev_time).varint(x.rss_bytes).varint(x.vm_bytes).varint(x.heap_live_bytes).varint(x.heap_blocks);
  return b.finish();
}

// With its trailing sampling field when the marker switches the sampling (2.1).
inline std::size_t encode_marker(uint8_t* out, std::size_t cap, uint64_t prev_time, const Marker& x) {
  RecordBuilder b(out, cap, RecordType::Marker);
  b.varint(x.time - prev_time).bytes(x.label);
  if (x.switches_sampling()) b.varint(x.sampling);
  return b.finish();
}

inline std::size_t encode_sample_weight(uint8_t* out, std::size_t cap, const SampleWeight& x) {
  RecordBuilder b(out, cap, RecordType::SampleWeight);
  b.varint(x.weight);
  return b.finish();
}

inline std::size_t encode_watermark(uint8_t* out, std::size_t cap, uint64_t prev_time, const Watermark& x) {
  RecordBuilder b(out, cap, RecordType::Watermark);
  b.varint(x.time - prev_time);
  return b.finish();
}

inline std::size_t encode_end(uint8_t* out, std::size_t cap, uint64_t prev_time, const End& x) {
  RecordBuilder b(out, cap, RecordType::End);
  b.varint(x.time - prev_time).u8(static_cast<uint8_t>(x.reason)).varint(x.status);
  b.varint(x.allocations).varint(x.frees).varint(x.lost_events);
  return b.finish();
}

}  // namespace memtide::fmt
