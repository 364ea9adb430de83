// Encoders for the length-prefixed records and for blocks. Allocation-free: every function
// writes into memory its caller owns, so the recorder can use them inside a host process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "formats/records.h"

namespace memtide::fmt {

// Builds one length-prefixed record in a caller-provided buffer:
//   RecordBuilder b(buf, cap, RecordType::Marker);
//   b.varint(dt).bytes(label);
//   size_t n = b.finish();  // 0 when the record did not fit
// The payload is written after a reserved 5-byte length slot (payloads are < 16 MiB); finish()
// moves it down behind the real varint length.
class RecordBuilder {
 public:
  RecordBuilder(uint8_t* buf, std::size_t cap, RecordType type);

  RecordBuilder& u8(uint8_t v);
  RecordBuilder& varint(uint64_t v);
  RecordBuilder& svarint(int64_t v);
  RecordBuilder& bytes(const void* data, std::size_t n);
  RecordBuilder& bytes(std::string_view s) { return bytes(s.data(), s.size()); }

  // Total bytes of the finished record (tag + length + payload), or 0 on overflow.
  std::size_t finish();
  bool overflowed() const { return overflow_; }

 private:
  bool room(std::size_t n);
  uint8_t* buf_;
  std::size_t cap_;
  std::size_t pos_;
  bool overflow_ = false;
};

inline constexpr std::size_t kLengthSlot = 5;

// Scan records (records.h), written whole into `out`. Each returns the record's size, or 0 when
// it does not fit in `cap` bytes. encode_scan_refs takes `n` pairs whose addresses ascend in
// steps of multiples of 8 (the first may be any multiple of 8); at most 11 + 20 * n bytes.
std::size_t encode_scan_region(uint8_t* out, std::size_t cap, uint64_t index, ScanKind kind, uint64_t start,
                               uint64_t end);
std::size_t encode_scan_refs(uint8_t* out, std::size_t cap, const uint64_t* locs, const uint64_t* values,
                             std::size_t n);
std::size_t encode_scan_done(uint8_t* out, std::size_t cap, uint64_t regions, uint64_t words, uint64_t refs,
                             uint64_t duration_ns);

// Rewrites the Alloc and Free records of block payloads into their short forms where the
// address is one of the block's recent ones (records.h, AddrRings), and copies every other
// byte. The time and addr registers move as before, so block headers stay as they are. Its
// tables (17 KiB) are kept from call to call, not cleared: keep one per writer.
class AddressCompactor {
 public:
  // `in`: n bytes of a block whose addr register starts at `base_addr`; `out` has room for n
  // bytes. Returns the bytes written (at most n). A record that does not parse is copied with
  // the rest of the payload as it is.
  std::size_t compact(const uint8_t* in, std::size_t n, uint64_t base_addr, uint8_t* out) {
    return compact(in, n, base_addr, out, nullptr).events;
  }

  // The same, and with `stacks` (room for n bytes) the StackDef records go there instead of
  // to `out`, in their order, so that a block of the stream's stack definitions can be
  // written before the block of its other records (a reader of the stacks alone then reads
  // no events). `rest_has_stacks` is set when a StackDef may remain in `out`: one after a
  // record that does not parse, which is copied with the rest of the payload as it is.
  struct Split {
    std::size_t events = 0;  // bytes written to `out`
    std::size_t stacks = 0;  // bytes written to `stacks`
    bool rest_has_stacks = false;
  };
  Split compact(const uint8_t* in, std::size_t n, uint64_t base_addr, uint8_t* out, uint8_t* stacks);

 private:
  // The rings as the decoder has them (their push counts run on across blocks: the block's
  // first one bounds k), and per ring two direct-mapped tables, each from its own hash of an
  // address to the number of its latest push (a lookup is one load and one compare with the
  // ring's slot, a second one when the first table's slot went to another address; an address
  // whose entries in both went to others keeps its full form).
  static constexpr unsigned kBits = 10;
  static constexpr unsigned kSlots = 1u << kBits;
  static unsigned hash(uint64_t a) { return static_cast<unsigned>((a * 0x9E3779B97F4A7C15ull) >> (64 - kBits)); }
  static unsigned hash2(uint64_t a) { return static_cast<unsigned>((a * 0xD6E8FEB86659FD93ull) >> (64 - kBits)); }
  uint32_t table_[2][2 * kSlots] = {};  // per ring: the slots of hash, then those of hash2
  AddrRings rings_;
};

// File header (kFileHeaderSize bytes).
void encode_file_header(uint8_t* out, uint32_t flags);

// Bytes `encode_block` may need for a payload of `raw_size` bytes.
std::size_t block_bound(std::size_t raw_size);

// Frames `raw` as one block into `out` (capacity >= block_bound(raw_size)): compresses with LZ4
// when that is smaller (otherwise stores it raw), fills in sizes and checksums.
// `hdr.kind`, `hdr.stream`, `hdr.base_time`, `hdr.base_addr` are taken from `hdr`.
// Returns the block's total size, or 0 if raw_size exceeds kMaxBlockPayload.
// `lz4_level` 0 uses the fast compressor; 1..12 use LZ4-HC at that level.
std::size_t encode_block(const BlockHeader& hdr, const uint8_t* raw, std::size_t raw_size,
                         uint8_t* out, std::size_t out_cap, int lz4_level = 0);

// Low 32 bits of XXH3_64: the checksum used for headers and payloads.
uint32_t checksum32(const void* data, std::size_t n);

}  // namespace memtide::fmt
