// Checkpoints (checkpoint.h). The writer decodes the Allocs, Frees and sampling switches of each
// block it writes into its stream's queue of pending events. After a flush pass whose watermark
// vouches for time W, every event timed before W has been written: those are applied to the live
// blocks in the readers' order (time, then file order: a merge of the queues), the rest wait for
// a later pass. So the live blocks
// are, after each pass, exactly those a reader's replay holds at W, including its treatment of
// a block allocated twice, of partial munmaps and of a switch from exact to sampled recording
// (analysis/replay.cpp).
//
// A checkpoint is written at such a W: the live blocks sorted by address, delta-coded, in
// stream-0 blocks of their own, then the head. Its cost is on the writer thread: a decode, a
// hash-table update per event, and per checkpoint a sort of the live blocks
// (docs/ARCHITECTURE.md, "Checkpoints").
#include "recorder/checkpoint.h"

#include <algorithm>
#include <atomic>

#include "formats/checkpoint.h"
#include "formats/decoder.h"
#include "formats/sampling.h"
#include "recorder/base.h"
#include "recorder/sampling.h"
#include "recorder/state.h"
#include "recorder/trace_state.h"
#include "recorder/trace_file.h"
#include "recorder/writer.h"

namespace memtide::rec {

namespace {

using namespace ckpt;
using fmt::CheckpointDomain;
namespace live = fmt::live;

// This trace's checkpoint state (trace_state.h).
constexpr ckpt::CheckpointTrace& g = g_trace.checkpoint;

// What an event waiting to be applied counts for in the writer's backpressure, in bytes of
// queued chunks (a record takes about 5 before compression; its event 32 here).
constexpr size_t kBacklogWeight = 16;

void fail(const char* why) {
  if (g.failed) return;
  g.failed = true;
  message("checkpoints stopped: %s; the trace goes on without them", why);
}

// ---------------------------------------------------------------------------------------
// Applying events by the rules of formats/live_rules.h, as analysis/replay.cpp does
// ---------------------------------------------------------------------------------------

unsigned heap_map(fmt::Api a) { return a == fmt::Api::Custom ? 1 : 0; }

void heap_alloc(const Op& e) {
  LiveTable& t = g.live[heap_map(static_cast<fmt::Api>(e.api))];
  if (!e.addr) return;
  if (Live* old = t.find(e.addr)) {  // allocated twice: the first is released
    t.bytes -= old->weight ? old->weight : old->size();
    t.erase(old);
  }
  const uint64_t size = live::held_size(e.size), w = live::sample_weight(e.weight, size);
  if (!t.insert(Live{e.addr, e.time, size | uint64_t{e.api} << 56, e.stack, w})) return fail("out of memory");
  t.bytes += w ? w : size;
}

void heap_free(const Op& e) {
  LiveTable& t = g.live[heap_map(static_cast<fmt::Api>(e.api))];
  if (Live* b = t.find(e.addr)) {
    t.bytes -= b->weight ? b->weight : b->size();
    t.erase(b);
  }
}

// Removes [lo, hi) from the mapped ranges.
void unmap(uint64_t lo, uint64_t hi) {
  if (hi <= lo) return;
  Array<Range>& r = g.ranges;
  size_t i = 0;
  while (i < r.size && r.data[i].addr + r.data[i].size() <= lo) ++i;
  while (i < r.size && r.data[i].addr < hi) {
    const Range x = r.data[i];
    const uint64_t end = x.addr + x.size(), cut_lo = std::max(x.addr, lo), cut_hi = std::min(end, hi);
    g.mapped -= std::min(g.mapped, cut_hi - cut_lo);
    const uint64_t api = x.size_api & ~kMaxBlockBytes;
    // Replace x by what is left of it (0, 1 or 2 ranges).
    live::Piece left[2];
    const size_t k = static_cast<size_t>(live::pieces_left(x.addr, end, lo, hi, left));
    Range keep[2];
    for (size_t j = 0; j < k; ++j) keep[j] = Range{left[j].lo, x.time, (left[j].hi - left[j].lo) | api, x.stack, 0};
    if (k == 2 && !r.grow(r.size + 1)) return fail("out of memory");
    __builtin_memmove(r.data + i + k, r.data + i + 1, (r.size - i - 1) * sizeof(Range));
    for (size_t j = 0; j < k; ++j) r.data[i + j] = keep[j];
    r.size = r.size - 1 + k;
    i += k;
  }
}

void mmap_alloc(const Op& e) {
  if (live::maps_nothing(e.addr, e.size)) return;
  unmap(e.addr, e.addr + e.size);  // (it replaces what was mapped there)
  Array<Range>& r = g.ranges;
  if (!r.grow(r.size + 1)) return fail("out of memory");
  size_t i = r.size;
  while (i && r.data[i - 1].addr > e.addr) --i;
  __builtin_memmove(r.data + i + 1, r.data + i, (r.size - i) * sizeof(Range));
  r.data[i] = Range{e.addr, e.time, e.size | uint64_t{e.api} << 56, e.stack, 0};
  ++r.size;
  g.mapped += e.size;
}

void mmap_free(const Op& e) {
  uint64_t hi;
  if (static_cast<fmt::Api>(e.api) == fmt::Api::Munmap) {
    if (live::maps_nothing(e.addr, e.size)) return;
    hi = e.addr + e.size;
  } else {  // mremap's old mapping
    const Range* holder = nullptr;
    for (size_t i = 0; i < g.ranges.size && g.ranges.data[i].addr <= e.addr; ++i) holder = &g.ranges.data[i];
    hi = live::mremap_old_end(holder != nullptr, holder ? holder->addr : 0, holder ? holder->addr + holder->size() : 0,
                              e.addr);
    if (!hi) return;
  }
  unmap(e.addr, hi);
}

// A switch from exact to sampled recording: the replay keeps the blocks of the exact period whose
// address is kept, each standing for kExactKeepFactor of itself, and drops the others.
void switch_sampling(uint64_t interval) {
  if (g.interval == 0 && interval != 0) {
    for (LiveTable& t : g.live) {
      for (size_t i = 0; i <= t.mask && t.slots;) {
        Live& b = t.slots[i];
        if (!b.addr || b.weight) {
          ++i;
          continue;
        }
        if (live::stays_at_switch(b.addr)) {
          b.weight = live::weight_after_switch(b.size());
          t.bytes += b.weight - b.size();
          ++i;
        } else {
          t.bytes -= b.size();
          t.erase(&b);  // (a later entry may have moved into slot i: look at it again)
        }
      }
    }
  }
  g.interval = interval;
}

StreamCounts* counts_of(uint32_t stream) {
  if (stream >= g.counts.size) {
    if (stream >= (1u << 20)) return nullptr;
    if (stream >= g.counts.cap && !g.counts.grow(std::max<size_t>(stream + 1, g.counts.cap * 2))) return nullptr;
    __builtin_memset(g.counts.data + g.counts.size, 0, (stream + 1 - g.counts.size) * sizeof(StreamCounts));
    g.counts.size = stream + 1;
  }
  return &g.counts.data[stream];
}

void apply(const Op& e) {
  if (e.kind == kSwitch) return switch_sampling(e.size);
  const auto api = static_cast<fmt::Api>(e.api);
  if (e.api >= fmt::kApiCount) return;  // the replay counts it as a bad record, nothing more
  StreamCounts* c = counts_of(e.stream);
  const bool mapped = fmt::family_of(api) == fmt::Family::Mmap;
  if (e.kind == kAlloc) {
    if (mapped && live::maps_nothing(e.addr, e.size)) return;
    if (c) ++c->allocs;
    mapped ? mmap_alloc(e) : heap_alloc(e);
  } else {
    if (c) ++c->frees;
    mapped ? mmap_free(e) : heap_free(e);
  }
}

// ---------------------------------------------------------------------------------------
// Decoding the blocks written
// ---------------------------------------------------------------------------------------

struct Collect : fmt::NullVisitor {
  bool ok = true;
  uint32_t block = 0;
  size_t pushed = 0;
  void push(uint32_t stream, uint64_t time, uint64_t addr, uint64_t size, uint64_t stack, uint8_t api, uint8_t kind) {
    if (stream >= g.queues.size) {
      const size_t n = std::max<size_t>(stream + 1, g.queues.size * 2);
      if (stream >= (1u << 20) || !g.queues.grow(n)) {
        ok = false;
        return;
      }
      __builtin_memset(static_cast<void*>(g.queues.data + g.queues.size), 0, (n - g.queues.size) * sizeof(Queue));
      g.queues.size = n;
    }
    if (stack > UINT32_MAX) ok = false;  // (no recorder makes 4 G stack nodes)
    const uint64_t packed = std::min(size, kSizeMask) | uint64_t{api} << 48 | uint64_t{kind} << 56;
    if (!g.queues.data[stream].ev.push(Event{time, addr, packed, static_cast<uint32_t>(stack), block})) ok = false;
    ++pushed;
  }
  void on_alloc(uint32_t s, const fmt::Alloc& a) {
    push(s, a.time, a.addr, a.size, a.stack, static_cast<uint8_t>(a.api), kAlloc);
    if (a.weight) push(s, a.time, a.weight, 0, 0, 0, kWeight);
  }
  void on_free(uint32_t s, const fmt::Free& f) {
    push(s, f.time, f.addr, f.length, 0, static_cast<uint8_t>(f.api), kFree);
  }
  void on_thread_start(uint32_t, const fmt::ThreadStart& x) {
    if (StreamCounts* c = counts_of(static_cast<uint32_t>(std::min<uint64_t>(x.thread, UINT32_MAX)))) {
      c->os_tid = x.os_tid;
      c->parent = x.parent;
      c->start = x.time;
    }
  }
  void on_thread_name(uint32_t, const fmt::ThreadName& x) {
    if (StreamCounts* c = counts_of(static_cast<uint32_t>(std::min<uint64_t>(x.thread, UINT32_MAX)))) {
      c->name_len = static_cast<uint8_t>(std::min(x.name.size(), sizeof c->name));
      __builtin_memcpy(c->name, x.name.data(), c->name_len);
    }
  }
  void on_thread_exit(uint32_t, const fmt::ThreadExit& x) {
    if (StreamCounts* c = counts_of(static_cast<uint32_t>(std::min<uint64_t>(x.thread, UINT32_MAX)))) c->exit = x.time;
  }
  void on_marker(uint32_t s, const fmt::Marker& m) {
    MarkerCopy c{m.time, m.sampling, s, static_cast<uint16_t>(std::min(m.label.size(), sizeof c.label)), {}};
    __builtin_memcpy(c.label, m.label.data(), c.len);
    if (!g.markers.push(c)) ok = false;
    if (m.switches_sampling()) push(s, m.time, 0, m.sampling_interval(), 0, 0, kSwitch);
  }
  void on_counters(uint32_t s, const fmt::Counters& x) {
    if (s == 0 && !g.counters.push(CounterCopy{x.time, x.rss_bytes, x.vm_bytes})) ok = false;
  }
};

}  // namespace

void checkpoint_due(uint64_t replay_from) {
  // (Already due from an earlier segment: that one stays the goal. Moving it to each new
  // segment would never be met when segments fill faster than a pass: the blocks a pass wrote
  // before a rotation hold events timed after the pass's time.)
  if (g.due) return;
  g.due = true;
  g.due_from = replay_from;
}

bool checkpoint_pending() { return g.due && checkpoints_on(); }

bool checkpoints_on() {
  return !g.failed && recording.opts.checkpoint_interval_s != 0;
}

void CheckpointTrace::release() {
  for (LiveTable& t : live) mem_free(t.slots);
  ranges.release();
  for (size_t i = 0; i < queues.size; ++i) queues.data[i].ev.release();
  queues.release();
  heap.release();
  counts.release();
  marks.release();
  markers.release();
  counters.release();
  mem_free(scratch);
}

void checkpoint_note_block(uint32_t stream, uint64_t base_time, uint64_t base_addr, const uint8_t* p, size_t n,
                           uint64_t offset) {
  if (!checkpoints_on()) return;
  if (!g.scratch && !(g.scratch = static_cast<fmt::DecodeScratch*>(mem_alloc(sizeof(fmt::DecodeScratch)))))
    return fail("out of memory");
  fmt::StreamRegs r;
  r.time = base_time;
  r.addr = base_addr;
  Collect v;
  v.block = g.blocks++;
  for (const uint8_t *q = p, *end = p + n; q < end;)
    if (fmt::decode_record(q, end, r, stream, *g.scratch, v) != fmt::DecodeError::None) break;  // as a reader stops
  g_trace.checkpoint_backlog.fetch_add(v.pushed, std::memory_order_relaxed);
  if (!v.ok || !g.marks.push(BlockMark{offset, r.time})) fail("out of memory");
}

size_t checkpoint_backlog() { return g_trace.checkpoint_backlog.load(std::memory_order_relaxed) * kBacklogWeight; }

void checkpoint_pass(uint64_t w) {
  if (!checkpoints_on() || w < g.applied) return;
  // A k-way merge of the streams' queues by (time, file order), the readers' order: a heap of
  // the streams whose next event is timed before w.
  Array<uint32_t>& h = g.heap;
  h.size = 0;
  auto head = [](uint32_t q) -> const Event& { return g.queues.data[q].ev.data[g.queues.data[q].head]; };
  auto before = [&](uint32_t a, uint32_t b) {
    const Event &x = head(a), &y = head(b);
    return x.time != y.time ? x.time < y.time : static_cast<int32_t>(x.block - y.block) < 0;
  };
  auto sift_down = [&](size_t i) {
    for (;;) {
      size_t m = i;
      const size_t l = 2 * i + 1, r = l + 1;
      if (l < h.size && before(h.data[l], h.data[m])) m = l;
      if (r < h.size && before(h.data[r], h.data[m])) m = r;
      if (m == i) return;
      std::swap(h.data[i], h.data[m]);
      i = m;
    }
  };
  for (uint32_t q = 0; q < g.queues.size; ++q) {
    const Queue& k = g.queues.data[q];
    if (k.head < k.ev.size && k.ev.data[k.head].time < w && !h.push(q)) return fail("out of memory");
  }
  for (size_t i = h.size / 2; i-- > 0;) sift_down(i);
  size_t applied = 0;
  while (h.size && !g.failed) {
    const uint32_t stream = h.data[0];
    Queue& k = g.queues.data[stream];
    // The first of the other streams (one of the root's children); this one's events are
    // applied up to it without going through the heap.
    int64_t other = h.size > 1 ? static_cast<int64_t>(h.data[1]) : -1;
    if (h.size > 2 && before(h.data[2], h.data[1])) other = h.data[2];
    do {
      if (k.head + 8 < k.ev.size) {  // the slot of an event a few ahead: a large live set is out of the cache
        const Event& a = k.ev.data[k.head + 8];
        g.live[heap_map(static_cast<fmt::Api>(a.api()))].prefetch(a.addr);
      }
      ++applied;
      const Event& e = k.ev.data[k.head++];
      Op op{e.time, e.addr, e.size(), e.stack, 0, stream, e.kind(), e.api()};
      if (k.head < k.ev.size && k.ev.data[k.head].kind() == kWeight) {
        op.weight = k.ev.data[k.head++].addr;
        ++applied;
      }
      apply(op);
    } while (k.head < k.ev.size && k.ev.data[k.head].time < w &&
             (other < 0 || !before(static_cast<uint32_t>(other), stream)));
    if (k.head == k.ev.size || k.ev.data[k.head].time >= w) h.data[0] = h.data[--h.size];
    sift_down(0);
  }
  g_trace.checkpoint_backlog.fetch_sub(std::min(applied, g_trace.checkpoint_backlog.load(std::memory_order_relaxed)), std::memory_order_relaxed);
  for (size_t q = 0; q < g.queues.size; ++q) {  // what is left moves to the front, now and then
    Queue& k = g.queues.data[q];
    if (!k.head || k.head < k.ev.size / 2) continue;
    __builtin_memmove(k.ev.data, k.ev.data + k.head, (k.ev.size - k.head) * sizeof(Event));
    k.ev.size -= k.head;
    k.head = 0;
  }
  g.applied = w;
}

// ---------------------------------------------------------------------------------------
// Writing a checkpoint
// ---------------------------------------------------------------------------------------

namespace {

constexpr size_t kBlockRaw = 1u << 20;      // payload bytes per data block (about)
constexpr size_t kRecordEntries = 16384;    // entries per Blocks record
constexpr size_t record_max(size_t entries) {
  return fmt::kCheckpointPrefix + 3 + 2 * wire::kMaxVarint + entries * fmt::kCheckpointEntryMax;
}

struct Out {
  uint8_t* buf = nullptr;
  size_t used = 0;
  uint64_t blocks = 0;
  uint16_t flags = 0;
  void flush() {
    if (!used) return;
    writer_write_block(0, recording.shared.w_run.time, recording.shared.w_run.addr, buf, used, flags);
    used = 0;
    ++blocks;
  }
};

// One domain's entries (sorted by address) as Blocks records.
void put_entries(Out& o, CheckpointDomain d, const Live* e, size_t n, uint64_t time) {
  for (size_t at = 0; at < n;) {
    const size_t k = std::min(n - at, kRecordEntries);
    if (o.used + record_max(k) > kBlockRaw + record_max(kRecordEntries)) o.flush();
    uint8_t* const rec = o.buf + o.used;
    uint8_t* p = rec + fmt::kCheckpointPrefix;
    *p++ = static_cast<uint8_t>(fmt::CheckpointOp::Blocks);
    p = wire::put_varint(p, g.written_seq + 1);
    *p++ = static_cast<uint8_t>(d);
    p = wire::put_varint(p, k);
    uint64_t prev = 0;
    for (size_t i = at; i < at + k; ++i) {
      fmt::CheckpointEntry x;
      x.addr = e[i].addr;
      x.size = e[i].size();
      x.stack = e[i].stack;
      x.time = e[i].time;
      x.weight = e[i].weight;
      x.api = e[i].api();
      p = fmt::put_checkpoint_entry(p, prev, x, time);
      prev = x.addr;
    }
    o.used += static_cast<size_t>(fmt::checkpoint_close(rec, p) - rec);
    at += k;
    if (o.used >= kBlockRaw) o.flush();
  }
}

}  // namespace

void checkpoint_maybe_write(uint64_t now, uint64_t offset) {
  if (!checkpoints_on() || g_trace.file.write_failed) return;
  const uint64_t interval = static_cast<uint64_t>(recording.opts.checkpoint_interval_s) * 1000000000ull;
  const uint64_t bytes = recording.opts.checkpoint_bytes;
  if (!g.due && now - g.last_time < interval && !(bytes && offset - g.last_offset >= bytes)) return;
  const uint64_t time = g.applied;
  if (time == 0 || time < g.last_time_applied) return;
  // The first block that may hold a record timed at or after `time`.
  uint64_t from = offset;
  size_t keep = 0;
  for (size_t i = 0; i < g.marks.size; ++i)
    if (g.marks.data[i].end_time >= time) from = std::min(from, g.marks.data[i].offset);
  for (size_t i = 0; i < g.marks.size; ++i)
    if (g.marks.data[i].offset >= from) g.marks.data[keep++] = g.marks.data[i];
  g.marks.size = keep;
  if (g.due && from < g.due_from) return;  // (a later pass's will not need the blocks before it)

  Out o;
  o.buf = static_cast<uint8_t*>(mem_alloc_uninit(kBlockRaw + 2 * record_max(kRecordEntries)));
  const size_t n = g.live[0].count + g.live[1].count;
  Live* sorted = static_cast<Live*>(mem_alloc_uninit((n ? n : 1) * sizeof(Live)));
  if (!o.buf || !sorted) {
    mem_free(o.buf);
    mem_free(sorted);
    return fail("out of memory");
  }
  o.flags = fmt::kBlockFlagCheckpointData;
  const uint64_t data_offset = trace_file_bytes();
  for (unsigned d = 0; d < 2; ++d) {
    const LiveTable& t = g.live[d];
    size_t k = 0;
    for (size_t i = 0; t.slots && i <= t.mask; ++i)
      if (t.slots[i].addr) sorted[k++] = t.slots[i];
    std::sort(sorted, sorted + k, [](const Live& a, const Live& b) { return a.addr < b.addr; });
    put_entries(o, static_cast<CheckpointDomain>(d), sorted, k, time);
  }
  put_entries(o, CheckpointDomain::Mmap, g.ranges.data, g.ranges.size, time);
  o.flush();
  mem_free(sorted);

  mem_free(o.buf);

  // The head block: the threads' markers since the last checkpoint, stream 0's counters and
  // markers, the per-stream counts, then the head itself, in one block (a reader finds it by
  // the file header's pointer, and from it the previous ones).
  const uint64_t data_blocks = o.blocks;
  constexpr size_t kMarkerMax = fmt::kCheckpointPrefix + 4 * wire::kMaxVarint + 1 + sizeof(MarkerCopy::label);
  constexpr size_t kThreadMax = 8 * wire::kMaxVarint + sizeof(StreamCounts::name);
  constexpr size_t kCounterMax = 3 * wire::kMaxVarint;
  constexpr size_t kMarkerRoom = 8u << 20;  // (later markers and counters wait for the next checkpoint)
  const size_t markers = std::min(g.markers.size, kMarkerRoom / kMarkerMax);
  const size_t counters = std::min(g.counters.size, kMarkerRoom / kCounterMax);
  const size_t threads = std::min(g.counts.size, kRecordEntries);
  o.buf = static_cast<uint8_t*>(mem_alloc_uninit(markers * kMarkerMax + counters * kCounterMax + 2 * record_max(0) +
                                                 threads * kThreadMax + 256));
  if (!o.buf) return fail("out of memory");
  o.used = 0;
  o.flags = fmt::kBlockFlagCheckpoint;
  // Stream 0's, in the Process record, those timed before the checkpoint (the others wait).
  uint8_t* rec = o.buf + o.used;
  uint8_t* p = rec + fmt::kCheckpointPrefix;
  *p++ = static_cast<uint8_t>(fmt::CheckpointOp::Process);
  p = wire::put_varint(p, g.written_seq + 1);
  size_t listed = 0;
  for (size_t i = 0; i < counters; ++i) listed += g.counters.data[i].time < time;
  p = wire::put_varint(p, listed);
  size_t kept = 0;
  for (size_t i = 0; i < g.counters.size; ++i) {
    const CounterCopy& c = g.counters.data[i];
    if (c.time >= time || i >= counters) {
      g.counters.data[kept++] = c;
      continue;
    }
    p = wire::put_varint(wire::put_varint(wire::put_varint(p, c.time), c.rss), c.vm);
  }
  g.counters.size = kept;
  listed = 0;
  for (size_t i = 0; i < markers; ++i) listed += g.markers.data[i].stream == 0 && g.markers.data[i].time < time;
  p = wire::put_varint(p, listed);
  for (size_t i = 0; i < markers; ++i) {
    const MarkerCopy& m = g.markers.data[i];
    if (m.stream == 0 && m.time < time) p = wire::put_bytes(wire::put_varint(wire::put_varint(p, m.time), m.sampling), m.label, m.len);
  }
  o.used += static_cast<size_t>(fmt::checkpoint_close(rec, p) - rec);
  // The threads' (stream 0's were put above).
  kept = 0;
  for (size_t i = 0; i < g.markers.size; ++i) {
    const MarkerCopy& m = g.markers.data[i];
    if (m.time >= time || i >= markers) {
      g.markers.data[kept++] = m;
      continue;
    }
    if (m.stream == 0) continue;
    uint8_t* const r = o.buf + o.used;
    uint8_t* q = r + fmt::kCheckpointPrefix;
    *q++ = static_cast<uint8_t>(fmt::CheckpointOp::Marker);
    q = wire::put_varint(q, g.written_seq + 1);
    q = wire::put_varint(wire::put_varint(q, m.stream), m.time);
    q = wire::put_varint(q, m.sampling);
    q = wire::put_bytes(q, m.label, m.len);
    o.used += static_cast<size_t>(fmt::checkpoint_close(r, q) - r);
  }
  g.markers.size = kept;
  rec = o.buf + o.used;
  p = rec + fmt::kCheckpointPrefix;
  *p++ = static_cast<uint8_t>(fmt::CheckpointOp::Threads);
  p = wire::put_varint(p, g.written_seq + 1);
  size_t streams = 0;
  auto wanted = [](const StreamCounts& c) { return c.allocs || c.frees || c.start; };
  for (size_t i = 0; i < g.counts.size; ++i) streams += wanted(g.counts.data[i]);
  streams = std::min(streams, threads);  // (the head block's room)
  p = wire::put_varint(p, streams);
  for (size_t i = 0, put = 0; i < g.counts.size && put < streams; ++i) {
    const StreamCounts& c = g.counts.data[i];
    if (!wanted(c)) continue;
    p = wire::put_varint(wire::put_varint(wire::put_varint(p, i), c.allocs), c.frees);
    p = wire::put_varint(wire::put_varint(p, c.os_tid), c.parent);
    p = wire::put_varint(wire::put_varint(p, c.start), c.exit);
    p = wire::put_bytes(p, c.name, c.name_len);
    ++put;
  }
  o.used += static_cast<size_t>(fmt::checkpoint_close(rec, p) - rec);
  rec = o.buf + o.used;
  p = rec + fmt::kCheckpointPrefix;
  *p++ = static_cast<uint8_t>(fmt::CheckpointOp::Head);
  p = wire::put_varint(p, g.written_seq + 1);
  p = wire::put_varint(p, time);
  p = wire::put_varint(p, from);
  p = wire::put_varint(p, data_offset);
  p = wire::put_varint(p, data_blocks);
  p = wire::put_varint(p, g.interval);
  for (const LiveTable& t : g.live) p = wire::put_varint(wire::put_varint(p, t.bytes), t.count);
  p = wire::put_varint(wire::put_varint(p, g.mapped), g.ranges.size);
  p = wire::put_varint(p, g.last_head);
  o.used += static_cast<size_t>(fmt::checkpoint_close(rec, p) - rec);
  const uint64_t head = trace_file_bytes();
  o.flush();
  mem_free(o.buf);
  if (g_trace.file.write_failed) return;
  set_checkpoint_pointer(head);
  segment_checkpoint_written(from, trace_file_bytes() - data_offset);
  g.last_head = head;

  ++g.written_seq;
  g.due = false;
  g.last_time = now;
  g.last_time_applied = time;
  g.last_offset = trace_file_bytes();
}

}  // namespace memtide::rec
