// Readers' side of the checkpoints (checkpoint.h): the scan of block headers that finds the
// heads, and the reading of a checkpoint's live blocks.
#include "formats/checkpoint.h"

#include <algorithm>

#include "formats/encoder.h"
#include "formats/reader.h"

namespace memtide::fmt {

namespace {

// Calls `rec(payload)` for each Checkpoint record of a block; false when a record does not parse
// (or `rec` says so).
template <class F>
bool each_checkpoint_record(std::span<const uint8_t> payload, F&& rec) {
  wire::Cursor c(payload.data(), payload.data() + payload.size());
  while (!c.at_end()) {
    uint8_t tag;
    const uint8_t* data;
    std::size_t n;
    if (!c.get_u8(tag) || !c.get_bytes(data, n)) return false;
    if (tag == kTagCheckpoint && !rec(std::span<const uint8_t>(data, n))) return false;
  }
  return true;
}

// Restores a reader's offset when the scope ends.
struct KeepOffset {
  FileReader& r;
  uint64_t at = r.offset();
  ~KeepOffset() { r.seek(at); }
};

// The head block at `offset`, parsed into `h`; false when it is not one.
bool read_head(FileReader& reader, uint64_t offset, CheckpointHead& h) {
  reader.seek(offset);
  Block b;
  if (!reader.next(b).ok() || !(b.header.flags & kBlockFlagCheckpoint) || b.header.stream != 0) return false;
  bool have = false;
  const bool ok = each_checkpoint_record(b.payload, [&](std::span<const uint8_t> p) {
    if (!p.empty() && p[0] == static_cast<uint8_t>(CheckpointOp::Head)) have = true;
    return parse_checkpoint(p, 0, h, [](CheckpointDomain, const CheckpointEntry&) {});
  });
  h.offset = b.offset;
  return ok && have && h.data_offset <= b.offset && h.replay_from <= b.offset && h.prev < b.offset;
}

// Scans the block headers from the reader's offset for head blocks (only those are read).
void scan_heads(FileReader& reader, std::vector<CheckpointHead>& heads) {
  for (;;) {
    BlockRef ref;
    if (!reader.skip(ref).ok()) break;  // the end, a cut or a bad block: the checkpoints before it
    if (!(ref.header.flags & kBlockFlagCheckpoint) || ref.header.stream != 0) continue;
    const uint64_t next = reader.offset();
    CheckpointHead h;
    if (read_head(reader, ref.offset, h)) heads.push_back(std::move(h));
    reader.seek(next);
  }
}

// The heads by the file header's pointer to the latest and each head's to the one before (a few
// small reads); false when the pointer is missing or does not lead back to the first.
bool follow_pointers(FileReader& reader, std::vector<CheckpointHead>& heads) {
  std::vector<uint8_t> p;
  if (reader.info().header_size < kCheckpointHeaderSize || !reader.read_bytes(kCheckpointPointerAt, kCheckpointPointerSize, p))
    return false;
  if (wire::load_le<uint32_t>(p.data() + 12) != (checksum32(p.data(), 12))) return false;
  // (In a segment set the chain goes on into removed segments: it ends at the first block.)
  for (uint64_t at = wire::load_le<uint64_t>(p.data()); at && at >= reader.first_block();) {
    CheckpointHead h;
    if (!read_head(reader, at, h) || (!heads.empty() && h.seq + 1 != heads.back().seq)) return false;
    at = h.prev;
    heads.push_back(std::move(h));
  }
  const bool cut = reader.starts_mid_run() && !heads.empty() && heads.back().prev < reader.first_block();
  if (!heads.empty() && heads.back().seq != 1 && !cut) return false;
  std::reverse(heads.begin(), heads.end());
  return true;
}

}  // namespace

void drop_unusable_checkpoints(std::vector<CheckpointHead>& heads, std::vector<std::string>* warnings) {
  // A data block holds at most kMaxBlockPayload bytes of entries of at least kMinEntryBytes each.
  constexpr uint64_t kMinEntryBytes = 5;
  constexpr uint64_t kMostPerBlock = kMaxBlockPayload / kMinEntryBytes;
  uint64_t last_time = 0;
  std::erase_if(heads, [&](const CheckpointHead& h) {
    uint64_t live = 0;
    bool overflow = false;
    for (unsigned d = 0; d < kCheckpointDomains; ++d) overflow |= __builtin_add_overflow(live, h.blocks[d], &live);
    std::string why;
    if (h.time < last_time)
      why = "its time is before the previous checkpoint's";
    else if (overflow || h.data_blocks > kMaxBlockPayload || live > h.data_blocks * kMostPerBlock)
      why = "it counts more live blocks than its data blocks can hold";
    if (why.empty()) {
      last_time = h.time;
      return false;
    }
    if (warnings) warnings->push_back("checkpoint " + std::to_string(h.seq) + " (offset " + std::to_string(h.offset) + "): " + why + "; not used");
    return true;
  });
}

std::vector<CheckpointHead> find_checkpoints(FileReader& reader, std::vector<std::string>* warnings) {
  std::vector<CheckpointHead> heads;
  if (!(reader.info().flags & kFileFlagCheckpoints)) return heads;
  KeepOffset keep{reader};
  if (follow_pointers(reader, heads)) {
    // Checkpoints written after the pointer was last updated (a kill between the two writes).
    reader.seek(heads.empty() ? reader.first_block() : heads.back().offset);
    if (!heads.empty()) {
      BlockRef ref;
      reader.skip(ref);
    }
    scan_heads(reader, heads);
  } else {
    heads.clear();
    reader.seek(reader.first_block());
    scan_heads(reader, heads);
  }
  // A set's first checkpoints may start their replay in a removed segment: not usable.
  std::erase_if(heads, [&](const CheckpointHead& h) { return h.replay_from < reader.first_block() || h.data_offset < reader.first_block(); });
  drop_unusable_checkpoints(heads, warnings);
  return heads;
}

std::string read_checkpoint(FileReader& reader, const CheckpointHead& head,
                            const std::function<void(CheckpointDomain, const CheckpointEntry&)>& entry) {
  KeepOffset keep{reader};
  reader.seek(head.data_offset);
  CheckpointHead scratch;
  for (uint64_t i = 0; i < head.data_blocks; ++i) {
    Block b;
    const ReadResult r = reader.next(b);
    if (!r.ok()) return "checkpoint " + std::to_string(head.seq) + ": " + r.message;
    if (!(b.header.flags & kBlockFlagCheckpointData))
      return "checkpoint " + std::to_string(head.seq) + ": block at offset " + std::to_string(b.offset) +
             " is not one of its data blocks";
    const bool ok = each_checkpoint_record(
        b.payload, [&](std::span<const uint8_t> p) { return parse_checkpoint(p, head.time, scratch, entry); });
    if (!ok) return "checkpoint " + std::to_string(head.seq) + ": corrupt record in the block at offset " + std::to_string(b.offset);
  }
  return {};
}

const CheckpointHead* checkpoint_before(const std::vector<CheckpointHead>& heads, uint64_t t) {
  const CheckpointHead* best = nullptr;
  for (const CheckpointHead& h : heads)
    if (h.time <= t && (!best || h.time >= best->time)) best = &h;
  return best;
}

}  // namespace memtide::fmt
