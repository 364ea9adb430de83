#include "analysis/batches.h"

#include <system_error>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <utility>

namespace memtide::analysis::detail {

using namespace memtide::fmt;

namespace {

// Stores a batch event without keeping its line in this core's cache: the replay reads it on
// the other core, while the reader's cache is better kept for the events it is about to merge
// (a block's decoded events, up to half a MiB per stream). push() fences before handing over.
[[gnu::always_inline]] inline void store_event(BatchEvent* slot, uint64_t word, uint64_t time) {
#if defined(__SSE2__)
  _mm_stream_si128(reinterpret_cast<__m128i*>(slot), _mm_set_epi64x(static_cast<long long>(time), static_cast<long long>(word)));
#else
  *slot = {word, time};
#endif
}
[[gnu::always_inline]] inline void store_extra(uint64_t* slot, uint64_t x) {
#if defined(__SSE2__) && defined(__x86_64__)
  _mm_stream_si64(reinterpret_cast<long long*>(slot), static_cast<long long>(x));
#else
  *slot = x;
#endif
}

}  // namespace

// The merger's visitor on the reader thread: appends what it delivers to the current item's
// batch, handing the item over whenever the batch is full.
struct BlockSource::Writer {
  BlockSource& src;
  ReadItem& it;
  Batch* b = it.batch.get();
  // The merger's SlotVisitor side (streams up to kMaxBatchStream; merge.h).
  struct Cursor {
    BatchEvent* ev;
    uint64_t* extra;
  };
  Cursor slots(std::size_t& room) {
    if (std::max(b->events.size(), b->extra.size()) == kBatchEvents) full();
    room = kBatchEvents - std::max(b->events.size(), b->extra.size());
    return {b->events.data() + b->events.size(), b->extra.data() + b->extra.size()};
  }
  // Writes `e` at the cursor (room for one more event) unless it does not fit a BatchEvent.
  [[gnu::always_inline]] static bool put(Cursor& c, uint32_t stream, const MergedEvent& e) {
    const bool alloc = e.tag < kTagFreeBase;
    const uint64_t wide = (e.addr >> 48) | (alloc ? e.size >> 32 : e.size);  // (a Free's size: munmap)
    if (wide != 0 || (e.tag & 31) >= kApiCount) [[unlikely]]
      return false;
    store_event(c.ev++, batch_word(e.addr, e.tag, stream), e.time);
    // (written for a Free too, where the next Alloc overwrites it: no branch)
    store_extra(c.extra, batch_extra(e.size, e.stack));
    c.extra += alloc;
    return true;
  }
  void commit(const Cursor& c) {
    b->events.grow_unchecked(static_cast<std::size_t>(c.ev - (b->events.data() + b->events.size())));
    b->extra.grow_unchecked(static_cast<std::size_t>(c.extra - (b->extra.data() + b->extra.size())));
  }
  static bool slot_stream(uint32_t stream) { return stream <= kMaxBatchStream; }
  [[gnu::always_inline]] void on_event(uint32_t stream, const MergedEvent& e) {
    if (stream <= kMaxBatchStream) [[likely]] {
      std::size_t room;
      Cursor c = slots(room);
      if (put(c, stream, e)) [[likely]] {
        commit(c);
        return;
      }
    }
    SideRecord& r = side(stream);
    if (e.tag < kTagFreeBase) {
      r.kind = SideRecord::Kind::Alloc;
      r.alloc = event_alloc(e, e.tag);
    } else {
      r.kind = SideRecord::Kind::Free;
      r.free = event_free(e, e.tag);
    }
  }
  void on_wire(uint32_t stream, uint64_t time, const uint8_t* p, const uint8_t* end) {
    SideRecord& r = side(stream);
    r.kind = SideRecord::Kind::Wire;
    r.time = time;
    r.offset = b->wire.size();
    r.length = static_cast<std::size_t>(end - p);
    b->wire.insert(b->wire.end(), p, end);
  }
  void on_alloc(uint32_t stream, const Alloc& a) {
    SideRecord& r = side(stream);
    r.kind = SideRecord::Kind::Alloc;
    r.alloc = a;
  }
  void on_sample_weight(uint32_t stream, const SampleWeight& w) {
    SideRecord& r = side(stream);
    r.kind = SideRecord::Kind::Weight;
    r.weight = w.weight;
  }
  SideRecord& side(uint32_t stream) {
    if (b->events.size() == kBatchEvents) full();
    b->events.push_back({kBatchSide, 0});
    SideRecord& r = b->side.emplace_back();
    r.stream = stream;
    return r;
  }
  // Hands the item over with what it has so far and goes on in a new one.
  [[gnu::noinline]] void full() {
    ReadItem done;
    done.batch = std::move(it.batch);
    done.read = ReadResult{};
    done.offset = it.offset;
    done.blocks = std::exchange(it.blocks, 0);
    done.warnings = std::move(it.warnings);
    it.warnings.clear();
    src.push(std::move(done));
    it.batch = src.take();
    b = it.batch.get();
  }
};

std::string block_warning(const ReadResult& r) { return r.message + " (rest of the block skipped)"; }

// A block the merger may decode when it reaches it: one of a thread's stream in a file whose
// block flags say which blocks hold untimed records (StackDef, Symbols; the others are in
// stream 0), so that nothing in it is due before its events.
bool BlockSource::pending_ok(const BlockHeader& h) const {
  return hints_ && h.stream != 0 && h.flags == 0 && h.kind == BlockKind::Records;
}

BlockSource::BlockSource(FileReader& reader, EventMerger& merger, uint64_t stop_after)
    : reader_(reader), merger_(merger), hints_((reader.info().flags & kFileFlagBlockHints) != 0), stop_after_(stop_after) {
  try {
    threaded_ = true;  // before the thread starts: its push() reads it
    thread_ = std::thread([this] { produce(); });
  } catch (const std::system_error&) {
    threaded_ = false;  // no thread: read and merge on demand in next()
  }
}

BlockSource::~BlockSource() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  not_full_.notify_all();
  if (thread_.joinable()) thread_.join();
}

ReadItem BlockSource::next() {
  std::unique_lock<std::mutex> l(mu_);
  if (threaded_) {
    not_empty_.wait(l, [this] { return !items_.empty(); });
  } else {
    l.unlock();
    while (items_.empty()) read_some(decoder_);
    l.lock();
  }
  ReadItem it = std::move(items_.front());
  items_.pop_front();
  ahead_ -= it.batch->bytes();
  l.unlock();
  not_full_.notify_one();
  return it;
}

void BlockSource::give(std::unique_ptr<Batch> b) {
  b->clear();
  std::lock_guard<std::mutex> l(mu_);
  if (pool_.size() < kPool) pool_.push_back(std::move(b));
}

std::unique_ptr<Batch> BlockSource::take() {
  std::unique_ptr<Batch> b;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!pool_.empty()) {
      b = std::move(pool_.back());
      pool_.pop_back();
    }
  }
  if (!b) {
    b = std::make_unique<Batch>();
    b->events.reserve(kBatchEvents);
    b->extra.reserve(kBatchEvents);
  }
  return b;
}

// Queues an item for next(), waiting while kAheadBytes are queued (with the reader thread).
void BlockSource::push(ReadItem it) {
#if defined(__SSE2__)
  _mm_sfence();  // the batch's streamed stores (store_event) before the hand-over
#endif
  const std::size_t bytes = it.batch->bytes();
  std::unique_lock<std::mutex> l(mu_);
  if (threaded_) {
    not_full_.wait(l, [this] { return stop_ || ahead_ < kAheadBytes; });
    if (stop_) throw Stopped{};
  }
  ahead_ += bytes;
  const bool was_empty = items_.empty();
  items_.push_back(std::move(it));
  l.unlock();
  if (was_empty) not_empty_.notify_one();
}

// Reads and merges blocks until the reading stops or a batch is full; queues the items.
// Returns whether more can be read.
bool BlockSource::read_some(EventDecoder& decoder) {
  static_assert(SlotVisitor<Writer>);  // (the merge's tightest loop writes the batch directly)
  ReadItem it;
  it.batch = take();
  Writer w{*this, it};
  for (;;) {
    it.read = reader_.next(block_);
    if (!it.read.ok()) {
      // After a corrupt block the reader has moved to the next valid header.
      if (it.read.end_of_file() || it.read.status != ReadStatus::Corrupt || !reader_.resync()) it.last = true;
      break;
    }
    ++it.blocks;
    it.offset = reader_.offset();
    if (block_.header.flags & kBlockFlagCheckpointData) continue;  // a checkpoint's live blocks: state, not events
    if (pending_ok(block_.header)) {
      merger_.add_pending(block_, w);
    } else {
      std::unique_ptr<EventBlock> b = merger_.take_spare();
      if (!b) b = std::make_unique<EventBlock>();
      decoder.decode(block_, *b);
      if (!b->result.ok()) it.warnings.push_back(block_warning(b->result));
      merger_.add_events(std::move(b), w);
    }
    for (const ReadResult& e : merger_.take_errors()) it.warnings.push_back(block_warning(e));
    if (it.batch->events.size() && it.batch->events.data()[it.batch->events.size() - 1].time > stop_after_) [[unlikely]] {
      it.read = ReadResult::end(reader_.offset());
      it.last = true;
      break;
    }
    if (it.batch->events.size() >= kBatchEvents / 2) break;
  }
  const bool more = !it.last;
  push(std::move(it));
  return more;
}

void BlockSource::produce() {
  EventDecoder decoder;
  try {
    while (read_some(decoder)) {
    }
  } catch (const Stopped&) {
    // The merger stopped in the middle of a release: the session is broken (Session::advance).
  }
}

}  // namespace memtide::analysis::detail
