// One block's records decoded once, for the merge (formats/merge.h).
//
// EventDecoder turns a block into an EventBlock: its Allocs and Frees as an array of
// fixed-size 32-byte MergedEvents (the merge's working set: it compares their times and moves
// them, never the variable-length wire records), the rare other timed records as their wire
// bytes, the untimed ones (delivered at once, in file order) apart. The decoder needs no merger
// state, so a reader thread can decode blocks while another merges them. Its fast path
// (event_block_fast.h) decodes runs of Allocs and Frees straight into the events array, with a
// portable and a BMI2 extraction of the varints (event_block_bmi2.cpp).
//
// Sections: [1] MergedEvent  [2] PodArray, EventBlock  [3] EventDecoder
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "formats/decoder.h"

namespace memtide::fmt {

// ---------------------------------------------------------------------------------------
// [1] MergedEvent: a timed record as the merge holds it
// ---------------------------------------------------------------------------------------

// A timed record. Alloc and Free carry their fields; the rest point into EventBlock's side
// storage, consumed in order.
struct MergedEvent {
  uint64_t time;
  uint64_t addr;   // Alloc/Free: the address. kEventOther: the stream's time before the record
  uint64_t size;   // Alloc: the size. Free: the length (munmap), else 0
  uint32_t stack;  // Alloc: the stack id
  uint8_t tag;     // Alloc/Free: the wire tag (0x40 + api, 0x60 + api); else kEvent*
};
static_assert(sizeof(MergedEvent) == 32);

// The Alloc (`tag` below kTagFreeBase) or the Free (below kEventWide) that an event stands
// for: `E` has MergedEvent's time, addr, size and stack (a MergedEvent, or a copy of one that
// keeps its tag elsewhere).
template <class E>
[[gnu::always_inline]] inline Alloc event_alloc(const E& e, unsigned tag) {
  Alloc x;
  x.time = e.time;
  x.addr = e.addr;
  x.size = e.size;
  x.stack = e.stack;
  x.api = static_cast<Api>(tag & 31);
  return x;
}
template <class E>
[[gnu::always_inline]] inline Free event_free(const E& e, unsigned tag) {
  Free x;
  x.time = e.time;
  x.addr = e.addr;
  x.length = e.size;
  x.api = static_cast<Api>(tag & 31);
  return x;
}

// Tags of the events that are not a plain Alloc/Free (above every Alloc/Free wire tag).
inline constexpr uint8_t kEventWide = 0x80;      // an Alloc in EventBlock::wide (stack id >= 2^32)
inline constexpr uint8_t kEventWeighted = 0x81;  // an Alloc in EventBlock::wide after a SampleWeight
inline constexpr uint8_t kEventOther = 0x82;     // another timed record, its bytes in EventBlock::other

// ---------------------------------------------------------------------------------------
// [2] PodArray, EventBlock
// ---------------------------------------------------------------------------------------

// A growable array of trivially copyable elements that are never value-initialised (an
// EventBlock's events are written once, in place, by EventDecoder).
template <class T>
class PodArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  PodArray() = default;
  PodArray(const PodArray&) = delete;
  PodArray& operator=(const PodArray&) = delete;
  PodArray(PodArray&& o) noexcept { swap(o); }
  PodArray& operator=(PodArray&& o) noexcept {
    swap(o);
    return *this;
  }
  ~PodArray() { std::free(p_); }

  T* data() { return p_; }
  const T* data() const { return p_; }
  std::size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  const T& operator[](std::size_t i) const { return p_[i]; }
  void clear() { n_ = 0; }
  // Makes room for `n` elements in all, keeping the first size() ones.
  void reserve(std::size_t n) {
    if (n <= cap_) return;
    void* p;
    if (n_ == 0) {
      std::free(p_);
      p_ = nullptr;
      p = std::malloc(n * sizeof(T));
    } else {
      p = std::realloc(p_, n * sizeof(T));
    }
    if (!p) throw std::bad_alloc();
    p_ = static_cast<T*>(p);
    cap_ = n;
  }
  std::size_t capacity() const { return cap_; }
  void push_back(const T& x) {
    if (n_ == cap_) [[unlikely]]
      reserve(cap_ < 16 ? 16 : cap_ * 2);
    p_[n_++] = x;
  }
  // Counts `k` more elements, written by the caller in place (within the reserved room).
  void grow_unchecked(std::size_t k) { n_ += k; }
  void assign(const T* p, std::size_t n) {
    n_ = 0;
    reserve(n);
    if (n) std::memcpy(static_cast<void*>(p_), p, n * sizeof(T));
    n_ = n;
  }
  void swap(PodArray& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    std::swap(cap_, o.cap_);
  }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0, cap_ = 0;
};

struct EventBlock {
  uint32_t stream = 0;
  uint64_t offset = 0;                 // file offset of the block
  PodArray<MergedEvent> events;        // timed records in stream order
  std::vector<Alloc> wide;             // Allocs that do not fit a MergedEvent
  std::vector<uint8_t> other;          // wire bytes of the other timed records
  std::vector<uint8_t> immediate;      // wire bytes of untimed and unknown records (file order)
  std::vector<uint64_t> watermarks;    // times of the block's Watermark records
  ReadResult result;                   // Corrupt at a bad record: the records before it are here

  // The merger's position.
  uint64_t seq = 0;
  std::size_t rd = 0, wide_rd = 0, other_rd = 0;

  // Queued undecoded (EventMerger::add_pending): the block's header and payload, decoded when
  // it reaches the front of its queue. clear() keeps them (the decoder reads them).
  bool pending = false;
  BlockHeader header;
  PodArray<uint8_t> raw;

  void clear();
  // Bytes held for the merge window (events and side storage).
  std::size_t queued_bytes() const {
    return events.size() * sizeof(MergedEvent) + wide.size() * sizeof(Alloc) + other.size();
  }
};

// ---------------------------------------------------------------------------------------
// [3] EventDecoder
// ---------------------------------------------------------------------------------------

namespace detail {
// EventDecoder's fast path (event_block_fast.h): decodes Allocs and Frees at `p` into `out` (room for
// `room` events) while they take the fast path, updating the stream registers; stops at the
// first record that does not (another tag, a varint longer than 8 bytes, a stack id of 2^32 or
// more, fewer than 41 bytes left). Returns the position after the last decoded record and in
// `written` the number of events.
using FastEventsFn = const uint8_t* (*)(const uint8_t* p, const uint8_t* end, StreamRegs& r, MergedEvent* out,
                                        std::size_t room, std::size_t& written);
}  // namespace detail

// Decodes blocks into EventBlocks. One per thread: it holds the scratch space.
class EventDecoder {
 public:
  // How the Allocs and Frees are decoded (event_block_fast.h); the same events either way. Auto: BMI2
  // when the CPU has it (and its pext is fast), else Portable. Bmi2 where it is not available
  // falls back to Portable; impl() tells which one is used.
  enum class Impl : uint8_t { Auto, Portable, Bmi2 };
  explicit EventDecoder(Impl impl = Impl::Auto);
  static bool bmi2_available();
  Impl impl() const { return impl_; }
  // Decodes every record of `block` into `out` (cleared first). out.result is Ok, or Corrupt at
  // the first bad record (what decode_block would return); the records before it are kept.
  void decode(const Block& block, EventBlock& out);
  DecodeScratch& scratch() { return *scratch_; }

 private:
  std::unique_ptr<DecodeScratch> scratch_;
  detail::FastEventsFn fast_ = nullptr;
  Impl impl_ = Impl::Portable;
};

}  // namespace memtide::fmt
