// Time-ordered replay of a trace whose per-thread streams interleave block by block.
//
// Each stream's records are in time order, but blocks of different streams follow each other
// in the file in any order. EventMerger turns the file-order block sequence into one
// time-ordered record sequence (ties keep file order) with bounded memory:
//
//   - Untimed records (ProcessInfo, StackDef, Symbols) and unknown records are delivered at
//     once, in file order, when their block is added: a StackDef therefore always reaches the
//     consumer before any Alloc that comes after it in the file, whichever stream uses it.
//   - Timed records are queued per stream and released in (time, block order) order.
//   - Watermarks (stream 0) bound the wait: once watermark k+1 has been read, every record
//     timed before watermark k has been read, so those are released. finish() releases the rest.
//   - A SampleWeight travels with the Alloc it applies to (on_sample_weight right before it);
//     one that applies to no Alloc is delivered at once.
//
// Queued records are kept as their own wire bytes (a copy of the block's timed records, with
// a 25-byte marker per block and a short marker before weighted Allocs), so the memory is that
// of the compressed-away raw payload of the window between two watermarks: ~5-8 bytes per event.
//
//   EventMerger m;
//   ReadResult r = read_merged(reader, m, visitor);   // or add_block()/finish() by hand
//
// Sections: [1] options and statistics  [2] EventMerger  [3] template members  [4] read_merged
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "formats/decoder.h"

namespace memtide::fmt {

// ---------------------------------------------------------------------------------------
// [1] Options, statistics
// ---------------------------------------------------------------------------------------

struct MergeOptions {
  // Queued bytes beyond which the oldest records are released without waiting for a
  // watermark (order is then no longer guaranteed; counted in MergeStats::forced_releases).
  std::size_t max_buffered_bytes = std::size_t{1} << 30;
};

struct MergeStats {
  uint64_t blocks = 0;
  uint64_t watermarks = 0;
  uint64_t released = 0;             // timed records delivered
  uint64_t peak_buffered_bytes = 0;
  uint64_t forced_releases = 0;      // times max_buffered_bytes forced an early release
  uint64_t out_of_order = 0;         // records delivered with a time before an earlier one's
};

// ---------------------------------------------------------------------------------------
// [2] EventMerger
// ---------------------------------------------------------------------------------------

class EventMerger {
 public:
  explicit EventMerger(MergeOptions options = {}) : opt_(options) {}

  // Decodes `block`: untimed records go to `v` now, timed ones are queued and whatever the
  // watermarks allow is released to `v`. Corrupt on a bad record: the records before it are
  // kept (and delivered in order later), the rest of the block is dropped.
  template <class V>
  ReadResult add_block(const Block& block, V& v);

  // Releases every queued record in order (at end of file, or after an error).
  template <class V>
  void finish(V& v) {
    release(0, true, 0, v);
  }

  const MergeStats& stats() const { return stats_; }
  std::size_t buffered_bytes() const { return buffered_; }

 private:
  static constexpr uint8_t kMarkBlock = 0xFF;   // + u64 block_seq, u64 base_time, u64 base_addr
  static constexpr uint8_t kMarkWeight = 0xFE;  // + varint weight; precedes its Alloc
  static constexpr std::size_t kBlockMarkSize = 25;

  struct Queue {
    uint32_t stream = 0;
    std::vector<uint8_t> buf;
    std::size_t rd = 0;  // next unread byte
    StreamRegs regs;
    uint64_t block_seq = 0;
    uint64_t head_time = 0;  // time of the record at rd (valid after peek() returned true)
  };
  struct HeapItem {
    uint64_t time, seq;
    uint32_t queue;
  };
  // Heap order: the earliest (time, file order) on top. A function object, so that the heap
  // algorithms inline it.
  struct Later {
    bool operator()(const HeapItem& a, const HeapItem& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };

  // Non-template helpers (merge.cpp).
  uint32_t queue_index(uint32_t stream);
  void append(Queue& q, const uint8_t* from, const uint8_t* to);
  void append_block_mark(Queue& q, uint64_t seq, uint64_t base_time, uint64_t base_addr);
  void append_weight(Queue& q, uint64_t weight);
  // Consumes block marks and computes head_time; false when the queue is empty.
  bool peek(Queue& q) {
    // Fast path: a queued Alloc/Free with room for unchecked varints.
    if (q.rd + 1 + 2 * wire::kMaxVarint <= q.buf.size()) {
      const uint8_t* p = q.buf.data() + q.rd;
      if (*p >= kTagAllocBase && *p < kTagFreeBase + 32) {
        ++p;
        uint64_t dt;
        if (detail::varint_fast(p, dt)) {
          q.head_time = q.regs.time + dt;
          return true;
        }
      }
    }
    return peek_slow(q);
  }
  bool peek_slow(Queue& q);
  void note_watermark(uint64_t time);
  void compact();

  template <class V>
  void deliver(Queue& q, V& v);
  template <class V>
  void release(uint64_t limit, bool all, std::size_t target, V& v);
  template <class Cmp>
  void sift_down(const Cmp& later);

  // First pass: passes on what is delivered at once, notes watermarks.
  template <class V>
  struct Forward : NullVisitor {
    EventMerger& m;
    V& v;
    Forward(EventMerger& merger, V& visitor) : m(merger), v(visitor) {}
    void on_process_info(uint32_t s, const ProcessInfo& x) { v.on_process_info(s, x); }
    void on_stack_def(uint32_t s, const StackDef& x) { v.on_stack_def(s, x); }
    void on_symbols(uint32_t s, const Symbols& x) { v.on_symbols(s, x); }
    void on_unknown(uint32_t s, uint8_t tag, std::span<const uint8_t> p) { v.on_unknown(s, tag, p); }
    void on_watermark(uint32_t, const Watermark& x) { m.note_watermark(x.time); }
    // A SampleWeight waits for its Alloc; one that never gets one (overridden, or last in the
    // block) is passed on at once, so that every record reaches the consumer exactly once.
    bool has_weight = false;
    uint64_t weight = 0;
    void on_sample_weight(uint32_t s, const SampleWeight& x) {
      if (has_weight) v.on_sample_weight(s, SampleWeight{weight});
      has_weight = true;
      weight = x.weight;
    }
    void on_alloc(uint32_t, const Alloc&) { has_weight = false; }
    void flush_weight(uint32_t s) {
      if (has_weight) v.on_sample_weight(s, SampleWeight{weight});
      has_weight = false;
    }
  };
  // Whether a record with this tag is queued (timed and known) or passed on at once.
  static bool queued_tag(uint8_t tag) {
    return (tag >= kTagAllocBase && tag < kTagFreeBase + 32) || queued_prefixed_tag(tag);
  }
  static bool queued_prefixed_tag(uint8_t tag);

  MergeOptions opt_;
  RecordDecoder decoder_;
  std::vector<Queue> queues_;
  std::unordered_map<uint32_t, uint32_t> index_;  // stream -> queues_ index
  std::vector<HeapItem> heap_;
  uint64_t next_block_seq_ = 0;
  bool have_watermark_ = false;
  uint64_t last_watermark_ = 0;
  bool have_limit_ = false;
  uint64_t limit_ = 0;        // records before this time may be released
  bool limit_moved_ = false;
  std::size_t buffered_ = 0;  // queued bytes not yet delivered
  bool delivered_any_ = false;
  uint64_t last_delivered_ = 0;
  MergeStats stats_;
};

// ---------------------------------------------------------------------------------------
// [3] Template members
// ---------------------------------------------------------------------------------------

template <class V>
ReadResult EventMerger::add_block(const Block& block, V& v) {
  ++stats_.blocks;
  v.on_block(block);
  const uint32_t stream = block.header.stream;
  Queue& q = queues_[queue_index(stream)];
  const std::size_t mark_at = q.buf.size();
  append_block_mark(q, next_block_seq_++, block.header.base_time, block.header.base_addr);

  Forward<V> fw(*this, v);
  StreamRegs r{block.header.base_time, block.header.base_addr, 0};
  const uint8_t* const begin = block.payload.data();
  const uint8_t* const end = begin + block.payload.size();
  const uint8_t* p = begin;
  const uint8_t* span = begin;  // start of the run of queued records not yet copied
  ReadResult result;
  while (p < end) {
    const uint8_t* rec = p;
    const uint8_t tag = *p;
    const bool weighted = fw.has_weight;
    const uint64_t weight = fw.weight;
    const DecodeError e = decode_record(p, end, r, stream, decoder_.scratch(), fw);
    if (e != DecodeError::None) [[unlikely]] {
      result = ReadResult::corrupt(block.offset, describe(e, tag), static_cast<uint64_t>(rec - begin));
      break;
    }
    if (queued_tag(tag)) {
      if (weighted && is_alloc_tag(tag)) {
        append(q, span, rec);
        append_weight(q, weight);
        span = rec;
      }
    } else {
      append(q, span, rec);
      span = p;
    }
  }
  append(q, span, p);
  fw.flush_weight(stream);
  if (q.buf.size() == mark_at + kBlockMarkSize) {  // nothing queued from this block
    q.buf.resize(mark_at);
    buffered_ -= kBlockMarkSize;
  }
  stats_.peak_buffered_bytes = std::max<uint64_t>(stats_.peak_buffered_bytes, buffered_);

  if (limit_moved_) {
    limit_moved_ = false;
    release(limit_, false, 0, v);
  }
  if (buffered_ > opt_.max_buffered_bytes) {
    ++stats_.forced_releases;
    release(0, true, opt_.max_buffered_bytes / 2, v);
  }
  return result;
}

template <class V>
void EventMerger::deliver(Queue& q, V& v) {
  const uint8_t* base = q.buf.data();
  const uint8_t* p = base + q.rd;
  const uint8_t* const end = base + q.buf.size();
  if (*p == kMarkWeight) {
    wire::Cursor c(p + 1, end);
    SampleWeight w;
    c.get_varint(w.weight);  // checked by peek()
    q.regs.weight = w.weight;
    v.on_sample_weight(q.stream, w);
    p = c.pos();
  }
  if (delivered_any_ && q.head_time < last_delivered_) ++stats_.out_of_order;
  delivered_any_ = true;
  last_delivered_ = q.head_time;
  if (decode_record(p, end, q.regs, q.stream, decoder_.scratch(), v) != DecodeError::None) p = end;  // unreachable: bytes were checked when queued
  ++stats_.released;
  const auto consumed = static_cast<std::size_t>(p - (base + q.rd));
  q.rd += consumed;
  buffered_ -= consumed;
}

template <class V>
void EventMerger::release(uint64_t limit, bool all, std::size_t target, V& v) {
  // A binary min-heap of the streams' heads. The top stream delivers and its new head is
  // sifted down in place: one sift per record, however the streams interleave.
  heap_.clear();
  for (uint32_t i = 0; i < queues_.size(); ++i)
    if (peek(queues_[i])) heap_.push_back({queues_[i].head_time, queues_[i].block_seq, i});
  const Later later;
  std::make_heap(heap_.begin(), heap_.end(), later);
  while (!heap_.empty()) {
    Queue& q = queues_[heap_.front().queue];
    if ((!all && q.head_time >= limit) || (target != 0 && buffered_ <= target)) break;
    deliver(q, v);
    if (peek(q)) {
      heap_.front().time = q.head_time;
      heap_.front().seq = q.block_seq;
    } else {
      heap_.front() = heap_.back();
      heap_.pop_back();
    }
    sift_down(later);
  }
  compact();
}

// Restores the heap order after heap_[0] changed.
template <class Cmp>
void EventMerger::sift_down(const Cmp& later) {
  const std::size_t n = heap_.size();
  std::size_t i = 0;
  const HeapItem item = heap_.empty() ? HeapItem{} : heap_[0];
  for (;;) {
    std::size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && later(heap_[child], heap_[child + 1])) ++child;
    if (!later(item, heap_[child])) break;
    heap_[i] = heap_[child];
    i = child;
  }
  if (n) heap_[i] = item;
}

// ---------------------------------------------------------------------------------------
// [4] read_merged
// ---------------------------------------------------------------------------------------

// Reads every remaining block of `reader` through `merger` into `v` in time order, then
// releases what is left (finish). Returns EndOfFile at a clean end, or what stopped it.
template <class V>
ReadResult read_merged(FileReader& reader, EventMerger& merger, V& v) {
  Block b;
  ReadResult r;
  for (;;) {
    r = reader.next(b);
    if (!r.ok()) break;
    r = merger.add_block(b, v);
    if (!r.ok()) break;
  }
  merger.finish(v);
  return r;
}

}  // namespace memtide::fmt
