#include "formats/encoder.h"

#include <lz4.h>
#include <lz4hc.h>
#include <xxhash.h>

#include <cstring>

namespace memtide::fmt {

RecordBuilder::RecordBuilder(uint8_t* buf, std::size_t cap, RecordType type)
    : buf_(buf), cap_(cap), pos_(1 + kLengthSlot) {
  if (cap_ < pos_) {
    overflow_ = true;
    return;
  }
  buf_[0] = tag_of(type);
}

bool RecordBuilder::room(std::size_t n) {
  if (overflow_ || cap_ - pos_ < n) {
    overflow_ = true;
    return false;
  }
  return true;
}

RecordBuilder& RecordBuilder::u8(uint8_t v) {
  if (room(1)) buf_[pos_++] = v;
  return *this;
}

RecordBuilder& RecordBuilder::varint(uint64_t v) {
  if (room(wire::kMaxVarint)) pos_ = static_cast<std::size_t>(wire::put_varint(buf_ + pos_, v) - buf_);
  return *this;
}

RecordBuilder& RecordBuilder::svarint(int64_t v) { return varint(wire::zigzag(v)); }

RecordBuilder& RecordBuilder::bytes(const void* data, std::size_t n) {
  if (room(wire::kMaxVarint + n)) pos_ = static_cast<std::size_t>(wire::put_bytes(buf_ + pos_, data, n) - buf_);
  return *this;
}

std::size_t RecordBuilder::finish() {
  if (overflow_) return 0;
  const std::size_t payload = pos_ - (1 + kLengthSlot);
  if (payload >= kMaxBlockPayload) return 0;
  uint8_t len[wire::kMaxVarint];
  const std::size_t len_size = static_cast<std::size_t>(wire::put_varint(len, payload) - len);
  std::memmove(buf_ + 1 + len_size, buf_ + 1 + kLengthSlot, payload);
  std::memcpy(buf_ + 1, len, len_size);
  return 1 + len_size + payload;
}

std::size_t encode_scan_region(uint8_t* out, std::size_t cap, uint64_t index, ScanKind kind, uint64_t start,
                               uint64_t end) {
  RecordBuilder b(out, cap, RecordType::Scan);
  b.u8(static_cast<uint8_t>(ScanOp::Region)).varint(index).u8(static_cast<uint8_t>(kind)).varint(start).varint(end);
  return b.finish();
}

std::size_t encode_scan_refs(uint8_t* out, std::size_t cap, const uint64_t* locs, const uint64_t* values,
                             std::size_t n) {
  RecordBuilder b(out, cap, RecordType::Scan);
  b.u8(static_cast<uint8_t>(ScanOp::Refs)).varint(n);
  uint64_t loc = 0, value = 0;
  for (std::size_t i = 0; i < n; ++i) {
    b.varint((locs[i] - loc) / 8).svarint(static_cast<int64_t>(values[i] - value));
    loc = locs[i];
    value = values[i];
  }
  return b.finish();
}

std::size_t encode_scan_done(uint8_t* out, std::size_t cap, uint64_t regions, uint64_t words, uint64_t refs,
                             uint64_t duration_ns) {
  RecordBuilder b(out, cap, RecordType::Scan);
  b.u8(static_cast<uint8_t>(ScanOp::Done)).varint(regions).varint(words).varint(refs).varint(duration_ns);
  return b.finish();
}

uint32_t checksum32(const void* data, std::size_t n) {
  return static_cast<uint32_t>(XXH3_64bits(data, n));
}

void encode_file_header(uint8_t* out, uint32_t flags) {
  std::memset(out, 0, kFileHeaderSize);
  std::memcpy(out, kFileMagic, sizeof kFileMagic);
  wire::store_le<uint16_t>(out + 8, kVersionMajor);
  wire::store_le<uint16_t>(out + 10, kVersionMinor);
  wire::store_le<uint32_t>(out + 12, kFileHeaderSize);
  wire::store_le<uint32_t>(out + 16, flags);
  wire::store_le<uint32_t>(out + 28, checksum32(out, 28));
}

std::size_t block_bound(std::size_t raw_size) {
  return kBlockHeaderSize + static_cast<std::size_t>(LZ4_compressBound(static_cast<int>(raw_size))) + raw_size;
}

std::size_t encode_block(const BlockHeader& hdr, const uint8_t* raw, std::size_t raw_size, uint8_t* out,
                         std::size_t out_cap, int lz4_level) {
  if (raw_size > kMaxBlockPayload || out_cap < kBlockHeaderSize + raw_size) return 0;
  uint8_t* payload = out + kBlockHeaderSize;
  const int cap = static_cast<int>(out_cap - kBlockHeaderSize);
  int stored = 0;
  Codec codec = Codec::Lz4;
  if (raw_size > 0) {
    stored = lz4_level <= 0
                 ? LZ4_compress_default(reinterpret_cast<const char*>(raw), reinterpret_cast<char*>(payload),
                                        static_cast<int>(raw_size), cap)
                 : LZ4_compress_HC(reinterpret_cast<const char*>(raw), reinterpret_cast<char*>(payload),
                                   static_cast<int>(raw_size), cap, lz4_level);
  }
  if (stored <= 0 || static_cast<std::size_t>(stored) >= raw_size) {
    codec = Codec::None;
    stored = static_cast<int>(raw_size);
    if (raw_size) std::memcpy(payload, raw, raw_size);
  }

  std::memset(out, 0, kBlockHeaderSize);
  wire::store_le<uint32_t>(out + 0, kBlockMagic);
  out[4] = static_cast<uint8_t>(hdr.kind);
  out[5] = static_cast<uint8_t>(codec);
  wire::store_le<uint16_t>(out + 6, hdr.flags);
  wire::store_le<uint32_t>(out + 8, static_cast<uint32_t>(stored));
  wire::store_le<uint32_t>(out + 12, static_cast<uint32_t>(raw_size));
  wire::store_le<uint32_t>(out + 16, hdr.stream);
  wire::store_le<uint32_t>(out + 20, checksum32(payload, static_cast<std::size_t>(stored)));
  wire::store_le<uint64_t>(out + 24, hdr.base_time);
  wire::store_le<uint64_t>(out + 32, hdr.base_addr);
  wire::store_le<uint32_t>(out + 44, checksum32(out, 44));
  return kBlockHeaderSize + static_cast<std::size_t>(stored);
}


// ---------------------------------------------------------------------------------------
// Short forms of Alloc and Free (AddressCompactor)
// ---------------------------------------------------------------------------------------

namespace {

// The end of the varint at `p`, with at least 10 readable bytes there; nullptr when it is
// longer than 10 bytes. (Byte by byte: the branches on a length of one byte predict well, where
// a length taken from the data makes the next record's position wait for it.)
[[gnu::always_inline]] inline const uint8_t* varint_end_fast(const uint8_t* p) {
  if (!(p[0] & 0x80)) [[likely]]
    return p + 1;
  for (std::size_t i = 1; i < wire::kMaxVarint; ++i)
    if (!(p[i] & 0x80)) return p + i + 1;
  return nullptr;
}

// An svarint (zigzag) with at least 10 readable bytes at `p`; nullptr when longer than that.
// The first three bytes unrolled (an address delta rarely takes more).
[[gnu::always_inline]] inline const uint8_t* svarint_fast(const uint8_t* p, int64_t& out) {
  auto zigzag = [&](uint64_t v) { out = static_cast<int64_t>((v >> 1) ^ (uint64_t{0} - (v & 1))); };
  uint64_t b = p[0];
  uint64_t v = b & 0x7f;
  if (b < 0x80) return zigzag(v), p + 1;
  b = p[1];
  v |= (b & 0x7f) << 7;
  if (b < 0x80) return zigzag(v), p + 2;
  b = p[2];
  v |= (b & 0x7f) << 14;
  if (b < 0x80) return zigzag(v), p + 3;
  for (unsigned i = 3; i < wire::kMaxVarint; ++i) {
    v |= static_cast<uint64_t>(p[i] & 0x7f) << (7 * i);
    if (!(p[i] & 0x80)) return zigzag(v), p + i + 1;
  }
  return nullptr;
}

// Copies [from, to); with 32 bytes readable from `from` (and so writable at `o`, which
// never runs ahead of the input) as two fixed-size moves.
[[gnu::always_inline]] inline uint8_t* copy_bytes(uint8_t* o, const uint8_t* from, const uint8_t* to,
                                                  const uint8_t* end) {
  const auto n = static_cast<std::size_t>(to - from);
  if (n <= 32 && end - from >= 32) [[likely]] {
    std::memmove(o, from, 16);
    std::memmove(o + 16, from + 16, 16);
  } else {
    std::memmove(o, from, n);
  }
  return o + n;
}

// Readable bytes a record needs for the fast path: the longest Alloc record and the fixed-size
// moves over it (three of 16 bytes).
constexpr std::ptrdiff_t kFastRoom = 48;
static_assert(kFastRoom > static_cast<std::ptrdiff_t>(kMaxAllocRecord));

}  // namespace

AddressCompactor::Split AddressCompactor::compact(const uint8_t* in, std::size_t n, uint64_t base_addr, uint8_t* out,
                                                  uint8_t* stacks) {
  // Ring 0: allocated addresses, 1: freed ones. The address pushed as number s is in slot
  // s % kRingSize, for the decoder too (whose count starts at 0 with each block): k = (pushes
  // so far) - 1 - s, below kRingSize and below the pushes of this block.
  // The push counts are kept in locals and stored back at the end: the output is bytes, and a
  // byte store may alias any member, which would be read again after every byte written.
  uint32_t pos[2] = {rings_.pos[0], rings_.pos[1]};
  const uint32_t first[2] = {pos[0], pos[1]};
  uint64_t(&slot)[2][kRingSize] = rings_.slot;
  // k if push number `s` of ring `r` is in this block's ring and holds `a`, else -1.
  auto holds = [&](unsigned r, uint32_t s, uint64_t a) {
    const uint32_t k = pos[r] - 1 - s;
    return k < kRingSize && k < pos[r] - first[r] && slot[r][s & (kRingSize - 1)] == a ? static_cast<int>(k) : -1;
  };
  // A table slot names the latest push of its addresses, so a slot that names `a` gives its
  // latest k. The second table tells apart two addresses used in turn that share their slot in
  // the first (which ones do depends on where the heap lies: with one table, one sqlite3 run in
  // six had a 27% larger trace).
  auto find = [&](unsigned r, uint64_t a, unsigned h1, unsigned h2) {
    const int k = holds(r, table_[r][h1], a);
    return k >= 0 ? k : holds(r, table_[r][kSlots + h2], a);
  };
  auto push = [&](unsigned r, uint64_t a, unsigned h1, unsigned h2) {
    const uint32_t s = pos[r]++;
    table_[r][h1] = s;
    table_[r][kSlots + h2] = s;
    slot[r][s & (kRingSize - 1)] = a;
  };
  const uint8_t* p = in;
  const uint8_t* const end = in + n;
  uint8_t* o = out;
  uint8_t* so = stacks;
  uint64_t addr = base_addr;
  while (p < end) {
    const uint8_t tag = *p;
    const bool alloc = is_alloc_tag(tag);
    if (alloc || is_free_tag(tag)) {
      const auto api = static_cast<Api>(tag & 31);
      const uint8_t* const dt = p + 1;
      const uint8_t *dt_end, *rest, *rec_end;
      int64_t daddr;
      const bool fast = end - p >= kFastRoom;
      if (fast) [[likely]] {
        dt_end = varint_end_fast(dt);
        if (!dt_end) break;
        rest = svarint_fast(dt_end, daddr);
        if (!rest) break;
        rec_end = rest;
        if (alloc) {
          rec_end = varint_end_fast(rec_end);
          if (rec_end) rec_end = varint_end_fast(rec_end);
        } else if (api == Api::Munmap) {
          rec_end = varint_end_fast(rec_end);
        }
      } else {  // near the end of the payload: every read checked
        wire::Cursor c(dt, end);
        uint64_t skip;
        if (!c.get_varint(skip)) break;
        dt_end = c.pos();
        if (!c.get_svarint(daddr)) break;
        rest = c.pos();
        if ((alloc && !(c.get_varint(skip) && c.get_varint(skip))) || (api == Api::Munmap && !c.get_varint(skip))) break;
        rec_end = c.pos();
      }
      if (!rec_end) break;
      addr += static_cast<uint64_t>(daddr);
      const unsigned h1 = hash(addr), h2 = hash2(addr);
      const uint8_t base = recent_tag_base(alloc, api);
      const int k = base ? find(alloc ? 1 : 0, addr, h1, h2) : -1;
      if (fast && rec_end - rest <= 16) [[likely]] {
        // Fixed-size moves: the record whole, or its short tag, its time and what follows its
        // address (at most 16 bytes: a size and a stack id of up to 8 bytes each).
        if (k >= 0) {
          o[0] = static_cast<uint8_t>(base + k);
          std::memmove(o + 1, dt, 16);
          const auto dt_len = static_cast<std::size_t>(dt_end - dt);
          std::memmove(o + 1 + dt_len, rest, 16);
          o += 1 + dt_len + static_cast<std::size_t>(rec_end - rest);
        } else {
          std::memmove(o, p, 16);
          std::memmove(o + 16, p + 16, 16);
          std::memmove(o + 32, p + 32, 16);
          o += rec_end - p;
        }
      } else if (k >= 0) {
        *o++ = static_cast<uint8_t>(base + k);
        o = copy_bytes(o, dt, dt_end, end);
        o = copy_bytes(o, rest, rec_end, end);
      } else {
        o = copy_bytes(o, p, rec_end, end);
      }
      push(alloc ? 0 : 1, addr, h1, h2);
      p = rec_end;
      continue;
    }
    if (tag >= kTagAllocRecent) break;  // already short, or not a record: the rest as it is
    wire::Cursor c(p + 1, end);
    uint64_t len;
    if (!c.get_varint(len) || len > c.remaining()) break;
    const uint8_t* const rec_end = c.pos() + len;
    if (stacks && tag == tag_of(RecordType::StackDef)) {
      std::memcpy(so, p, static_cast<std::size_t>(rec_end - p));
      so += rec_end - p;
    } else {
      o = copy_bytes(o, p, rec_end, end);
    }
    p = rec_end;
  }
  rings_.pos[0] = pos[0];
  rings_.pos[1] = pos[1];
  std::memmove(o, p, static_cast<std::size_t>(end - p));
  return {static_cast<std::size_t>(o + (end - p) - out), static_cast<std::size_t>(so - stacks), p != end};
}

}  // namespace memtide::fmt
