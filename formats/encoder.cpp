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

std::size_t encode_scan_suppressions(uint8_t* out, std::size_t cap, const char* text, std::size_t n) {
  RecordBuilder b(out, cap, RecordType::Scan);
  b.u8(static_cast<uint8_t>(ScanOp::Suppressions)).bytes(std::string_view(text, n));
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

void encode_checkpoint_pointer(uint8_t* out, uint64_t last_head) {
  wire::store_le<uint64_t>(out, last_head);
  wire::store_le<uint32_t>(out + 8, 0);
  wire::store_le<uint32_t>(out + 12, checksum32(out, 12));
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
// Runs cut into blocks
// ---------------------------------------------------------------------------------------

CutResult cut_block(const uint8_t* in, std::size_t n, RunState& st, uint8_t* out, uint8_t* stacks, bool whole) {
  // A short form names k < kRingSize; once both rings had that many pushes in the piece, every
  // k is in it. (Ring 0: allocated addresses, named by short Frees; ring 1: freed ones.)
  const uint32_t first[2] = {st.rings.pos[0], st.rings.pos[1]};
  auto all_in_piece = [&] {
    return st.rings.pos[0] - first[0] >= kRingSize && st.rings.pos[1] - first[1] >= kRingSize;
  };
  const uint8_t* p = in;
  const uint8_t* const end = in + n;
  uint8_t* o = out;
  uint8_t* so = stacks;
  auto copy = [&](uint8_t*& to, const uint8_t* from, const uint8_t* upto) {
    std::memcpy(to, from, static_cast<std::size_t>(upto - from));
    to += upto - from;
  };
  while (p < end) {
    if (!whole && !stacks && all_in_piece()) break;
    const uint8_t tag = *p;
    wire::Cursor c(p + 1, end);
    uint64_t dt = 0, v;
    if (tag >= kTagAllocRecent) {
      const bool alloc = is_alloc_recent_tag(tag);
      const unsigned ring = alloc ? 1 : 0, k = tag & (kRingSize - 1);
      if (!c.get_varint(dt)) break;
      const uint8_t* const rest = c.pos();
      if (alloc && !(c.get_varint(v) && c.get_varint(v))) break;
      const uint64_t addr = st.rings.get(ring, k);
      if (k >= st.rings.pos[ring] - first[ring]) {  // pushed before the piece: the full form
        const Api api = alloc ? recent_alloc_api(tag) : recent_free_api(tag);
        *o++ = static_cast<uint8_t>((alloc ? kTagAllocBase : kTagFreeBase) + static_cast<uint8_t>(api));
        o = wire::put_varint(o, dt);
        o = wire::put_svarint(o, static_cast<int64_t>(addr - st.addr));
        copy(o, rest, c.pos());
      } else {
        copy(o, p, c.pos());
      }
      st.addr = addr;
      st.rings.push(alloc ? 0 : 1, addr);
    } else if (is_alloc_tag(tag) || is_free_tag(tag)) {
      int64_t daddr;
      if (!c.get_varint(dt) || !c.get_svarint(daddr)) break;
      if (is_alloc_tag(tag) ? !(c.get_varint(v) && c.get_varint(v))
                            : tag == kTagFreeBase + static_cast<uint8_t>(Api::Munmap) && !c.get_varint(v))
        break;
      copy(o, p, c.pos());
      st.addr += static_cast<uint64_t>(daddr);
      st.rings.push(is_alloc_tag(tag) ? 0 : 1, st.addr);
    } else {
      uint64_t len;
      if (!c.get_varint(len) || len > c.remaining()) break;
      const uint8_t* const body = c.pos();
      c.skip(len);
      const unsigned type = tag - 1u;  // length-prefixed tags are RecordType + 1
      if (type < kRecordTypeCount && is_timed(static_cast<RecordType>(type))) {
        wire::Cursor r(body, body + len);
        r.get_varint(dt);
      }
      copy(stacks && tag == tag_of(RecordType::StackDef) ? so : o, p, c.pos());
    }
    st.time += dt;
    p = c.pos();
  }
  copy(o, p, end);
  return {static_cast<std::size_t>(o - out), static_cast<std::size_t>(so - stacks),
          p != end && (whole || stacks || !all_in_piece())};
}

}  // namespace memtide::fmt
