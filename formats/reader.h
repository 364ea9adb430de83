// Reading a trace file block by block. The file is never trusted: every header field is
// checked before it sizes anything, and every failure is a typed result with its offset.
//
// Sections:
//   [1] Results: ReadStatus / ReadResult, OpenError / OpenResult
//   [2] Blocks as the reader hands them out
//   [3] FileReader
//   [4] Writer liveness (flock)
//
// Typical use (see also read_records / read_merged in formats/decoder.h, formats/merge.h):
//   FileReader r;
//   if (auto o = r.open(path); !o.ok()) { report(o.message); }
//   Block b;
//   for (ReadResult res; (res = r.next(b)).ok();) { ... b.payload ... }
//
// Follow mode: next() returns Truncated without moving offset() when the file ends inside a
// block; call next() again once the file has grown (is_being_written() tells whether it may).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "formats/records.h"
#include "formats/segment_set.h"

namespace memtide::fmt {

// ---------------------------------------------------------------------------------------
// [1] Results
// ---------------------------------------------------------------------------------------

enum class ReadStatus : uint8_t {
  Ok,
  EndOfFile,  // clean block boundary at the end of the file
  Truncated,  // the file ends inside a block header or payload (maybe still being written)
  Corrupt,    // a block or record that cannot be right
  IoError,    // the operating system refused a read
};

inline constexpr uint64_t kNoPosition = ~uint64_t{0};

struct ReadResult {
  ReadStatus status = ReadStatus::Ok;
  uint64_t offset = 0;              // file offset of the block concerned (not Ok)
  uint64_t position = kNoPosition;  // position in the raw payload of the bad record (Corrupt)
  std::string message;              // one line without the file name, e.g.
                                    // "truncated block at offset 96 (file ends inside the block payload)"
  bool ok() const { return status == ReadStatus::Ok; }
  bool end_of_file() const { return status == ReadStatus::EndOfFile; }

  static ReadResult make_ok() { return {}; }
  static ReadResult end(uint64_t offset) { return {ReadStatus::EndOfFile, offset, kNoPosition, {}}; }
  static ReadResult truncated(uint64_t offset, const char* where);
  static ReadResult corrupt(uint64_t offset, const std::string& what, uint64_t position = kNoPosition);
  static ReadResult io_error(uint64_t offset, int err);
};

std::string_view status_name(ReadStatus s);

enum class OpenError : uint8_t {
  None,
  NotFound,
  IsDirectory,
  NotRegularFile,
  Io,                  // open/read/stat failed (permission, ...)
  Empty,               // zero bytes
  TruncatedHeader,     // fewer than 32 bytes (a recorder that just started: retry)
  BadMagic,            // not a memtide trace
  UnsupportedVersion,  // different major version
  BadChecksum,         // file header checksum mismatch
  BadHeader,           // header_size out of range
};

struct OpenResult {
  OpenError error = OpenError::None;
  std::string message;  // one line without the file name: "not a memtide trace (bad magic at offset 0)"
  bool ok() const { return error == OpenError::None; }
};

// The file header as read.
struct FileInfo {
  uint16_t version_major = 0;
  uint16_t version_minor = 0;
  uint32_t header_size = 0;
  uint32_t flags = 0;
};

// ---------------------------------------------------------------------------------------
// [2] Blocks
// ---------------------------------------------------------------------------------------

// A block header that passed its checks (magic, checksum, kind, codec, sizes).
struct BlockRef {
  uint64_t offset = 0;  // file offset of the block header
  BlockHeader header;
  uint64_t end_offset() const { return offset + kBlockHeaderSize + header.stored_size; }
};

// A block with its decompressed payload. `payload` points into the reader's buffer (or into
// the memory the reader was opened on) and stays valid until the next call on the reader.
struct Block {
  uint64_t offset = 0;
  BlockHeader header;
  std::span<const uint8_t> payload;
};

// Parses and checks a 48-byte block header. Returns an empty message when it is valid, else
// what is wrong ("bad block magic", ...). Shared by FileReader and resynchronisation.
std::string check_block_header(const uint8_t* bytes, BlockHeader& out);

// ---------------------------------------------------------------------------------------
// [3] FileReader
// ---------------------------------------------------------------------------------------

class FileReader {
 public:
  FileReader() = default;
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;
  FileReader(FileReader&& other) noexcept;
  FileReader& operator=(FileReader&& other) noexcept;

  // Opens a trace file and checks its header; positions offset() at the first block. A segment
  // set (formats/segment_set.h), named by any segment or by its base name, reads as one file
  // whose first segments are cut away: offsets start at first_block().
  OpenResult open(const std::string& path);
  // Reads a trace held in memory (which must outlive the reader); same checks as open().
  OpenResult open_memory(std::span<const uint8_t> data);

  const FileInfo& info() const { return info_; }
  // Non-fatal findings of open(), e.g. a newer minor version. One line each.
  const std::vector<std::string>& warnings() const { return warnings_; }

  // File offset of the next block to read.
  uint64_t offset() const { return offset_; }
  // The offset of the first block: the header's size, or in a set, the first kept segment's.
  uint64_t first_block() const { return first_block_; }
  // The set being read (nullptr: a single file).
  const SegmentFiles* segment_set() const { return set_.get(); }
  // Whether the trace begins after the recording's start: a set whose first segments are gone.
  bool starts_mid_run() const;
  void seek(uint64_t offset) { offset_ = offset; }

  // Reads the block at offset(): header, payload, checksum, decompression. Advances offset()
  // only on Ok; on Truncated it stays put so that a later call can pick up a grown file.
  ReadResult next(Block& out);
  // Reads and checks the header at offset() and steps over the payload without reading it.
  // Truncated when the payload does not fit in the file as it is now.
  ReadResult skip(BlockRef& out);
  // Reads and checks the header at offset() without advancing.
  ReadResult peek_header(BlockRef& out);

  // After a Corrupt result: searches forward from offset() + 1 for the next valid block
  // header and moves offset() there. False (offset unchanged) when there is none.
  bool resync();

  // Copies the n bytes at `off` into `out`; false when the file does not hold them (or on an
  // I/O error). For the parts of a file outside its blocks (a header's later fields: in a set,
  // those of its latest segment).
  bool read_bytes(uint64_t off, std::size_t n, std::vector<uint8_t>& out) const;

  // Current size of the file (it may grow while a recorder writes it).
  uint64_t size() const;
  // Whether a recorder still holds its lock on the file (see is_being_written); for a set, on
  // its latest segment, read or not.
  bool writer_alive() const;
  // Whether this reader of a set fell more than the set's size behind: the segments after the
  // one it reads were removed before it read them (it reads no further; a new reader of the
  // set starts at what is kept now).
  bool fell_behind() const { return set_ && set_->gap(); }
  // Bytes fetched from the file (or the memory image) so far, headers and re-reads included:
  // lets a follower check that it reads only what was appended.
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  void close();
  OpenResult read_file_header();
  OpenResult open_set(const std::string& stem);
  // In a set, at the end of a segment: moves offset() to the next one's first block after its
  // prologue; false when there is no next segment (yet).
  bool next_segment();
  // Reads up to n bytes at `off`: returns the bytes (in `buf` or in the memory image), with
  // `got` < n at end of file. nullptr on an I/O error (errno set).
  const uint8_t* read_at(uint64_t off, std::size_t n, std::vector<uint8_t>& buf, std::size_t& got) const;

  int fd_ = -1;
  std::span<const uint8_t> memory_;
  bool is_memory_ = false;
  FileInfo info_;
  std::vector<std::string> warnings_;
  uint64_t offset_ = 0;
  uint64_t first_block_ = 0;
  std::unique_ptr<SegmentFiles> set_;
  mutable uint64_t bytes_read_ = 0;
  std::vector<uint8_t> header_buf_;
  std::vector<uint8_t> stored_buf_;
  std::vector<uint8_t> raw_buf_;
};

// ---------------------------------------------------------------------------------------
// [4] Writer liveness
// ---------------------------------------------------------------------------------------

// The recorder holds flock(LOCK_EX) on its trace while recording. True when a non-blocking
// shared lock is refused (EWOULDBLOCK), i.e. a writer is still appending to the file.
bool is_being_written(const std::string& path);
// Same test on an open descriptor of the file.
bool is_being_written_fd(int fd);
// Same test on the set of segments of `stem` (list_segments): on its latest ones.
bool set_being_written(const std::string& stem);

}  // namespace memtide::fmt
