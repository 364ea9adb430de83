#include "formats/merge.h"

#include <algorithm>

namespace memtide::fmt {

// ---------------------------------------------------------------------------------------
// EventMerger
// ---------------------------------------------------------------------------------------

uint32_t EventMerger::queue_index(uint32_t stream) {
  const auto [it, inserted] = index_.try_emplace(stream, static_cast<uint32_t>(queues_.size()));
  if (inserted) {
    queues_.emplace_back();
    queues_.back().stream = stream;
  }
  return it->second;
}

std::unique_ptr<EventBlock> EventMerger::spare() {
  std::unique_ptr<EventBlock> b = take_spare();
  return b ? std::move(b) : std::make_unique<EventBlock>();
}

std::unique_ptr<EventBlock> EventMerger::take_spare() {
  if (spare_.empty()) return nullptr;
  std::unique_ptr<EventBlock> b = std::move(spare_.back());
  spare_.pop_back();
  adopt_warm(*b);
  return b;
}

std::unique_ptr<EventBlock> EventMerger::bare_spare() {
  if (spare_.empty()) return std::make_unique<EventBlock>();
  std::unique_ptr<EventBlock> b = std::move(spare_.back());
  spare_.pop_back();
  stash_warm(*b);
  return b;
}

void EventMerger::adopt_warm(EventBlock& b) {
  if (warm_.empty() || b.events.capacity() >= warm_.back().capacity()) return;
  b.events.swap(warm_.back());
  warm_.pop_back();  // the block's own, smaller array
}

void EventMerger::stash_warm(EventBlock& b) {
  if (!b.events.capacity() || warm_.size() >= kWarmArrays) return;
  warm_.emplace_back();
  warm_.back().swap(b.events);
}

void EventMerger::after_add() {
  ++next_block_seq_;
  stats_.peak_buffered_bytes = std::max<uint64_t>(stats_.peak_buffered_bytes, buffered_);
}

void EventMerger::decode_pending(EventBlock& b) {
  buffered_ -= b.raw.size();
  adopt_warm(b);
  Block block;
  block.offset = b.offset;
  block.header = b.header;
  block.payload = {b.raw.data(), b.raw.size()};
  const uint64_t seq = b.seq;
  decoder_.decode(block, b);
  b.pending = false;
  b.seq = seq;
  if (!b.result.ok()) errors_.push_back(b.result);
  for (uint64_t t : b.watermarks) note_watermark(t);  // (watermarks are in stream 0: not here)
  buffered_ += b.queued_bytes();
  stats_.peak_buffered_bytes = std::max<uint64_t>(stats_.peak_buffered_bytes, buffered_);
}

void EventMerger::recycle(std::unique_ptr<EventBlock> b) {
  // The events array goes to the warm ones, handed to the next pending block decoded: only the
  // streams' front blocks need one, and the latest used is still in the cache.
  stash_warm(*b);
  b->pending = false;
  // Kept for reuse up to about a window's worth of blocks (returning their memory only to
  // fault it in again for the next window costs more than the copy of the events).
  if (spare_.size() < 1024) spare_.push_back(std::move(b));
}

void EventMerger::note_watermark(uint64_t time) {
  ++stats_.watermarks;
  // Having read watermark k+1, every record timed before watermark k has been read; with exact
  // watermarks, every record timed before this one.
  if (opt_.exact_watermarks || have_watermark_) {
    const uint64_t vouched = opt_.exact_watermarks ? time : last_watermark_;
    if (!have_limit_ || vouched > limit_) {
      limit_ = vouched;
      limit_moved_ = true;
    }
    have_limit_ = true;
  }
  have_watermark_ = true;
  last_watermark_ = time;
}

}  // namespace memtide::fmt
