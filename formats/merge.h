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
//     timed before watermark k has been read, so those are released; in a file whose header
//     says its watermarks are exact, everything before watermark k is released once k is
//     read. finish() releases the rest.
//   - A SampleWeight travels with the Alloc it applies to (on_sample_weight right before it);
//     one that applies to no Alloc is delivered at once.
//
// Each block is decoded once (EventDecoder, formats/event_block.h) into an EventBlock: its
// Allocs and Frees as an array of fixed-size 32-byte events, the rare other timed records as
// their wire bytes. The merge then walks those arrays: the stream whose head is earliest delivers a whole run of
// events, up to the head of the next stream, before the heap of stream heads is touched again,
// so a trace with one busy stream costs no heap operation per event. Memory is the window
// between two watermarks at 32 bytes per event. EventDecoder needs no merger state, so a
// reader thread can decode blocks while another merges them (add_events); a RawVisitor takes
// the merged records undecoded, to hand them to yet another thread (the report's replay).
// A block known to hold only timed records (a thread's stream in a file with block hints) can
// instead be queued undecoded (add_pending): it is decoded when the merge reaches it, into one
// of a few events arrays kept warm, so the window costs the blocks' wire bytes (about 6 per
// event) and the merge reads events that were just written, from the cache.
//
//   EventMerger m;
//   ReadResult r = read_merged(reader, m, visitor);   // or add_block()/finish() by hand
//
// Sections: [1] options and statistics  [2] EventMerger  [3] template members  [4] read_merged
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <new>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "formats/check.h"
#include "formats/decoder.h"
#include "formats/event_block.h"

namespace memtide::fmt {

// ---------------------------------------------------------------------------------------
// [1] Options, statistics
// ---------------------------------------------------------------------------------------

struct MergeOptions {
  // Queued bytes beyond which the oldest records are released without waiting for a
  // watermark (order is then no longer guaranteed; counted in MergeStats::forced_releases).
  std::size_t max_buffered_bytes = std::size_t{1} << 30;
  // The file's watermarks vouch for their own time (kFileFlagExactWatermarks): everything timed
  // before one is released as soon as it is read, not only once the next one has been.
  bool exact_watermarks = false;
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

// A visitor that takes the merged records without having them decoded (one that passes them on
// to another thread, say): plain Allocs and Frees as their MergedEvent (on_event), the other
// records as their wire bytes (on_wire: decode them with decode_record, the stream's time
// register set to `time`). Allocs in EventBlock::wide still come through on_sample_weight and
// on_alloc.
template <class V>
concept RawVisitor = requires(V& v, uint32_t stream, const MergedEvent& e, const uint8_t* p) {
  v.on_event(stream, e);
  v.on_wire(stream, uint64_t{0}, p, p);
};

// A RawVisitor that stores the plain events in arrays of its own, which the merge's tightest
// loop (two streams taking turns) writes directly: `slots(room)` returns a cursor to where the
// next events go and sets `room` (at least 1) to how many surely fit, `put(cursor, stream, e)`
// writes one and advances the cursor (false, writing nothing, for an event it cannot hold),
// `commit(cursor)` counts what was written since slots(); the events of a stream for which
// `slot_stream(stream)` is false, and those put() refuses, go through on_event. The cursor then
// stays in registers instead of going through memory at every event.
template <class V>
concept SlotVisitor = RawVisitor<V> && requires(V& v, std::size_t& room, typename V::Cursor& c, uint32_t stream,
                                                const MergedEvent& e) {
  { v.slots(room) } -> std::same_as<typename V::Cursor>;
  { V::put(c, stream, e) } -> std::same_as<bool>;
  v.commit(c);
  { v.slot_stream(stream) } -> std::same_as<bool>;
};

class EventMerger {
 public:
  explicit EventMerger(MergeOptions options = {}) : opt_(options) {}
  // Set from the file header before the first block (kFileFlagExactWatermarks).
  void set_exact_watermarks(bool exact) { opt_.exact_watermarks = exact; }

  // Decodes `block`: untimed records go to `v` now, timed ones are queued and whatever the
  // watermarks allow is released to `v`. Corrupt on a bad record: the records before it are
  // kept (and delivered in order later), the rest of the block is dropped.
  template <class V>
  ReadResult add_block(const Block& block, V& v) {
    v.on_block(block);
    std::unique_ptr<EventBlock> b = spare();
    decoder_.decode(block, *b);
    ReadResult r = b->result;
    add_events(std::move(b), v);
    return r;
  }

  // The same for a block already decoded by an EventDecoder (on another thread, say);
  // `v.on_block` is not called. Its result is left in the EventBlock's `result`.
  template <class V>
  void add_events(std::unique_ptr<EventBlock> b, V& v);

  // Queues `block` undecoded (its payload is copied): it is decoded when the merge reaches it.
  // For a block whose records are all timed: untimed ones found in it still reach `v`, but only
  // then, not in file order. `v.on_block` is not called; what is wrong with its records is
  // kept for take_errors().
  template <class V>
  void add_pending(const Block& block, V& v);

  // Corrupt results of the pending blocks decoded since the last call (what add_block would
  // have returned for them), in the order they were decoded.
  std::vector<ReadResult> take_errors() { return std::exchange(errors_, {}); }

  // Releases every queued record in order (at end of file, or after an error).
  template <class V>
  void finish(V& v) {
    release(0, true, 0, v);
    // Everything queued was delivered, and the bytes counted in were counted out.
    MEMTIDE_CHECK(buffered_ == 0);
  }

  // An EventBlock whose events have all been delivered, to decode the next block into
  // (nullptr when there is none): lets a reader thread reuse the buffers.
  std::unique_ptr<EventBlock> take_spare();

  const MergeStats& stats() const { return stats_; }
  std::size_t buffered_bytes() const { return buffered_; }

 private:
  struct Queue {
    uint32_t stream = 0;
    std::deque<std::unique_ptr<EventBlock>> blocks;  // front: the one being released
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
  std::unique_ptr<EventBlock> spare();
  std::unique_ptr<EventBlock> bare_spare();  // one without an events array, for add_pending
  // Gives `b` the latest warm events array if it is larger than its own / moves `b`'s array to
  // the warm ones while there is room.
  void adopt_warm(EventBlock& b);
  void stash_warm(EventBlock& b);
  void recycle(std::unique_ptr<EventBlock> b);
  void note_watermark(uint64_t time);
  // Decodes a pending block in place (into a warm events array) and delivers the untimed
  // records it turns out to hold.
  template <class V>
  [[gnu::noinline]] void decode_front(EventBlock& b, V& v) {
    decode_pending(b);
    deliver_immediate(b, v);
  }
  void decode_pending(EventBlock& b);
  // The head event of `q` (dropping finished blocks, decoding a pending one); false when the
  // queue is empty. Inline: with finely interleaved streams it runs every event or two.
  template <class V>
  bool head(Queue& q, HeapItem& item, V& v) {
    while (!q.blocks.empty()) {
      EventBlock& b = *q.blocks.front();
      if (b.pending) [[unlikely]]
        decode_front(b, v);
      if (b.rd < b.events.size()) [[likely]] {
        item.time = b.events[b.rd].time;
        item.seq = b.seq;
        return true;
      }
      recycle(std::move(q.blocks.front()));
      q.blocks.pop_front();
    }
    return false;
  }

  template <class V>
  void deliver_immediate(const EventBlock& b, V& v);
  template <class V>
  void deliver_rare(EventBlock& b, const MergedEvent& e, V& v);
  template <class V>
  bool run(Queue& q, uint64_t bound_time, uint64_t bound_seq, uint64_t limit, bool all, std::size_t target, V& v);
  template <class V>
  bool two_way(Queue& qa, Queue& qb, uint64_t bound_time, uint64_t bound_seq, uint64_t limit, bool all, V& v);
  template <class V>
  void deliver(EventBlock& b, const MergedEvent& e, V& v);
  template <class V>
  void release(uint64_t limit, bool all, std::size_t target, V& v);
  template <class V>
  void fill_heap(V& v);
  void after_add();
  template <class V>
  void release_after_add(V& v);
  template <class Cmp>
  void sift_down(const Cmp& later);

  // How far ahead run() prefetches the events it delivers (16: 512 bytes, 8 cache lines).
  static constexpr std::size_t kPrefetchEvents = 16;
  // A run of one stream shorter than this (another stream's head came first) makes release()
  // let the two earliest streams take turns (two_way).
  static constexpr uint64_t kAlternating = 4;
  // Events arrays kept warm for pending blocks (one per stream being merged is enough).
  static constexpr std::size_t kWarmArrays = 16;

  MergeOptions opt_;
  EventDecoder decoder_;
  std::deque<Queue> queues_;  // (a deque: Queue is not nothrow-movable)
  std::unordered_map<uint32_t, uint32_t> index_;  // stream -> queues_ index
  std::vector<HeapItem> heap_;
  std::vector<std::unique_ptr<EventBlock>> spare_;
  std::vector<PodArray<MergedEvent>> warm_;  // events arrays of recycled blocks, the latest last
  std::vector<ReadResult> errors_;          // of pending blocks, for take_errors()
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
void EventMerger::add_events(std::unique_ptr<EventBlock> b, V& v) {
  ++stats_.blocks;
  deliver_immediate(*b, v);
  for (uint64_t t : b->watermarks) note_watermark(t);
  if (!b->events.empty()) {
    b->seq = next_block_seq_;
    b->rd = b->wide_rd = b->other_rd = 0;
    buffered_ += b->queued_bytes();
    queues_[queue_index(b->stream)].blocks.push_back(std::move(b));
  } else {
    recycle(std::move(b));
  }
  after_add();
  release_after_add(v);
}

template <class V>
void EventMerger::add_pending(const Block& block, V& v) {
  ++stats_.blocks;
  std::unique_ptr<EventBlock> b = bare_spare();
  b->clear();
  b->stream = block.header.stream;
  b->offset = block.offset;
  b->header = block.header;
  b->raw.assign(block.payload.data(), block.payload.size());
  b->pending = true;
  b->seq = next_block_seq_;
  buffered_ += b->raw.size();
  queues_[queue_index(b->stream)].blocks.push_back(std::move(b));
  after_add();
  release_after_add(v);
}

template <class V>
void EventMerger::release_after_add(V& v) {
  if (limit_moved_) {
    limit_moved_ = false;
    release(limit_, false, 0, v);
  }
  if (buffered_ > opt_.max_buffered_bytes) {
    ++stats_.forced_releases;
    release(0, true, opt_.max_buffered_bytes / 2, v);
  }
}

template <class V>
void EventMerger::deliver_immediate(const EventBlock& b, V& v) {
  if (b.immediate.empty()) return;
  if constexpr (RawVisitor<V>) {
    v.on_wire(b.stream, 0, b.immediate.data(), b.immediate.data() + b.immediate.size());
  } else {
    const uint8_t* p = b.immediate.data();
    const uint8_t* const end = p + b.immediate.size();
    StreamRegs r;
    while (p < end) {
      // The decoder checked these records when it set them aside.
      const DecodeError err = decode_record(p, end, r, b.stream, decoder_.scratch(), v);
      MEMTIDE_CHECK(err == DecodeError::None);
      if (err != DecodeError::None) break;
    }
  }
}

template <class V>
[[gnu::noinline]] void EventMerger::deliver_rare(EventBlock& b, const MergedEvent& e, V& v) {
  if (e.tag == kEventOther) {
    const uint8_t* p = b.other.data() + b.other_rd;
    const uint8_t* const end = b.other.data() + b.other.size();
    StreamRegs r;
    r.time = e.addr;
    // The decoder checked this record when it set it aside.
    DecodeError err;
    if constexpr (RawVisitor<V>) {
      NullVisitor skip;
      err = decode_record(p, end, r, b.stream, decoder_.scratch(), skip);
      if (err != DecodeError::None) p = end;
      v.on_wire(b.stream, e.addr, b.other.data() + b.other_rd, p);
    } else {
      err = decode_record(p, end, r, b.stream, decoder_.scratch(), v);
      if (err != DecodeError::None) p = end;
    }
    MEMTIDE_CHECK(err == DecodeError::None);
    const auto n = static_cast<std::size_t>(p - (b.other.data() + b.other_rd));
    MEMTIDE_CHECK(buffered_ >= n);
    b.other_rd += n;
    buffered_ -= n;
    return;
  }
  MEMTIDE_CHECK(b.wide_rd < b.wide.size());  // one wide Alloc per kEventWide / kEventWeighted event
  MEMTIDE_CHECK(buffered_ >= sizeof(Alloc));
  const Alloc& a = b.wide[b.wide_rd++];
  buffered_ -= sizeof(Alloc);
  if (e.tag == kEventWeighted) v.on_sample_weight(b.stream, SampleWeight{a.weight});
  v.on_alloc(b.stream, a);
}

// One timed event of block `b`: Allocs and Frees inline, the rest through deliver_rare.
template <class V>
[[gnu::always_inline]] inline void EventMerger::deliver(EventBlock& b, const MergedEvent& e, V& v) {
  const uint8_t tag = e.tag;
  if constexpr (RawVisitor<V>) {
    if (tag < kEventWide) [[likely]]
      v.on_event(b.stream, e);
    else
      deliver_rare(b, e, v);
  } else if (tag < kTagFreeBase) [[likely]] {
    v.on_alloc(b.stream, event_alloc(e, tag));
  } else if (tag < kEventWide) [[likely]] {
    v.on_free(b.stream, event_free(e, tag));
  } else {
    deliver_rare(b, e, v);
  }
}

// Delivers the events of two streams in order while both have some, each up to (bound_time,
// bound_seq), the head of the earliest other stream, and below `limit` (unless `all`): threads
// that allocate at the same time alternate every event or two, and picking between two heads
// costs less than going back to the heap each time. `qa` holds the earliest head of all. True
// when the limit was reached (the release is over); false when a stream ran out of events or
// the other streams' turn came (the caller rebuilds its heap).
template <class V>
bool EventMerger::two_way(Queue& qa, Queue& qb, uint64_t bound_time, uint64_t bound_seq, uint64_t limit, bool all,
                          V& v) {
  if (!all && limit == 0) return true;
  const uint64_t cap = all ? UINT64_MAX : limit - 1;
  struct Side {
    Queue* q;
    EventBlock* b = nullptr;
    const MergedEvent* ev = nullptr;
    std::size_t i = 0, n = 0, first = 0;
    uint64_t last = 0;     // the latest time this block may deliver before the other streams
    bool blocked = false;  // not even time 0: another stream's head is at 0 and earlier in the file
  };
  Side sa{&qa}, sb{&qb};
  auto load = [&](Side& s) {
    if (s.q->blocks.empty()) return false;
    EventBlock& b = *s.q->blocks.front();
    if (b.pending) decode_front(b, v);  // (fill_heap's head() has decoded it already)
    if (b.rd >= b.events.size()) return false;  // head() drops finished blocks: not here
    s.b = &b;
    s.ev = b.events.data();
    s.i = s.first = b.rd;
    s.n = b.events.size();
    s.blocked = b.seq > bound_seq && bound_time == 0;
    s.last = std::min(b.seq > bound_seq && bound_time != 0 ? bound_time - 1 : bound_time, cap);
    return true;
  };
  auto settle = [&](Side& s) {
    if (!s.b) return;
    MEMTIDE_CHECK(buffered_ >= (s.i - s.first) * sizeof(MergedEvent));
    s.b->rd = s.i;
    buffered_ -= (s.i - s.first) * sizeof(MergedEvent);
    stats_.released += s.i - s.first;
    s.first = s.i;
  };
  bool over = false;
  if (load(sa) && load(sb)) {
    uint64_t prev = delivered_any_ ? last_delivered_ : 0;
    uint64_t late = 0;
    bool any = false;
    // The loop keeps its cursors and limits in locals: picking a side then costs no load that
    // waits for the pick.
    const MergedEvent *pa = sa.ev + sa.i, *pb = sb.ev + sb.i;
    const MergedEvent* const end_a = sa.ev + sa.n;
    const MergedEvent* const end_b = sb.ev + sb.n;
    const uint64_t last_a = sa.last, last_b = sb.last;
    const bool blocked_a = sa.blocked, blocked_b = sb.blocked;
    const bool a_wins_ties = sa.b->seq < sb.b->seq;
    const uint32_t stream_a = sa.b->stream, stream_b = sb.b->stream;
    // SlotVisitor: where the events go, the room there, how many were written; whether each
    // stream's events can go there.
    [[maybe_unused]] std::size_t room = 0, k = 0;
    [[maybe_unused]] auto out = [&] {
      if constexpr (SlotVisitor<V>)
        return v.slots(room);
      else
        return static_cast<void*>(nullptr);
    }();
    [[maybe_unused]] bool slot_a = false, slot_b = false;
    if constexpr (SlotVisitor<V>) {
      slot_a = v.slot_stream(stream_a);
      slot_b = v.slot_stream(stream_b);
    }
    for (;;) {
      __builtin_prefetch(pa + kPrefetchEvents);
      __builtin_prefetch(pb + kPrefetchEvents);
      const uint64_t ta = pa->time, tb = pb->time;
      const bool a_first = ta != tb ? ta < tb : a_wins_ties;
      const uint64_t t = a_first ? ta : tb;
      if (t > (a_first ? last_a : last_b) || (a_first ? blocked_a : blocked_b)) {
        over = t > cap && bound_time > cap;  // else the other streams may still go
        break;
      }
      late += t < prev;
      prev = t;
      any = true;
      if constexpr (SlotVisitor<V>) {
        // As below, written straight into the visitor's array.
        const MergedEvent* e = a_first ? pa : pb;
        bool put = false;
        if (e->tag < kEventWide && (a_first ? slot_a : slot_b)) [[likely]] {
          if (k == room) [[unlikely]] {
            v.commit(out);
            k = 0;
            out = v.slots(room);
          }
          put = V::put(out, a_first ? stream_a : stream_b, *e);
          k += put;
        }
        if (!put) [[unlikely]] {
          v.commit(out);
          k = 0;
          if (e->tag < kEventWide)
            v.on_event(a_first ? stream_a : stream_b, *e);
          else
            deliver_rare(a_first ? *sa.b : *sb.b, *e, v);
          out = v.slots(room);
        }
        pa += a_first;
        pb += !a_first;
        if (pa == end_a || pb == end_b) break;
      } else if constexpr (RawVisitor<V>) {
        // A raw visitor only copies the event: pick it without a branch (the streams take
        // turns unpredictably), and advance the side it came from.
        const MergedEvent* e = a_first ? pa : pb;
        if (e->tag < kEventWide) [[likely]]
          v.on_event(a_first ? stream_a : stream_b, *e);
        else
          deliver_rare(a_first ? *sa.b : *sb.b, *e, v);
        pa += a_first;
        pb += !a_first;
        if (pa == end_a || pb == end_b) break;
      } else if (a_first) {
        deliver(*sa.b, *pa, v);
        if (++pa == end_a) break;  // the block is done: the caller moves on to the next one
      } else {
        deliver(*sb.b, *pb, v);
        if (++pb == end_b) break;
      }
    }
    if constexpr (SlotVisitor<V>) v.commit(out);
    sa.i = static_cast<std::size_t>(pa - sa.ev);
    sb.i = static_cast<std::size_t>(pb - sb.ev);
    stats_.out_of_order += late;
    if (any) {
      delivered_any_ = true;
      last_delivered_ = prev;
    }
  }
  settle(sa);
  settle(sb);
  return over;
}

// Delivers events of `q` while its head comes before (bound_time, bound_seq), the head of
// the next stream. True when it stopped at the limit or the target (the release is over).
template <class V>
bool EventMerger::run(Queue& q, uint64_t bound_time, uint64_t bound_seq, uint64_t limit, bool all, std::size_t target,
                      V& v) {
  for (;;) {
    EventBlock& b = *q.blocks.front();
    if (b.pending) [[unlikely]]
      decode_front(b, v);  // the next block of the stream
    // The last time this block may deliver up to (inclusive) and stay ahead of the next stream.
    uint64_t bound_last = bound_time;
    if (b.seq > bound_seq) {
      // The top of the heap comes first: a head later in the file than the next stream's is not
      // at time 0 while that one is.
      MEMTIDE_CHECK(bound_last != 0);
      if (bound_last == 0) return false;
      --bound_last;
    }
    if (!all && limit == 0) return true;
    const uint64_t last = all ? bound_last : std::min(bound_last, limit - 1);
    const MergedEvent* const events = b.events.data();
    const std::size_t n = b.events.size();
    const std::size_t first = b.rd;
    std::size_t i = first;
    uint64_t prev = delivered_any_ ? last_delivered_ : 0;
    uint64_t late = 0;
    // buffered_ is brought down by the run's events at its end (deliver_rare takes off the
    // side storage it consumes as it goes).
    for (; i < n; ++i) {
      // The events were written by the reader thread long ago (up to a window of them ahead):
      // they come from memory, and the hardware prefetcher stops at every page boundary.
      __builtin_prefetch(events + i + kPrefetchEvents);
      const MergedEvent& e = events[i];
      if (e.time > last) break;
      if (target != 0 && buffered_ - (i - first) * sizeof(MergedEvent) <= target) [[unlikely]]
        break;
      late += e.time < prev;
      prev = e.time;
      deliver(b, e, v);
    }
    MEMTIDE_CHECK(buffered_ >= (i - first) * sizeof(MergedEvent));
    buffered_ -= (i - first) * sizeof(MergedEvent);
    stats_.released += i - first;
    stats_.out_of_order += late;
    if (i != first) {
      delivered_any_ = true;
      last_delivered_ = prev;
    }
    b.rd = i;
    // Stopped inside the block: by the target, by the limit (the head is still the earliest),
    // or because another stream's head comes first.
    if (i < n) return (target != 0 && buffered_ <= target) || events[i].time <= bound_last;
    recycle(std::move(q.blocks.front()));
    q.blocks.pop_front();
    if (q.blocks.empty()) return false;
  }
}

template <class V>
void EventMerger::release(uint64_t limit, bool all, std::size_t target, V& v) {
  // A binary min-heap of the streams' heads. The top stream delivers a run of events up to the
  // head of the earliest other stream (the smaller child of the root), then its new head is
  // sifted down in place: one sift per run. When runs are a few events long (threads that
  // allocate at the same time), the two earliest streams take turns in two_way until one of
  // their blocks ends or a third stream's turn comes.
  const Later later;
  fill_heap(v);
  // Events the last run of one stream delivered before another's turn came: when streams
  // alternate every event or two, the two earliest take turns in two_way instead.
  uint64_t last_run = UINT64_MAX;
  while (!heap_.empty()) {
    if (heap_.size() >= 2 && target == 0 && last_run < kAlternating) {
      last_run = UINT64_MAX;
      // The bound is the earliest of the other streams: the root's other child or a child of
      // the second.
      const std::size_t c = heap_.size() > 2 && later(heap_[1], heap_[2]) ? 2 : 1;
      const HeapItem* bound = nullptr;
      for (std::size_t k : {3 - c, 2 * c + 1, 2 * c + 2})
        if (k < heap_.size() && (!bound || later(*bound, heap_[k]))) bound = &heap_[k];
      const uint64_t released = stats_.released;
      if (two_way(queues_[heap_[0].queue], queues_[heap_[c].queue], bound ? bound->time : UINT64_MAX,
                  bound ? bound->seq : UINT64_MAX, limit, all, v))
        break;
      const bool moved = stats_.released != released;
      fill_heap(v);
      if (moved || heap_.size() < 2) continue;
      // Nothing delivered: one step the long way.
    }
    Queue& q = queues_[heap_.front().queue];
    uint64_t bound_time = UINT64_MAX, bound_seq = UINT64_MAX;
    if (heap_.size() > 1) {
      const std::size_t c = heap_.size() > 2 && later(heap_[1], heap_[2]) ? 2 : 1;
      bound_time = heap_[c].time;
      bound_seq = heap_[c].seq;
    }
    const uint64_t released = stats_.released;
    if (run(q, bound_time, bound_seq, limit, all, target, v)) break;
    last_run = stats_.released - released;
    HeapItem h;
    if (head(q, h, v)) {
      heap_.front().time = h.time;
      heap_.front().seq = h.seq;
    } else {
      heap_.front() = heap_.back();
      heap_.pop_back();
    }
    sift_down(later);
  }
}

// The heap of the queues' heads, the earliest on top.
template <class V>
void EventMerger::fill_heap(V& v) {
  heap_.clear();
  for (uint32_t i = 0; i < queues_.size(); ++i) {
    HeapItem h;
    if (head(queues_[i], h, v)) {
      h.queue = i;
      heap_.push_back(h);
    }
  }
  std::make_heap(heap_.begin(), heap_.end(), Later{});
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
  // The top is the earliest head, which the release relies on.
  MEMTIDE_CHECK(n < 2 || !later(heap_[0], heap_[1]));
  MEMTIDE_CHECK(n < 3 || !later(heap_[0], heap_[2]));
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
