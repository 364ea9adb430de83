#include "tests/recorder/trace_replay.h"

#include <algorithm>
#include <set>

#include "formats/checkpoint.h"
#include "formats/merge.h"

namespace memtide::test {

namespace {

struct Visitor : fmt::NullVisitor {
  Replay& r;
  std::unordered_map<uint64_t, std::pair<uint64_t, fmt::Api>> live;  // addr -> (size, api)
  std::set<uint64_t> stacks_used;
  std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> nodes;  // id -> (parent, ip)
  std::vector<std::pair<uint64_t, uint64_t>> own_code;  // [lo, hi) of libmemtide's executable segments
  std::vector<std::pair<uint64_t, uint64_t>> sized_stacks;             // (size, stack id)
  uint64_t last = 0;
  bool any = false;
  std::map<uint32_t, uint64_t> last_event_time;  // stream -> time of its last Alloc or Free
  explicit Visitor(Replay& out) : r(out) {}

  void timed(uint64_t t) {
    if (any && t < last) ++r.out_of_order;
    if (!any) r.first_time = t;
    any = true;
    last = t;
    r.last_time = t;
  }
  void event_in(uint32_t stream, uint64_t t) {
    auto& [events, same] = r.events_and_same_times[stream];
    auto [it, first] = last_event_time.try_emplace(stream, t);
    if (!first && it->second == t) ++same;
    it->second = t;
    ++events;
  }
  void on_process_info(uint32_t, const fmt::ProcessInfo& p) {
    r.pid = p.pid;
    r.ppid = p.ppid;
    fmt::ArgvIterator it(p);
    for (std::string_view a; it.next(a);) r.argv.emplace_back(a);
  }
  void on_module_load(uint32_t, const fmt::ModuleLoad& m) {
    timed(m.time);
    ++r.modules;
    r.module_paths.emplace_back(m.path);
    r.modules_loaded.push_back({std::string(m.path), m.load_bias});
    const std::string_view name = m.path.substr(m.path.rfind('/') + 1);
    if (name.rfind("libmemtide", 0) == 0)
      for (uint32_t i = 0; i < m.nseg; ++i)
        if (m.segments[i].flags & 1) own_code.emplace_back(m.load_bias + m.segments[i].vaddr, m.load_bias + m.segments[i].vaddr + m.segments[i].memsz);
  }
  void on_module_unload(uint32_t, const fmt::ModuleUnload& m) {
    timed(m.time);
    ++r.module_unloads;
  }
  void on_thread_start(uint32_t, const fmt::ThreadStart& t) {
    timed(t.time);
    ++r.threads;
  }
  void on_thread_name(uint32_t, const fmt::ThreadName& t) {
    timed(t.time);
    ++r.thread_names;
    r.thread_name_list.emplace_back(t.name);
  }
  void on_thread_exit(uint32_t, const fmt::ThreadExit& t) { timed(t.time); }
  void on_stack_def(uint32_t, const fmt::StackDef& s) {
    ++r.stack_defs;
    r.max_stack_id_defined = std::max<uint64_t>(r.max_stack_id_defined, s.first_id + s.count - 1);
    for (uint32_t i = 0; i < s.count; ++i) nodes[s.first_id + i] = {i == 0 ? s.parent_id : s.first_id + i - 1, s.ips[i]};
  }
  void on_counters(uint32_t, const fmt::Counters& c) {
    timed(c.time);
    ++r.counters;
    r.rss_series.emplace_back(c.time, c.rss_bytes);
  }
  void on_marker(uint32_t, const fmt::Marker& m) {
    timed(m.time);
    r.marker_times[std::string(m.label)] = m.time;
  }
  void on_watermark(uint32_t, const fmt::Watermark& w) {
    timed(w.time);
    ++r.watermarks;
  }
  void on_symbols(uint32_t, const fmt::Symbols&) { ++r.symbols; }
  void on_scan(uint32_t, const fmt::Scan& x) {
    if (x.op == fmt::ScanOp::Region) ++r.scan_regions;
    if (x.op == fmt::ScanOp::Refs) r.scan_refs += x.count;
    if (x.op == fmt::ScanOp::Done) r.scan_done = true;
  }
  void on_end(uint32_t, const fmt::End& e) {
    timed(e.time);
    r.ended = true;
    r.end_reason = e.reason;
    r.end_status = e.status;
    r.lost_events = e.lost_events;
    r.end_time = e.time;
    r.end_allocs = e.allocations;
    r.end_frees = e.frees;
  }
  void on_alloc(uint32_t stream, const fmt::Alloc& a) {
    timed(a.time);
    event_in(stream, a.time);
    const auto api = static_cast<unsigned>(a.api);
    ++r.allocs[api];
    r.bytes[api] += a.size;
    stacks_used.insert(a.stack);
    sized_stacks.emplace_back(a.size, a.stack);
    if (auto& times = r.alloc_times[a.size]; times.size() < 64) times.push_back(a.time);
    ++r.allocs_by_size[a.size];
    r.max_stack_id_used = std::max(r.max_stack_id_used, a.stack);
    if (!fmt::is_heap(a.api) || a.api == fmt::Api::Custom) return;
    ++r.heap_allocs;
    auto [it, fresh] = live.try_emplace(a.addr, a.size, a.api);
    if (!fresh) {
      ++r.double_allocs;
      r.live_bytes -= it->second.first;
      it->second = {a.size, a.api};
    }
    r.live_bytes += a.size;
    if (r.live_bytes > r.peak_bytes) {
      r.peak_bytes = r.live_bytes;
      r.peak_time = a.time;
    }
  }
  void on_free(uint32_t stream, const fmt::Free& f) {
    timed(f.time);
    event_in(stream, f.time);
    const auto api = static_cast<unsigned>(f.api);
    ++r.frees[api];
    if (!fmt::is_heap(f.api) || f.api == fmt::Api::Custom) return;
    ++r.heap_frees;
    auto it = live.find(f.addr);
    if (it == live.end()) {
      ++r.unknown_frees;
      return;
    }
    r.live_bytes -= it->second.first;
    live.erase(it);
  }
};

}  // namespace

std::vector<CheckpointSeen> checkpoints_of(const std::string& path) {
  std::vector<CheckpointSeen> out;
  fmt::FileReader heads_reader, reader;
  if (!heads_reader.open(path).ok() || !reader.open(path).ok()) return out;
  std::vector<fmt::CheckpointHead> heads = fmt::find_checkpoints(heads_reader);
  std::stable_sort(heads.begin(), heads.end(), [](const auto& a, const auto& b) { return a.time < b.time; });
  // The merged records in the readers' order; each head is compared before the first record
  // timed at or after it.
  struct Counter : fmt::NullVisitor {
    std::vector<fmt::CheckpointHead>& heads;
    std::vector<CheckpointSeen>& out;
    size_t next = 0;
    std::unordered_map<uint64_t, uint64_t> live;  // heap blocks: addr -> size
    uint64_t bytes = 0;
    std::map<uint64_t, std::pair<uint64_t, uint64_t>> counts;  // stream -> (Allocs, Frees)
    Counter(std::vector<fmt::CheckpointHead>& h, std::vector<CheckpointSeen>& o) : heads(h), out(o) {}
    void pass(uint64_t t) {
      for (; next < heads.size() && heads[next].time <= t; ++next) {
        const fmt::CheckpointHead& h = heads[next];
        CheckpointSeen c{h.seq, h.time, h.prev, h.interval, h.bytes[0], h.blocks[0], bytes, live.size(), {}};
        std::map<uint64_t, std::pair<uint64_t, uint64_t>> said;
        for (const fmt::CheckpointThread& th : h.threads) said[th.stream] = {th.allocs, th.frees};
        for (const auto& [stream, n] : counts)
          if ((n.first || n.second) && said[stream] != n)
            c.streams_differ += "stream " + std::to_string(stream) + ": " + std::to_string(said[stream].first) + "/" +
                                std::to_string(said[stream].second) + " said, " + std::to_string(n.first) + "/" +
                                std::to_string(n.second) + " read; ";
        for (const auto& [stream, n] : said)
          if ((n.first || n.second) && !counts.count(stream)) c.streams_differ += "stream " + std::to_string(stream) + " not read; ";
        out.push_back(std::move(c));
      }
    }
    void on_alloc(uint32_t stream, const fmt::Alloc& a) {
      pass(a.time);
      ++counts[stream].first;
      if (!fmt::is_heap(a.api) || a.api == fmt::Api::Custom) return;
      auto [it, fresh] = live.try_emplace(a.addr, a.size);
      if (!fresh) bytes -= it->second, it->second = a.size;
      bytes += a.size;
    }
    void on_free(uint32_t stream, const fmt::Free& f) {
      pass(f.time);
      ++counts[stream].second;
      if (!fmt::is_heap(f.api) || f.api == fmt::Api::Custom) return;
      if (auto it = live.find(f.addr); it != live.end()) bytes -= it->second, live.erase(it);
    }
  } v(heads, out);
  fmt::EventMerger merger;
  merger.set_exact_watermarks((reader.info().flags & fmt::kFileFlagExactWatermarks) != 0);
  (void)fmt::read_merged(reader, merger, v);
  v.pass(UINT64_MAX);
  return out;
}

Replay replay_trace(const std::string& path) {
  Replay r;
  fmt::FileReader reader;
  auto o = reader.open(path);
  if (!o.ok()) {
    r.error = o.message;
    return r;
  }
  // The merge trusts what the header says of the watermarks: with exact ones, a recorder that
  // let a record timed before a watermark reach the file after it shows up as out of order.
  r.exact_watermarks = (reader.info().flags & fmt::kFileFlagExactWatermarks) != 0;
  fmt::EventMerger merger;
  merger.set_exact_watermarks(r.exact_watermarks);
  Visitor v(r);
  const fmt::ReadResult res = fmt::read_merged(reader, merger, v);
  r.read_ok = res.end_of_file();
  if (!r.read_ok) r.error = res.message;
  for (const auto& [addr, sa] : v.live) ++r.live_by_size[sa.first];
  for (uint64_t id : v.stacks_used) {
    if (id > r.max_stack_id_defined) ++r.stacks_undefined;
    uint64_t depth = 0;
    for (uint64_t n = id; n != 0 && depth < 100000; ++depth) {
      auto it = v.nodes.find(n);
      if (it == v.nodes.end()) break;
      n = it->second.first;
    }
    r.max_stack_depth = std::max(r.max_stack_depth, depth);
  }
  for (const auto& [size, id] : v.sized_stacks) {
    auto it = v.nodes.find(id);
    r.leaf_ips[size].push_back(it == v.nodes.end() ? 0 : it->second.second);
    auto up = it == v.nodes.end() ? v.nodes.end() : v.nodes.find(it->second.first);
    r.caller_ips[size].push_back(up == v.nodes.end() ? 0 : up->second.second);
  }
  r.out_of_order += merger.stats().out_of_order;
  for (const auto& [id, node] : v.nodes)
    for (const auto& [lo, hi] : v.own_code) r.frames_in_recorder += node.second >= lo && node.second < hi;

  // The block hints, checked block by block in file order.
  struct Hints : fmt::NullVisitor {
    uint64_t defs = 0;
    void on_stack_def(uint32_t, const fmt::StackDef&) { ++defs; }
  } h;
  fmt::FileReader again;
  if (again.open(path).ok()) {
    r.block_hints = (again.info().flags & fmt::kFileFlagBlockHints) != 0;
    fmt::RecordDecoder decoder;
    fmt::Block b;
    fmt::DecodeScratch scratch;
    while (again.next(b).ok()) {
      ++r.blocks;
      h.defs = 0;
      (void)decoder.decode(b, h);
      // The Alloc and Free records by form (the writer's short forms: tags 0x80 and up).
      const uint8_t* p = b.payload.data();
      const uint8_t* const end = p + b.payload.size();
      fmt::StreamRegs regs;
      fmt::NullVisitor none;
      while (p < end) {
        const uint8_t tag = *p;
        if (fmt::decode_record(p, end, regs, 0, scratch, none) != fmt::DecodeError::None) break;
        if (tag >= fmt::kTagAllocRecent)
          ++r.short_records;
        else if (tag >= fmt::kTagAllocBase)
          ++r.full_records;
        if (tag >= fmt::kTagAllocBase && (b.header.flags & fmt::kBlockFlagStacks)) ++r.events_in_stack_blocks;
      }
      if (!h.defs) continue;
      ++r.stack_blocks;
      if (!(b.header.flags & fmt::kBlockFlagStacks)) ++r.unflagged_stack_blocks;
    }
  }
  return r;
}

}  // namespace memtide::test
