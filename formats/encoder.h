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
// The program's own leak suppressions (its __lsan_default_suppressions()), `n` bytes of text.
std::size_t encode_scan_suppressions(uint8_t* out, std::size_t cap, const char* text, std::size_t n);

// A run of records written as one block, with the short forms of Alloc and Free (RecentIndex),
// and cut into several blocks: the recorder writes each stream's chunk as one run, and its
// writer thread takes a chunk still being filled in pieces. A piece after the first may name an
// address pushed before it, which a block of its own cannot: cut_block gives that record its
// full form.
struct RunState {
  uint64_t time = 0, addr = 0;  // the registers
  AddrRings rings;              // as a decoder of the whole run has them
};

// Bytes cut_block may write for a piece of n bytes (a short record of 2 bytes may take an
// address delta of up to 10).
constexpr std::size_t cut_bound(std::size_t n) { return 6 * n; }

// Copies the records [in, in + n) of a run, whose decoder state before them is `st`, to `out`
// (room for cut_bound(n)) so that they decode as a block whose registers start at st's time and
// addr, and moves `st` to their end. With `stacks` (room for n bytes) the StackDef records go
// there instead, in their order, so that a block of the stream's stack definitions can be
// written before the block of its other records (a reader of the stacks alone then reads no
// events). With `whole` false and no `stacks`, the records after the point where no short form
// can name an address before the piece are copied without being read, and `st` is then left as
// it was there (for a piece whose run goes no further). A record that does not parse is copied
// with the rest of the piece as it is (`rest_unread` set; `st` is then not at the end).
struct CutResult {
  std::size_t events = 0;  // bytes written to `out`
  std::size_t stacks = 0;  // bytes written to `stacks`
  bool rest_unread = false;
};
CutResult cut_block(const uint8_t* in, std::size_t n, RunState& st, uint8_t* out, uint8_t* stacks, bool whole);

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
// The 16 bytes at offset 32 of a file with checkpoints (formats/checkpoint.h).
void encode_checkpoint_pointer(uint8_t* out, uint64_t last_head);

}  // namespace memtide::fmt
