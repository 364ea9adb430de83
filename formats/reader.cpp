#include "formats/reader.h"

#include <fcntl.h>
#include <lz4.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "formats/encoder.h"
#include "formats/segment_set.h"

namespace memtide::fmt {

// ---------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------

ReadResult ReadResult::truncated(uint64_t offset, const char* where) {
  return {ReadStatus::Truncated, offset, kNoPosition,
          "truncated block at offset " + std::to_string(offset) + " (file ends inside the block " + where + ")"};
}

ReadResult ReadResult::corrupt(uint64_t offset, const std::string& what, uint64_t position) {
  std::string m = "corrupt block at offset " + std::to_string(offset) + ": " + what;
  if (position != kNoPosition) m += " (record at payload position " + std::to_string(position) + ")";
  return {ReadStatus::Corrupt, offset, position, std::move(m)};
}

ReadResult ReadResult::io_error(uint64_t offset, int err) {
  return {ReadStatus::IoError, offset, kNoPosition,
          "read error at offset " + std::to_string(offset) + ": " + std::strerror(err)};
}

std::string_view status_name(ReadStatus s) {
  switch (s) {
    case ReadStatus::Ok: return "ok";
    case ReadStatus::EndOfFile: return "end of file";
    case ReadStatus::Truncated: return "truncated";
    case ReadStatus::Corrupt: return "corrupt";
    case ReadStatus::IoError: return "I/O error";
  }
  return "?";
}

std::string check_block_header(const uint8_t* b, BlockHeader& h) {
  if (wire::load_le<uint32_t>(b) != kBlockMagic) return "bad block magic";
  if (wire::load_le<uint32_t>(b + 44) != checksum32(b, 44)) return "block header checksum mismatch";
  if (b[4] >= static_cast<uint8_t>(BlockKind::Count)) return "unknown block kind " + std::to_string(b[4]);
  if (b[5] >= static_cast<uint8_t>(Codec::Count)) return "unknown block codec " + std::to_string(b[5]);
  h.kind = static_cast<BlockKind>(b[4]);
  h.codec = static_cast<Codec>(b[5]);
  h.flags = wire::load_le<uint16_t>(b + 6);
  h.stored_size = wire::load_le<uint32_t>(b + 8);
  h.raw_size = wire::load_le<uint32_t>(b + 12);
  h.stream = wire::load_le<uint32_t>(b + 16);
  h.payload_checksum = wire::load_le<uint32_t>(b + 20);
  h.base_time = wire::load_le<uint64_t>(b + 24);
  h.base_addr = wire::load_le<uint64_t>(b + 32);
  if (h.stored_size > kMaxBlockPayload)
    return "stored size " + std::to_string(h.stored_size) + " exceeds the limit of " + std::to_string(kMaxBlockPayload);
  if (h.raw_size > kMaxBlockPayload)
    return "raw size " + std::to_string(h.raw_size) + " exceeds the limit of " + std::to_string(kMaxBlockPayload);
  if (h.codec == Codec::None && h.stored_size != h.raw_size) return "uncompressed block with stored size != raw size";
  // LZ4 cannot expand a byte into more than ~255: refuse before allocating for a bogus size.
  if (h.codec == Codec::Lz4 && h.raw_size > 256ull * h.stored_size + 1024)
    return "raw size " + std::to_string(h.raw_size) + " cannot come from " + std::to_string(h.stored_size) +
           " bytes of LZ4";
  return {};
}

// ---------------------------------------------------------------------------------------
// FileReader: lifetime
// ---------------------------------------------------------------------------------------

FileReader::~FileReader() { close(); }

FileReader::FileReader(FileReader&& o) noexcept { *this = std::move(o); }

FileReader& FileReader::operator=(FileReader&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = std::exchange(o.fd_, -1);
    memory_ = o.memory_;
    is_memory_ = std::exchange(o.is_memory_, false);
    info_ = o.info_;
    warnings_ = std::move(o.warnings_);
    offset_ = o.offset_;
    first_block_ = o.first_block_;
    set_ = std::move(o.set_);
    bytes_read_ = o.bytes_read_;
    header_buf_ = std::move(o.header_buf_);
    stored_buf_ = std::move(o.stored_buf_);
    raw_buf_ = std::move(o.raw_buf_);
  }
  return *this;
}

void FileReader::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  is_memory_ = false;
  memory_ = {};
  warnings_.clear();
  info_ = {};
  offset_ = 0;
  first_block_ = 0;
  set_.reset();
  bytes_read_ = 0;
}

OpenResult FileReader::open(const std::string& path) {
  close();
  if (std::string stem; names_segment_set(path, stem)) {
    OpenResult r = open_set(stem);
    // (A file named like a segment that is a trace of its own is read as one.)
    if (r.ok() || r.error != OpenError::BadHeader || ::access(path.c_str(), F_OK) != 0) return r;
    close();
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return {OpenError::NotFound, "no such file"};
    return {OpenError::Io, std::string("cannot access: ") + std::strerror(errno)};
  }
  if (S_ISDIR(st.st_mode)) return {OpenError::IsDirectory, "is a directory, not a trace file"};
  if (!S_ISREG(st.st_mode)) return {OpenError::NotRegularFile, "not a regular file"};
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return {OpenError::Io, std::string("cannot open: ") + std::strerror(errno)};
  OpenResult r = read_file_header();
  if (!r.ok() || !(info_.flags & kFileFlagSegment)) return r;
  // A segment of a kept set under a name that is not its set's (a copy): its offsets are the
  // set's, so it is read as that set's one segment, from its first checkpoint when it is not the first.
  close();
  set_ = std::make_unique<SegmentFiles>();
  if (std::string e = set_->open_alone(path); !e.empty()) return {OpenError::BadHeader, e};
  r = read_file_header();
  if (!r.ok()) return r;
  first_block_ = offset_ = set_->segments()[0].base + info_.header_size;
  info_.flags &= ~kFileFlagSegment;
  const uint32_t n = set_->segments()[0].number;
  warnings_.push_back("segment " + std::to_string(n) + " of a kept set, read alone under another name: it holds that "
                      "segment's part of the recording only" +
                      (n > 1 ? std::string(", from its first checkpoint") : std::string()));
  return r;
}

OpenResult FileReader::open_set(const std::string& stem) {
  set_ = std::make_unique<SegmentFiles>();
  if (std::string e = set_->open(stem); !e.empty()) return {OpenError::BadHeader, e};
  OpenResult r = read_file_header();  // the first segment's, read at its set offset
  if (r.ok()) {
    first_block_ = offset_ = set_->segments()[0].base + info_.header_size;
    info_.flags &= ~kFileFlagSegment;
  }
  return r;
}

bool FileReader::starts_mid_run() const { return set_ && set_->segments()[0].number > 1; }

bool FileReader::next_segment() {
  const auto& segs = set_->segments();
  std::size_t i = 0;
  while (i < segs.size() && !(offset_ >= segs[i].base && offset_ == set_->end_of(i))) ++i;
  if (i == segs.size()) return false;
  if (i + 1 == segs.size() && !set_->refresh()) return false;
  const SegmentFiles::Segment& next = set_->segments()[i + 1];
  if (next.base != offset_) return false;
  offset_ = next.base + next.header_size;
  set_->release_before(offset_);
  // Its prologue repeats what this reader has read already.
  for (BlockRef ref; peek_header(ref).ok() && (ref.header.flags & kBlockFlagPrologue) &&
                     ref.end_offset() <= set_->end_of(i + 1);)
    offset_ = ref.end_offset();
  return true;
}

OpenResult FileReader::open_memory(std::span<const uint8_t> data) {
  close();
  memory_ = data;
  is_memory_ = true;
  return read_file_header();
}

OpenResult FileReader::read_file_header() {
  std::size_t got = 0;
  // (A set's header is its first segment's.)
  const uint8_t* h = set_ ? (read_bytes(0, kFileHeaderSize, header_buf_) ? (got = kFileHeaderSize, header_buf_.data()) : nullptr)
                          : read_at(0, kFileHeaderSize, header_buf_, got);
  if (!h) return {OpenError::Io, std::string("read error at offset 0: ") + std::strerror(errno)};
  if (got == 0) return {OpenError::Empty, "empty file (no file header)"};
  // A prefix of the magic in a short file is most likely a recorder that has just started.
  const bool magic_prefix = std::memcmp(h, kFileMagic, std::min<std::size_t>(got, sizeof kFileMagic)) == 0;
  if (got < kFileHeaderSize && magic_prefix)
    return {OpenError::TruncatedHeader,
            "truncated file header (the file ends at offset " + std::to_string(got) + ", inside the 32-byte header)"};
  if (!magic_prefix || got < sizeof kFileMagic) return {OpenError::BadMagic, "not a memtide trace (bad magic at offset 0)"};
  info_.version_major = wire::load_le<uint16_t>(h + 8);
  info_.version_minor = wire::load_le<uint16_t>(h + 10);
  info_.header_size = wire::load_le<uint32_t>(h + 12);
  info_.flags = wire::load_le<uint32_t>(h + 16);
  // Major first: another major may have moved the checksum.
  if (info_.version_major < kOldestVersionMajor || info_.version_major > kVersionMajor)
    return {OpenError::UnsupportedVersion,
            "unsupported format version " + std::to_string(info_.version_major) + "." +
                std::to_string(info_.version_minor) + " (this reader reads " + std::to_string(kOldestVersionMajor) +
                ".x to " + std::to_string(kVersionMajor) + ".x)"};
  if (wire::load_le<uint32_t>(h + 28) != checksum32(h, 28))
    return {OpenError::BadChecksum, "file header checksum mismatch at offset 28"};
  // The header may grow in later minors; a size beyond a page is not a header.
  if (info_.header_size < kFileHeaderSize || info_.header_size > 4096)
    return {OpenError::BadHeader, "file header size " + std::to_string(info_.header_size) + " out of range at offset 12"};
  if (info_.version_major == kVersionMajor && info_.version_minor > kVersionMinor)
    warnings_.push_back("format version " + std::to_string(info_.version_major) + "." +
                        std::to_string(info_.version_minor) + " is newer than this reader (" +
                        std::to_string(kVersionMajor) + "." + std::to_string(kVersionMinor) +
                        "); fields it does not know are skipped");
  first_block_ = offset_ = info_.header_size;
  return {};
}

bool FileReader::read_bytes(uint64_t off, std::size_t n, std::vector<uint8_t>& out) const {
  if (set_ && off + n <= kSegmentHeaderSize) {
    // The set's header: the first segment's while it is opened, then the latest one's (whose
    // checkpoint pointer is the latest).
    out.resize(n);
    const int fd = (info_.header_size ? set_->segments().back() : set_->segments().front()).fd;
    return ::pread(fd, out.data(), n, static_cast<off_t>(off)) == static_cast<ssize_t>(n);
  }
  std::vector<uint8_t> buf;
  std::size_t got = 0;
  const uint8_t* p = read_at(off, n, buf, got);
  if (!p || got < n) return false;
  out.assign(p, p + n);
  return true;
}

// ---------------------------------------------------------------------------------------
// FileReader: blocks
// ---------------------------------------------------------------------------------------

const uint8_t* FileReader::read_at(uint64_t off, std::size_t n, std::vector<uint8_t>& buf, std::size_t& got) const {
  got = 0;
  static const uint8_t kNothing = 0;
  if (n == 0) return &kNothing;
  if (is_memory_) {
    if (off >= memory_.size()) return &kNothing;
    got = static_cast<std::size_t>(std::min<uint64_t>(n, memory_.size() - off));
    bytes_read_ += got;
    return memory_.data() + off;
  }
  int fd = fd_;
  if (set_) {
    // Set offsets: the segment holding `off`, none spanning two. Its header is not in the
    // set's blocks (a segment's end reads as nothing there: peek_header moves on to the next).
    const SegmentFiles::Segment* seg = set_->find(off);
    if (!seg || seg->fd < 0 || off - seg->base < seg->header_size) return &kNothing;
    fd = seg->fd;
    const std::size_t i = static_cast<std::size_t>(seg - set_->segments().data());
    if (i + 1 < set_->segments().size()) n = static_cast<std::size_t>(std::min<uint64_t>(n, set_->end_of(i) - off));
    off -= seg->base;
  }
  if (buf.size() < n) buf.resize(n);
  while (got < n) {
    const ssize_t r = ::pread(fd, buf.data() + got, n - got, static_cast<off_t>(off + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      return nullptr;
    }
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  bytes_read_ += got;
  return buf.data();
}

ReadResult FileReader::peek_header(BlockRef& out) {
  if (fd_ < 0 && !is_memory_ && !set_) return ReadResult::io_error(offset_, EBADF);
  std::size_t got = 0;
  const uint8_t* h = read_at(offset_, kBlockHeaderSize, header_buf_, got);
  if (!h) return ReadResult::io_error(offset_, errno);
  if (got == 0 && set_ && next_segment()) return peek_header(out);
  if (got == 0 && set_ && set_->gap())
    return ReadResult::corrupt(offset_, set_->gap_message());
  if (got == 0) return ReadResult::end(offset_);
  if (got < kBlockHeaderSize) return ReadResult::truncated(offset_, "header");
  out.offset = offset_;
  const std::string err = check_block_header(h, out.header);
  if (!err.empty()) return ReadResult::corrupt(offset_, err);
  return {};
}

ReadResult FileReader::skip(BlockRef& out) {
  ReadResult r = peek_header(out);
  if (!r.ok()) return r;
  if (out.end_offset() > size()) return ReadResult::truncated(out.offset, "payload");
  offset_ = out.end_offset();
  return r;
}

ReadResult FileReader::next(Block& out) {
  BlockRef ref;
  ReadResult r = peek_header(ref);
  if (!r.ok()) return r;
  const BlockHeader& h = ref.header;
  // Nothing is allocated for a payload the file does not hold (yet).
  if (ref.end_offset() > size()) return ReadResult::truncated(ref.offset, "payload");
  std::size_t got = 0;
  const uint8_t* stored = read_at(ref.offset + kBlockHeaderSize, h.stored_size, stored_buf_, got);
  if (!stored) return ReadResult::io_error(ref.offset, errno);
  if (got < h.stored_size) return ReadResult::truncated(ref.offset, "payload");
  if (checksum32(stored, h.stored_size) != h.payload_checksum)
    return ReadResult::corrupt(ref.offset, "payload checksum mismatch");

  out.offset = ref.offset;
  out.header = h;
  if (h.codec == Codec::None) {
    out.payload = {stored, h.stored_size};
  } else {
    // Bounded by raw_size <= kMaxBlockPayload (checked with the header).
    if (raw_buf_.size() < h.raw_size) raw_buf_.resize(h.raw_size);
    const int n = h.raw_size == 0 && h.stored_size == 0
                      ? 0
                      : LZ4_decompress_safe(reinterpret_cast<const char*>(stored), reinterpret_cast<char*>(raw_buf_.data()),
                                            static_cast<int>(h.stored_size), static_cast<int>(h.raw_size));
    if (n < 0 || static_cast<uint32_t>(n) != h.raw_size)
      return ReadResult::corrupt(ref.offset, n < 0 ? "LZ4 payload does not decompress"
                                                   : "LZ4 payload decompresses to " + std::to_string(n) +
                                                         " bytes instead of " + std::to_string(h.raw_size));
    out.payload = {raw_buf_.data(), h.raw_size};
  }
  offset_ = ref.end_offset();
  return r;
}

bool FileReader::resync() {
  const uint64_t end = size();
  constexpr std::size_t kWindow = 1 << 20;
  std::vector<uint8_t> buf;
  for (uint64_t pos = offset_ + 1; pos + kBlockHeaderSize <= end;) {
    std::size_t got = 0;
    const uint8_t* w = read_at(pos, kWindow, buf, got);
    if (!w || got < kBlockHeaderSize) return false;
    for (std::size_t i = 0; i + kBlockHeaderSize <= got; ++i) {
      if (w[i] != 0x4D || wire::load_le<uint32_t>(w + i) != kBlockMagic) continue;
      BlockHeader h;
      if (check_block_header(w + i, h).empty()) {
        offset_ = pos + i;
        return true;
      }
    }
    pos += got - (kBlockHeaderSize - 1);  // keep a header's worth of overlap
  }
  return false;
}

uint64_t FileReader::size() const {
  if (is_memory_) return memory_.size();
  if (set_) return set_->end();
  struct stat st;
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_size);
}

bool FileReader::writer_alive() const {
  if (set_ && set_->alone()) return is_being_written_fd(set_->segments().back().fd);
  if (set_) {
    set_->refresh();
    return set_being_written(set_->stem());  // (read or not: one behind a gap holds none)
  }
  return !is_memory_ && fd_ >= 0 && is_being_written_fd(fd_);
}

// ---------------------------------------------------------------------------------------
// Writer liveness
// ---------------------------------------------------------------------------------------

// A set is written while its latest segment is. The recorder locks a new segment just after
// creating it, then lets go of the one before: of the last two, looked at in that order, one is
// locked, unless the recorder went on to another segment meanwhile (looked at again then).
bool set_being_written(const std::string& stem) {
  uint32_t last = 0;
  for (int round = 0; round < 100; ++round) {
    const std::vector<SegmentPath> segs = list_segments(stem);
    if (segs.empty() || segs.back().number == last) return false;
    last = segs.back().number;
    for (std::size_t i = segs.size() >= 2 ? segs.size() - 2 : 0; i < segs.size(); ++i) {
      const int fd = ::open(segs[i].path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      const bool busy = is_being_written_fd(fd);
      ::close(fd);
      if (busy) return true;
    }
  }
  return false;
}

bool is_being_written_fd(int fd) {
  // flock locks belong to the open file description; ours holds none, so a refusal means
  // another description (the recorder's) holds LOCK_EX.
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) return errno == EWOULDBLOCK;
  ::flock(fd, LOCK_UN);
  return false;
}

bool is_being_written(const std::string& path) {
  std::string stem;
  const std::vector<SegmentPath> segs = names_segment_set(path, stem) ? list_segments(stem) : std::vector<SegmentPath>{};
  if (!segs.empty()) return set_being_written(stem);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool busy = is_being_written_fd(fd);
  ::close(fd);
  return busy;
}

}  // namespace memtide::fmt
