#include "formats/decoder.h"

#include <cstdio>

namespace memtide::fmt {

template ReadResult decode_block<RecordVisitor>(const Block&, DecodeScratch&, RecordVisitor&);

RecordType record_type_of_tag(uint8_t tag) {
  if (is_alloc_tag(tag) || is_alloc_recent_tag(tag)) return RecordType::Alloc;
  if (is_free_tag(tag) || is_free_recent_tag(tag)) return RecordType::Free;
  for (unsigned i = 0; i < static_cast<unsigned>(RecordType::Alloc); ++i)
    if (kRecordTag[i] == tag) return static_cast<RecordType>(i);
  return RecordType::Count;
}

std::string_view tag_name(uint8_t tag) {
  const RecordType t = record_type_of_tag(tag);
  return t == RecordType::Count ? std::string_view("unknown") : record_type_name(t);
}

std::string describe(DecodeError e, uint8_t tag) {
  char head[48];
  std::snprintf(head, sizeof head, " record (tag 0x%02x): ", tag);
  std::string m = std::string(tag_name(tag)) + head;
  switch (e) {
    case DecodeError::None: return m + "no error";
    case DecodeError::AllocFree: return m + "runs past the end of the block or has an invalid varint";
    case DecodeError::Length: return m + "length prefix is invalid or runs past the end of the block";
    case DecodeError::Fields: return m + "fields run past the record length or contain an invalid varint";
    case DecodeError::TooManyFrames:
      return m + "more than " + std::to_string(kMaxStackDefFrames) + " frames";
    case DecodeError::TooManySegments:
      return m + "more than " + std::to_string(kMaxSegments) + " segments";
  }
  return m + "unknown error";
}

}  // namespace memtide::fmt
