#include "formats/event_block.h"

#include <bit>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define MEMTIDE_FAST_TARGET
#include "formats/event_block_fast.h"

namespace memtide::fmt {

void EventBlock::clear() {
  stream = 0;
  offset = 0;
  events.clear();
  wide.clear();
  other.clear();
  immediate.clear();
  watermarks.clear();
  result = {};
  seq = 0;
  rd = wide_rd = other_rd = 0;
}

namespace {

// Whether a length-prefixed record with this tag is queued (known and timed).
bool queued_prefixed_tag(uint8_t tag) {
  const RecordType t = record_type_of_tag(tag);
  return t != RecordType::Count && is_timed(t);
}

void append(std::vector<uint8_t>& to, const uint8_t* from, const uint8_t* end) { to.insert(to.end(), from, end); }

// The portable extraction of four varints (event_block_fast.h): the ends of all four come from one
// 32-byte mask, so the values are extracted independently of each other; each value is
// squeezed out of its 8-byte load in three mask-and-shift steps.
struct PortableVarints {
  [[gnu::always_inline]] static inline bool get(const uint8_t* p, uint64_t v[4], unsigned len[4]) {
#if defined(__SSE2__)
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
    uint32_t stops =
        ~(static_cast<uint32_t>(_mm_movemask_epi8(lo)) | static_cast<uint32_t>(_mm_movemask_epi8(hi)) << 16);
    unsigned start = 0;
    for (int k = 0; k < 4; ++k) {
      if (stops == 0) return false;
      const unsigned e = static_cast<unsigned>(__builtin_ctz(stops));  // last byte of varint k
      stops &= stops - 1;
      const unsigned n = e + 1 - start;
      if (n > 8) return false;
      const uint64_t keep = n == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * n)) - 1;
      uint64_t x = detail::fast_load64(p + start) & keep & 0x7f7f7f7f7f7f7f7full;
      x = ((x & 0x7f007f007f007f00ull) >> 1) | (x & 0x007f007f007f007full);
      x = ((x & 0x3fff00003fff0000ull) >> 2) | (x & 0x00003fff00003fffull);
      x = ((x & 0x0fffffff00000000ull) >> 4) | (x & 0x000000000fffffffull);
      v[k] = x;
      len[k] = e + 1;
      start = e + 1;
    }
    return true;
#else
    const uint8_t* q = p;
    for (int k = 0; k < 4; ++k) {
      if (!detail::varint_fast(q, v[k])) return false;
      len[k] = static_cast<unsigned>(q - p);
    }
    return true;
#endif
  }
};

const uint8_t* portable_fast_events(const uint8_t* p, const uint8_t* end, StreamRegs& r, MergedEvent* out,
                                    std::size_t room, std::size_t& written) {
  return detail::fast_events_run<PortableVarints>(p, end, r, out, room, written);
}

// Receives the decoded records of one block. Allocs and Frees become events; a SampleWeight
// waits for its Alloc, and one that never gets one (overridden, or last in the block) is
// passed on at once (as a SampleWeight record among the immediate ones), so that every record
// reaches the consumer exactly once.
struct Collect : NullVisitor {
  EventBlock& b;
  PodArray<MergedEvent>& events;
  bool has_weight = false;
  uint64_t weight = 0;
  explicit Collect(EventBlock& out) : b(out), events(out.events) {}

  void put_weight(uint64_t w) {
    uint8_t rec[2 + 2 * wire::kMaxVarint];
    uint8_t body[wire::kMaxVarint];
    const auto len = static_cast<uint64_t>(wire::put_varint(body, w) - body);
    rec[0] = tag_of(RecordType::SampleWeight);
    uint8_t* p = wire::put_varint(rec + 1, len);
    std::memcpy(p, body, len);
    append(b.immediate, rec, p + len);
  }
  void on_sample_weight(uint32_t, const SampleWeight& x) {
    if (has_weight) put_weight(weight);
    has_weight = true;
    weight = x.weight;
  }
  void flush_weight() {
    if (has_weight) put_weight(weight);
    has_weight = false;
  }
  void on_alloc(uint32_t, const Alloc& a) {
    if (has_weight || a.stack > UINT32_MAX) [[unlikely]] {
      events.push_back({a.time, 0, 0, 0, has_weight ? kEventWeighted : kEventWide});
      b.wide.push_back(a);
    } else {
      events.push_back(
          {a.time, a.addr, a.size, static_cast<uint32_t>(a.stack), static_cast<uint8_t>(kTagAllocBase + static_cast<uint8_t>(a.api))});
    }
    has_weight = false;
  }
  void on_free(uint32_t, const Free& f) {
    events.push_back({f.time, f.addr, f.length, 0, static_cast<uint8_t>(kTagFreeBase + static_cast<uint8_t>(f.api))});
  }
  void on_watermark(uint32_t, const Watermark& x) { b.watermarks.push_back(x.time); }
};

}  // namespace

EventDecoder::EventDecoder(Impl impl) : scratch_(std::make_unique<DecodeScratch>()) {
  if (impl == Impl::Auto) impl = bmi2_available() ? Impl::Bmi2 : Impl::Portable;
  detail::FastEventsFn bmi2 = impl == Impl::Bmi2 ? detail::bmi2_fast_events() : nullptr;
  if (bmi2 && detail::cpu_has_fast_bmi2()) {
    fast_ = bmi2;
    impl_ = Impl::Bmi2;
  } else {
    fast_ = &portable_fast_events;
    impl_ = Impl::Portable;
  }
}

bool EventDecoder::bmi2_available() { return detail::bmi2_fast_events() != nullptr && detail::cpu_has_fast_bmi2(); }

void EventDecoder::decode(const Block& block, EventBlock& out) {
  out.clear();
  out.stream = block.header.stream;
  out.offset = block.offset;
  // Room for the events of a typical block (about 6 raw bytes per event; every timed record
  // takes at least 3), grown when a block holds more: events are written in place, and a
  // recycled block's array is usually big enough already.
  PodArray<MergedEvent>& events = out.events;
  events.reserve(std::bit_ceil(block.payload.size() / 5 + 16));
  Collect c(out);
  DecodeScratch& scratch = *scratch_;
  const detail::FastEventsFn fast = fast_;
  StreamRegs r;
  r.time = block.header.base_time;
  r.addr = block.header.base_addr;
  const uint8_t* const begin = block.payload.data();
  const uint8_t* const end = begin + block.payload.size();
  const uint8_t* p = begin;
  while (p < end) {
    // A run of Allocs and Frees on the fast path (event_block_fast.h); anything unusual (a pending
    // SampleWeight, a wide stack id, an invalid or long varint, the end of the block near, a
    // full array) takes the general path below, one record at a time.
    if (!c.has_weight) [[likely]] {
      if (events.size() == events.capacity()) [[unlikely]]
        events.reserve(events.capacity() * 2);
      std::size_t written;
      p = fast(p, end, r, events.data() + events.size(), events.capacity() - events.size(), written);
      events.grow_unchecked(written);
      if (p >= end) break;
    }
    const uint8_t* rec = p;
    const uint8_t tag = *p;
    const uint64_t before = r.time;
    const DecodeError e = decode_record(p, end, r, out.stream, scratch, c);
    if (e != DecodeError::None) [[unlikely]] {
      out.result = ReadResult::corrupt(block.offset, describe(e, tag), static_cast<uint64_t>(rec - begin));
      break;
    }
    if (tag >= kTagAllocBase) [[likely]]  // an Alloc or a Free (full or short)
      continue;
    if (queued_prefixed_tag(tag)) {
      events.push_back({r.time, before, 0, 0, kEventOther});
      append(out.other, rec, p);
    } else if (tag != tag_of(RecordType::SampleWeight)) {
      append(out.immediate, rec, p);
    }
  }
  c.flush_weight();
}

}  // namespace memtide::fmt
