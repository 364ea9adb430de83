#include "formats/merge.h"

#include <cstring>

namespace memtide::fmt {

bool EventMerger::queued_prefixed_tag(uint8_t tag) {
  const RecordType t = record_type_of_tag(tag);
  return t != RecordType::Count && is_timed(t);
}

uint32_t EventMerger::queue_index(uint32_t stream) {
  const auto [it, inserted] = index_.try_emplace(stream, static_cast<uint32_t>(queues_.size()));
  if (inserted) {
    queues_.emplace_back();
    queues_.back().stream = stream;
  }
  return it->second;
}

void EventMerger::append(Queue& q, const uint8_t* from, const uint8_t* to) {
  if (to <= from) return;
  q.buf.insert(q.buf.end(), from, to);
  buffered_ += static_cast<std::size_t>(to - from);
}

void EventMerger::append_block_mark(Queue& q, uint64_t seq, uint64_t base_time, uint64_t base_addr) {
  uint8_t m[kBlockMarkSize];
  m[0] = kMarkBlock;
  wire::store_le(m + 1, seq);
  wire::store_le(m + 9, base_time);
  wire::store_le(m + 17, base_addr);
  append(q, m, m + kBlockMarkSize);
}

void EventMerger::append_weight(Queue& q, uint64_t weight) {
  uint8_t m[1 + wire::kMaxVarint];
  m[0] = kMarkWeight;
  append(q, m, wire::put_varint(m + 1, weight));
}

void EventMerger::note_watermark(uint64_t time) {
  ++stats_.watermarks;
  // Having read watermark k+1, every record timed before watermark k has been read.
  if (have_watermark_) {
    if (!have_limit_ || last_watermark_ > limit_) {
      limit_ = last_watermark_;
      limit_moved_ = true;
    }
    have_limit_ = true;
  }
  have_watermark_ = true;
  last_watermark_ = time;
}

bool EventMerger::peek_slow(Queue& q) {
  for (;;) {
    if (q.rd >= q.buf.size()) return false;
    const uint8_t* const base = q.buf.data();
    const uint8_t* p = base + q.rd;
    const uint8_t* const end = base + q.buf.size();
    if (*p == kMarkBlock) {
      if (end - p < static_cast<std::ptrdiff_t>(kBlockMarkSize)) break;
      q.block_seq = wire::load_le<uint64_t>(p + 1);
      q.regs = StreamRegs{wire::load_le<uint64_t>(p + 9), wire::load_le<uint64_t>(p + 17), 0};
      q.rd += kBlockMarkSize;
      buffered_ -= kBlockMarkSize;
      continue;
    }
    // Every queued record starts with its dt: right after the tag for Alloc/Free, after the
    // length prefix for the others.
    wire::Cursor c(p, end);
    uint8_t tag = 0;
    uint64_t skip = 0, dt = 0;
    c.get_u8(tag);
    if (tag == kMarkWeight && !(c.get_varint(skip) && c.get_u8(tag))) break;
    if (!(tag >= kTagAllocBase && tag < kTagFreeBase + 32) && !c.get_varint(skip)) break;
    if (!c.get_varint(dt)) break;
    q.head_time = q.regs.time + dt;
    return true;
  }
  // Unreachable with bytes copied from checked records; drop the rest defensively.
  buffered_ -= q.buf.size() - q.rd;
  q.rd = q.buf.size();
  return false;
}

void EventMerger::compact() {
  for (Queue& q : queues_) {
    if (q.rd == 0) continue;
    if (q.rd >= q.buf.size()) {
      q.buf.clear();
      q.rd = 0;
    } else if (q.rd >= q.buf.size() / 2) {
      // Amortised O(1) per byte: we only move what is left when at least as much was consumed.
      std::memmove(q.buf.data(), q.buf.data() + q.rd, q.buf.size() - q.rd);
      q.buf.resize(q.buf.size() - q.rd);
      q.rd = 0;
    }
  }
}

}  // namespace memtide::fmt
