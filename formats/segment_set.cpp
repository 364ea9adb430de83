// Segment sets: names, listing, and the header fields (segment_set.h).
#include "formats/segment_set.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "formats/encoder.h"
#include "formats/records.h"
#include "formats/wire.h"

namespace memtide::fmt {

bool decode_segment_fields(const uint8_t* h, uint64_t& base, uint32_t& number) {
  if (wire::load_le<uint32_t>(h + kSegmentFieldsAt + 12) != checksum32(h + kSegmentFieldsAt, 12)) return false;
  base = wire::load_le<uint64_t>(h + kSegmentFieldsAt);
  number = wire::load_le<uint32_t>(h + kSegmentFieldsAt + 8);
  return number != 0;
}

std::string segment_name(const std::string& stem, uint32_t number) {
  char n[16];
  std::snprintf(n, sizeof n, ".%04u.mtide", number);
  return stem + n;
}

bool parse_segment_name(const std::string& path, std::string& stem, uint32_t& number) {
  static constexpr std::string_view kExt = ".mtide";
  if (path.size() <= kExt.size() || path.compare(path.size() - kExt.size(), kExt.size(), kExt) != 0) return false;
  const size_t end = path.size() - kExt.size();
  size_t dot = end;
  while (dot > 0 && path[dot - 1] >= '0' && path[dot - 1] <= '9') --dot;
  const size_t digits = end - dot;
  if (digits < 4 || digits > 9 || dot < 2 || path[dot - 1] != '.' || path[dot - 2] == '/') return false;
  number = static_cast<uint32_t>(std::stoul(path.substr(dot, digits)));
  if (number == 0) return false;
  stem = path.substr(0, dot - 1);
  return true;
}

std::string set_stem(const std::string& base) {
  static constexpr std::string_view kExt = ".mtide";
  if (base.size() > kExt.size() && base.compare(base.size() - kExt.size(), kExt.size(), kExt) == 0)
    return base.substr(0, base.size() - kExt.size());
  return base;
}

std::vector<SegmentPath> list_segments(const std::string& stem) {
  std::vector<SegmentPath> out;
  const size_t slash = stem.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : stem.substr(0, slash));
  const std::string prefix = slash == std::string::npos ? stem : stem.substr(slash + 1);
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    std::string s;
    uint32_t n = 0;
    if (!parse_segment_name(name, s, n) || s != prefix) continue;
    out.push_back({n, slash == std::string::npos ? name : stem.substr(0, slash + 1) + name});
  }
  closedir(d);
  std::sort(out.begin(), out.end(), [](const SegmentPath& a, const SegmentPath& b) { return a.number < b.number; });
  return out;
}

namespace {

// Whether the file at `path` has a segment's header.
bool is_segment_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  uint8_t h[20];
  const bool yes = ::pread(fd, h, sizeof h, 0) == static_cast<ssize_t>(sizeof h) &&
                   std::memcmp(h, kFileMagic, sizeof kFileMagic) == 0 && (wire::load_le<uint32_t>(h + 16) & kFileFlagSegment);
  ::close(fd);
  return yes;
}

}  // namespace

bool names_segment_set(const std::string& path, std::string& stem) {
  uint32_t n = 0;
  struct stat st;
  // A file is a segment when its header says so (`t.4242.mtide`, a forked child's trace, is not).
  if (::stat(path.c_str(), &st) == 0) return S_ISREG(st.st_mode) && parse_segment_name(path, stem, n) && is_segment_file(path);
  // A base name first (a child's set t.4242.mtide is t.4242.NNNN.mtide), then a removed segment.
  stem = set_stem(path);
  if (!list_segments(stem).empty()) return true;
  return parse_segment_name(path, stem, n) && !list_segments(stem).empty();
}

// ---------------------------------------------------------------------------------------
// SegmentFiles
// ---------------------------------------------------------------------------------------

SegmentFiles::~SegmentFiles() {
  for (Segment& s : segs_)
    if (s.fd >= 0) ::close(s.fd);
}

bool SegmentFiles::add(const std::string& path, uint32_t number) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  uint8_t h[kSegmentHeaderSize];
  uint64_t base = 0;
  uint32_t n = 0;
  if (::pread(fd, h, sizeof h, 0) != static_cast<ssize_t>(sizeof h) || std::memcmp(h, kFileMagic, sizeof kFileMagic) != 0 ||
      !(wire::load_le<uint32_t>(h + 16) & kFileFlagSegment) || wire::load_le<uint32_t>(h + 12) < kSegmentHeaderSize ||
      !decode_segment_fields(h, base, n) || n != number) {
    ::close(fd);
    return false;
  }
  segs_.push_back({number, base, wire::load_le<uint32_t>(h + 12), fd, path});
  return true;
}

std::string SegmentFiles::open_alone(const std::string& path) {
  stem_.clear();
  uint8_t h[kSegmentHeaderSize];
  uint64_t base = 0;
  uint32_t number = 0;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::string("cannot open: ") + std::strerror(errno);
  const bool ok = ::pread(fd, h, sizeof h, 0) == static_cast<ssize_t>(sizeof h) && decode_segment_fields(h, base, number);
  ::close(fd);
  if (!ok || !add(path, number)) return "a segment's header that does not read";
  return {};
}

std::string SegmentFiles::open(const std::string& stem) {
  stem_ = stem;
  const std::vector<SegmentPath> all = list_segments(stem);
  if (all.empty()) return "no segments " + stem + ".NNNN.mtide";
  // The latest run of consecutive numbers whose offsets follow on: an older segment may be
  // removed by the recorder while this runs (its descriptor, once open, still reads it).
  std::vector<Segment> kept;
  for (const SegmentPath& p : all) {
    if (!add(p.path, p.number)) continue;
    Segment s = segs_.back();
    segs_.pop_back();
    if (!kept.empty() && (s.number != kept.back().number + 1 || s.base < kept.back().base)) {
      for (Segment& k : kept) ::close(k.fd);
      kept.clear();
    }
    kept.push_back(std::move(s));
  }
  segs_ = std::move(kept);
  if (segs_.empty()) return "no readable segment " + stem + ".NNNN.mtide";
  return {};
}

const SegmentFiles::Segment* SegmentFiles::find(uint64_t off) const {
  for (std::size_t i = segs_.size(); i-- > 0;)
    if (off >= segs_[i].base) return off < end_of(i) || i + 1 == segs_.size() ? &segs_[i] : nullptr;
  return nullptr;
}

uint64_t SegmentFiles::end_of(std::size_t i) const {
  if (i + 1 < segs_.size()) return segs_[i + 1].base;
  struct stat st;
  if (segs_[i].fd < 0 || ::fstat(segs_[i].fd, &st) != 0) return segs_[i].base;
  return segs_[i].base + static_cast<uint64_t>(st.st_size);
}

uint64_t SegmentFiles::end() const { return segs_.empty() ? 0 : end_of(segs_.size() - 1); }

void SegmentFiles::release_before(uint64_t off) {
  for (std::size_t i = 0; i + 1 < segs_.size() && end_of(i) <= off; ++i) {
    struct stat st;
    if (segs_[i].fd >= 0 && ::fstat(segs_[i].fd, &st) == 0 && st.st_nlink == 0) {
      ::close(segs_[i].fd);
      segs_[i].fd = -1;
    }
  }
}

bool SegmentFiles::refresh() {
  if (segs_.empty() || stem_.empty()) return false;
  bool added = false;
  for (const SegmentPath& p : list_segments(stem_)) {
    if (p.number > segs_.back().number + 1 && !added && !gap_) {  // (the list is by number: the first after the gap)
      gap_ = true;
      gap_first_ = segs_.back().number + 1;
      gap_last_ = p.number - 1;
    }
    if (p.number != segs_.back().number + 1) continue;
    // (A segment just created may not have its header yet: looked at again next time.)
    if (!add(p.path, p.number)) break;
    added = true;
  }
  return added;
}

std::string SegmentFiles::gap_message() const {
  const std::string first = segment_name(stem_, gap_first_);
  if (gap_last_ == gap_first_)
    return "the segment " + first + " was removed before it was read (this reader fell more than the set's size behind)";
  return "the segments " + first + " to " + segment_name(stem_, gap_last_) +
         " were removed before they were read (this reader fell more than the set's size behind)";
}

}  // namespace memtide::fmt
