// Readers' side of the checkpoints (checkpoint.h): the scan of block headers that finds the
// heads, and the reading of a checkpoint's live blocks.
#include "formats/checkpoint.h"

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

}  // namespace

std::vector<CheckpointHead> find_checkpoints(FileReader& reader) {
  std::vector<CheckpointHead> heads;
  if (!(reader.info().flags & kFileFlagCheckpoints)) return heads;
  KeepOffset keep{reader};
  reader.seek(reader.info().header_size);
  std::vector<CheckpointHead::MarkerCopy> carried;
  for (;;) {
    BlockRef ref;
    if (!reader.peek_header(ref).ok()) break;  // the end, a cut or a bad block: the checkpoints before it
    if (!(ref.header.flags & kBlockFlagCheckpoint) || ref.header.stream != 0) {
      if (!reader.skip(ref).ok()) break;
      continue;
    }
    Block b;
    if (!reader.next(b).ok()) break;
    CheckpointHead h;
    h.markers = std::move(carried);  // (a head block too full for its markers left some before it)
    carried.clear();
    bool have = false;
    const bool ok = each_checkpoint_record(b.payload, [&](std::span<const uint8_t> p) {
      if (!p.empty() && p[0] == static_cast<uint8_t>(CheckpointOp::Head)) have = true;
      return parse_checkpoint(p, 0, h, [](CheckpointDomain, const CheckpointEntry&) {});
    });
    if (ok && !have) carried = std::move(h.markers);
    if (!ok || !have || h.data_offset > b.offset || h.replay_from > b.offset) continue;
    h.offset = b.offset;
    heads.push_back(std::move(h));
  }
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
