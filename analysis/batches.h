// The report's two threads (docs/ARCHITECTURE.md, "Two threads"): BlockSource runs a reader
// thread that reads, checks, decompresses and decodes the blocks (EventDecoder) and merges them
// into time order (EventMerger), while the calling thread replays what was merged
// (replay.cpp). The merged records reach the replay in batches: Allocs and Frees as 16-byte
// BatchEvents in delivery order (an Alloc's size and stack in 8 more bytes beside them), the
// rare other records as their wire bytes, decoded again by the replay. The merge of the
// threads' streams, a comparison or two per event on a multi-threaded trace, runs on the
// reader's side, which keeps the two threads about equally busy (the replay has the live map
// and the per-stack counters). The reader runs up to kAheadBytes of batches ahead.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "formats/decoder.h"
#include "formats/merge.h"
#include "formats/reader.h"

namespace memtide::analysis::detail {

// An Alloc or a Free as the merger delivered it, in 16 bytes (half a MergedEvent: the reader
// writes and the replay reads every event of the trace through memory): `word` holds the
// address in its low 48 bits, the MergedEvent tag minus 0x40 in the next 6 and the stream in the
// top 10; an Alloc's size (below 2^32) and stack id are the next entry of Batch::extra. An
// event that does not fit (an address of 2^48 or more, a larger size, a stream above
// kMaxBatchStream, an unknown api, a munmap's length) goes through a SideRecord, which
// kBatchSide stands for.
struct BatchEvent {
  uint64_t word;
  uint64_t time;
};
static_assert(sizeof(BatchEvent) == 16);
constexpr uint64_t kBatchAddrMask = (uint64_t{1} << 48) - 1;
constexpr unsigned kBatchCodeShift = 48, kBatchStreamShift = 54;
constexpr uint32_t kMaxBatchStream = (uint32_t{1} << 10) - 1;
constexpr uint64_t kBatchSide = uint64_t{0x3F} << kBatchCodeShift;  // the code of tag 0x7F (an api never sent)

// A BatchEvent's word and its fields; an Alloc's extra entry and its fields.
constexpr uint64_t batch_word(uint64_t addr, uint8_t tag, uint32_t stream) {
  return addr | static_cast<uint64_t>(tag - fmt::kTagAllocBase) << kBatchCodeShift | uint64_t{stream} << kBatchStreamShift;
}
constexpr uint64_t batch_addr(uint64_t word) { return word & kBatchAddrMask; }
constexpr uint32_t batch_tag(uint64_t word) {
  return static_cast<uint32_t>((word >> kBatchCodeShift) & 0x3F) + fmt::kTagAllocBase;
}
constexpr uint32_t batch_stream(uint64_t word) { return static_cast<uint32_t>(word >> kBatchStreamShift); }
constexpr uint64_t batch_extra(uint64_t size, uint32_t stack) { return size | uint64_t{stack} << 32; }
constexpr uint64_t extra_size(uint64_t x) { return static_cast<uint32_t>(x); }
constexpr uint64_t extra_stack(uint64_t x) { return x >> 32; }

struct SideRecord {
  enum class Kind : uint8_t { Alloc, Free, Weight, Wire } kind = Kind::Wire;
  uint32_t stream = 0;
  uint64_t time = 0;                   // Wire: the stream's time before the records
  fmt::Alloc alloc;                    // Alloc
  fmt::Free free;                      // Free
  uint64_t weight = 0;                 // Weight
  std::size_t offset = 0, length = 0;  // Wire: the records' bytes in Batch::wire
};

struct Batch {
  fmt::PodArray<BatchEvent> events;
  fmt::PodArray<uint64_t> extra;  // per Alloc event, in order: size | stack << 32
  std::vector<SideRecord> side;
  std::vector<uint8_t> wire;
  void clear() {
    events.clear();
    extra.clear();
    side.clear();
    wire.clear();
  }
  std::size_t bytes() const {
    return events.size() * sizeof(BatchEvent) + extra.size() * sizeof(uint64_t) + side.size() * sizeof(SideRecord) +
           wire.size();
  }
};

// The warning for a block whose records stop at a bad one.
std::string block_warning(const fmt::ReadResult& r);

// What the reader hands over: a batch and where the reading stands after it.
struct ReadItem {
  std::unique_ptr<Batch> batch;       // what was merged since the previous item (may be empty)
  fmt::ReadResult read;               // Ok, or what stopped the reading after it
  uint64_t offset = 0;                // reader offset after the last block read
  uint64_t blocks = 0;                // blocks read
  std::vector<std::string> warnings;  // blocks whose records stop at a bad one
  bool last = false;                  // nothing follows
};

// The reader side: next() hands over the batches in order, give() takes them back for reuse.
// Without a thread (one could not be started) next() reads and merges on demand.
class BlockSource {
 public:
  // `stop_after`: the reading stops (as at the end of the file) after a block whose events
  // released a batch event timed after it (a window's end, Session): nothing is read ahead past it.
  BlockSource(fmt::FileReader& reader, fmt::EventMerger& merger, uint64_t stop_after = UINT64_MAX);
  ~BlockSource();
  BlockSource(const BlockSource&) = delete;
  BlockSource& operator=(const BlockSource&) = delete;

  ReadItem next();
  // Gives back a Batch that has been replayed.
  void give(std::unique_ptr<Batch> b);

 private:
  // A batch holds kBatchEvents events (1 MiB, and up to 512 KiB of extra), allocated once; up
  // to kAheadBytes of them wait.
  static constexpr std::size_t kBatchEvents = std::size_t{1} << 16, kAheadBytes = std::size_t{64} << 20,
                               kPool = 128;
  struct Stopped {};  // thrown on the reader thread when the source is being destroyed
  struct Writer;      // the merger's visitor on the reader thread

  bool pending_ok(const fmt::BlockHeader& h) const;
  std::unique_ptr<Batch> take();
  void push(ReadItem it);
  bool read_some(fmt::EventDecoder& decoder);
  void produce();

  fmt::FileReader& reader_;
  fmt::EventMerger& merger_;  // used by the reader thread until it stops
  fmt::Block block_;
  fmt::EventDecoder decoder_;  // used without a thread
  bool hints_ = false;         // the file has block hints (pending_ok)
  uint64_t stop_after_ = UINT64_MAX;
  bool threaded_ = false;      // a reader thread runs (set before it starts, read by both sides)
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
  std::deque<ReadItem> items_;
  std::size_t ahead_ = 0;  // batch bytes in items_
  std::vector<std::unique_ptr<Batch>> pool_;
  bool stop_ = false;
};

}  // namespace memtide::analysis::detail
