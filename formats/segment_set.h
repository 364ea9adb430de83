// Segment sets (docs/FORMAT.md section 15): a trace kept to its most recent SIZE bytes
// (`memtide run --keep SIZE`) is a run of files NAME.0001.mtide, NAME.0002.mtide, ..., the oldest
// removed as new ones are written. Each segment is a trace file whose 64-byte header adds, at
// offset 48, where its first byte lies in the set's one offset space (the concatenation of every
// segment ever written) and its number. Offsets inside the trace (checkpoint heads, the header's
// pointer) are in that space, so a reader of the set (FileReader) sees one file with its first
// segments cut away.
//
// Each segment after the first starts with a prologue (blocks flagged kBlockFlagPrologue): the
// process information, the modules loaded and every stack defined so far, so that it is readable
// without the segments before it; a checkpoint follows soon after. A reader that goes on from one
// segment to the next steps over the next one's prologue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "formats/encoder.h"
#include "formats/wire.h"

namespace memtide::fmt {

// File header flag bit 4: the file is a segment of a set.
inline constexpr uint32_t kFileFlagSegment = 1u << 4;
// Block flag bit 4: a segment's prologue, repeating what the segments before it hold.
inline constexpr uint16_t kBlockFlagPrologue = 1u << 4;

inline constexpr uint32_t kSegmentHeaderSize = 64;
inline constexpr uint32_t kSegmentFieldsAt = 48;

// The segment fields: u64 base (the offset of the segment's byte 0 in the set), u32 number,
// u32 checksum (low 32 bits of XXH3_64 over [48, 60)).
// (Inline: the recorder uses it without this file's other code.)
inline void encode_segment_fields(uint8_t* h, uint64_t base, uint32_t number) {
  wire::store_le<uint64_t>(h + kSegmentFieldsAt, base);
  wire::store_le<uint32_t>(h + kSegmentFieldsAt + 8, number);
  wire::store_le<uint32_t>(h + kSegmentFieldsAt + 12, checksum32(h + kSegmentFieldsAt, 12));
}
// Parses them from a header of at least kSegmentHeaderSize bytes; false when they do not check.
bool decode_segment_fields(const uint8_t* header, uint64_t& base, uint32_t& number);

// The segment name: `stem` + ".%04u.mtide" (more digits past 9999).
std::string segment_name(const std::string& stem, uint32_t number);
// Whether `path` is a segment's name (STEM.<digits>.mtide); sets its stem and number.
bool parse_segment_name(const std::string& path, std::string& stem, uint32_t& number);
// The stem of a set opened by its base name (NAME.mtide, or NAME without an extension).
std::string set_stem(const std::string& base);

struct SegmentPath {
  uint32_t number = 0;
  std::string path;
};
// The segments of `stem` present now, by number.
std::vector<SegmentPath> list_segments(const std::string& stem);
// Whether `path` names a set (a segment's name, or a base name that is not a file but has
// segments): sets its stem.
bool names_segment_set(const std::string& path, std::string& stem);

// The open files of a set, as FileReader reads them: the latest run of consecutive segments.
class SegmentFiles {
 public:
  struct Segment {
    uint32_t number = 0;
    uint64_t base = 0;  // the offset of its byte 0 in the set
    uint32_t header_size = 0;
    int fd = -1;
    std::string path;
  };
  SegmentFiles() = default;
  SegmentFiles(const SegmentFiles&) = delete;
  SegmentFiles& operator=(const SegmentFiles&) = delete;
  ~SegmentFiles();

  // Opens the segments of `stem`; an empty message on success, else what is wrong.
  std::string open(const std::string& stem);
  // Opens one segment by a name that is not its set's (a copy): the set of that segment alone,
  // which never grows. An empty message on success.
  std::string open_alone(const std::string& path);
  bool alone() const { return stem_.empty(); }
  const std::string& stem() const { return stem_; }
  const std::vector<Segment>& segments() const { return segs_; }
  // The segment holding set offset `off`, or nullptr.
  const Segment* find(uint64_t off) const;
  // The set's size: the last segment's end in the set's offsets.
  uint64_t end() const;
  // The end of segment i in the set's offsets.
  uint64_t end_of(std::size_t i) const;
  // Opens the segments written since the last look (a recorder goes on); true when there are.
  bool refresh();
  // Whether a refresh found later segments but not the next one: removed before it was read
  // (a follower more than the set's size behind).
  bool gap() const { return gap_; }
  // What a reader that met the gap says: the segments removed before it read them, by name.
  std::string gap_message() const;
  // Closes the segments that end at or before `off` and that the recorder has removed: their
  // disk space is freed only once no one holds them open. Reads of them then find nothing.
  void release_before(uint64_t off);

 private:
  // Opens `path` as segment `number`; false (nothing kept) when its header is not a segment's.
  bool add(const std::string& path, uint32_t number);
  std::string stem_;
  std::vector<Segment> segs_;
  bool gap_ = false;
  uint32_t gap_first_ = 0, gap_last_ = 0;  // (gap_) the numbers of the segments missing
};

}  // namespace memtide::fmt
