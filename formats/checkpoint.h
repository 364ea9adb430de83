// Checkpoints (since 2.2): what a reader needs to replay a trace from a point in time without
// reading what came before it. docs/FORMAT.md section 14 describes the bytes.
//
// A checkpoint is a run of stream-0 blocks written by the recorder's writer thread: first the
// live blocks at its time (Checkpoint records, op Blocks, in blocks flagged
// kBlockFlagCheckpointData), then the per-thread counts (op Threads) and the head (op Head) in
// one block flagged kBlockFlagCheckpoint. The head comes last, so a checkpoint cut by a crash
// has no head and is never used. The records are untimed and older readers skip them.
//
// The encoders (header-only, allocation-free) are the recorder's; the parsers and the scan
// that finds the heads (checkpoint.cpp) are the readers'.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "formats/records.h"
#include "formats/wire.h"

namespace memtide::fmt {

class FileReader;

inline constexpr uint8_t kTagCheckpoint = 0x0F;

// A file with checkpoints has a 48-byte header: the 32 bytes of every file, then at offset 32
// `u64 last_head` (the offset of the latest checkpoint's head block, 0: none yet), `u32`
// reserved (0) and `u32 checksum` (low 32 bits of XXH3_64 over [32, 44)). The writer rewrites
// these 16 bytes after each checkpoint; older readers skip them (header_size). A reader that
// finds them torn or stale scans the block headers instead.
inline constexpr uint32_t kCheckpointHeaderSize = 48;
inline constexpr uint32_t kCheckpointPointerAt = 32;
inline constexpr uint32_t kCheckpointPointerSize = 16;
enum class CheckpointOp : uint8_t { Blocks = 1, Threads = 2, Head = 3, Marker = 4, Process = 5 };
// Live-block domains of a Blocks record: the replay's heap and custom live maps, and the
// anonymous mappings (whose entries are address ranges).
enum class CheckpointDomain : uint8_t { Heap = 0, Custom = 1, Mmap = 2, Count };
inline constexpr unsigned kCheckpointDomains = static_cast<unsigned>(CheckpointDomain::Count);

// One live block (or mapped range) at the checkpoint's time.
struct CheckpointEntry {
  uint64_t addr = 0, size = 0, stack = 0;
  uint64_t time = 0;    // when it was allocated (absolute, as the records' times)
  uint64_t weight = 0;  // sampled: the bytes it stands for (the replay's weight); 0: itself
  Api api = Api::Malloc;
};

struct CheckpointThread {
  uint64_t stream = 0, allocs = 0, frees = 0;  // Alloc and Free records before the checkpoint
  uint64_t os_tid = 0, parent = 0, start = 0, exit = 0;  // its ThreadStart and ThreadExit (0: none yet)
  std::string name;                                      // its latest ThreadName
};

struct CheckpointHead {
  uint64_t seq = 0;           // 1, 2, ... in the file
  uint64_t time = 0;          // every record timed before it is accounted for, none after
  uint64_t replay_from = 0;   // offset of the first block that may hold a record timed >= time
  uint64_t data_offset = 0;   // offset of its first data block
  uint64_t data_blocks = 0;   // consecutive data blocks from there
  uint64_t interval = 0;      // the sampling interval in force (0: exact)
  uint64_t bytes[kCheckpointDomains] = {}, blocks[kCheckpointDomains] = {};  // live totals
  uint64_t prev = 0;          // the previous checkpoint's head block (0: none)
  uint64_t offset = 0;        // (readers) the head block's offset
  std::vector<CheckpointThread> threads;  // (readers)
  struct MarkerCopy {
    uint64_t stream = 0, time = 0, sampling = 0;
    std::string label;
  };
  // The Markers of the threads' streams (not stream 0) timed from the previous checkpoint to this one.
  std::vector<MarkerCopy> markers;  // (readers)
  // Op Process (added within 2.2): the process stream's Counters and Markers timed from the previous
  // checkpoint to this one, so that the whole run's timeline reads the heads, not every block.
  struct CounterCopy {
    uint64_t time = 0, rss_bytes = 0, vm_bytes = 0;
  };
  bool has_process = false;  // (readers) the head block held them (even none)
  std::vector<CounterCopy> counters;         // (readers)
  std::vector<MarkerCopy> process_markers;  // (readers) stream 0's
};

// ---------------------------------------------------------------------------------------
// Encoding (the recorder): each function writes one whole record at `out` and returns the end.
// ---------------------------------------------------------------------------------------

// Room for one Blocks entry.
inline constexpr std::size_t kCheckpointEntryMax = 5 * wire::kMaxVarint + 1;

// A record is `tag, varint len, payload`: the payload is written at out + kCheckpointPrefix and
// moved down once its length is known.
inline constexpr std::size_t kCheckpointPrefix = 1 + wire::kMaxVarint;
inline uint8_t* checkpoint_close(uint8_t* out, uint8_t* payload_end) {
  const std::size_t len = static_cast<std::size_t>(payload_end - (out + kCheckpointPrefix));
  uint8_t* p = out;
  *p++ = kTagCheckpoint;
  p = wire::put_varint(p, len);
  std::memmove(p, out + kCheckpointPrefix, len);
  return p + len;
}

// Entries in ascending address order; `prev_addr` is the previous entry's address in the same
// record (0 for the first).
inline uint8_t* put_checkpoint_entry(uint8_t* p, uint64_t prev_addr, const CheckpointEntry& e, uint64_t time) {
  p = wire::put_varint(p, e.addr - prev_addr);
  p = wire::put_varint(p, e.size);
  p = wire::put_varint(p, e.stack);
  p = wire::put_varint(p, time - e.time);
  *p++ = static_cast<uint8_t>(e.api);
  return wire::put_varint(p, e.weight);
}

// ---------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------

// Parses a Checkpoint record's payload (after tag and length). Head and Threads fill `head`;
// Blocks calls `entry(domain, entry)` for each entry. False when it does not parse.
template <class F>
bool parse_checkpoint(std::span<const uint8_t> payload, uint64_t time, CheckpointHead& head, F&& entry);

// The heads of every complete checkpoint of the file, in file order, found by a scan of the
// block headers (only the head blocks are decompressed). The reader's offset is kept. Heads that
// cannot be right are left out, each said in `warnings` (drop_unusable_checkpoints).
std::vector<CheckpointHead> find_checkpoints(FileReader& reader, std::vector<std::string>* warnings = nullptr);
// Leaves out of `heads` (in file order) each one whose time goes back from the one before it
// kept (a window from it would be silently empty), or whose live-block counts its data blocks
// cannot hold (a reader would reserve for them); says why in `warnings`, when given.
void drop_unusable_checkpoints(std::vector<CheckpointHead>& heads, std::vector<std::string>* warnings);
// The checkpoint's live blocks: `entry(domain, entry)` for each. An error message, or empty.
std::string read_checkpoint(FileReader& reader, const CheckpointHead& head,
                            const std::function<void(CheckpointDomain, const CheckpointEntry&)>& entry);

// The latest of `heads` whose time is at or before `t` (nullptr when none).
const CheckpointHead* checkpoint_before(const std::vector<CheckpointHead>& heads, uint64_t t);

template <class F>
bool parse_checkpoint(std::span<const uint8_t> payload, uint64_t time, CheckpointHead& head, F&& entry) {
  wire::Cursor c(payload.data(), payload.data() + payload.size());
  uint8_t op;
  if (!c.get_u8(op)) return false;
  uint64_t seq;
  if (!c.get_varint(seq)) return false;
  if (op == static_cast<uint8_t>(CheckpointOp::Head)) {
    head.seq = seq;
    bool ok = c.get_varint(head.time) && c.get_varint(head.replay_from) && c.get_varint(head.data_offset) &&
              c.get_varint(head.data_blocks) && c.get_varint(head.interval);
    for (unsigned d = 0; ok && d < kCheckpointDomains; ++d) ok = c.get_varint(head.bytes[d]) && c.get_varint(head.blocks[d]);
    return ok && c.get_varint(head.prev);  // (fields of later versions follow)
  }
  if (op == static_cast<uint8_t>(CheckpointOp::Threads)) {
    uint64_t n;
    if (!c.get_varint(n) || n > payload.size()) return false;
    for (uint64_t i = 0; i < n; ++i) {
      CheckpointThread t;
      const uint8_t* name;
      std::size_t len;
      if (!c.get_varint(t.stream) || !c.get_varint(t.allocs) || !c.get_varint(t.frees) || !c.get_varint(t.os_tid) ||
          !c.get_varint(t.parent) || !c.get_varint(t.start) || !c.get_varint(t.exit) || !c.get_bytes(name, len))
        return false;
      t.name.assign(reinterpret_cast<const char*>(name), len);
      head.threads.push_back(t);
    }
    return true;
  }
  if (op == static_cast<uint8_t>(CheckpointOp::Marker)) {
    CheckpointHead::MarkerCopy m;
    const uint8_t* label;
    std::size_t len;
    if (!c.get_varint(m.stream) || !c.get_varint(m.time) || !c.get_varint(m.sampling) || !c.get_bytes(label, len))
      return false;
    m.label.assign(reinterpret_cast<const char*>(label), len);
    head.markers.push_back(std::move(m));
    return true;
  }
  if (op == static_cast<uint8_t>(CheckpointOp::Process)) {
    uint64_t n;
    if (!c.get_varint(n) || n > payload.size()) return false;
    for (uint64_t i = 0; i < n; ++i) {
      CheckpointHead::CounterCopy x;
      if (!c.get_varint(x.time) || !c.get_varint(x.rss_bytes) || !c.get_varint(x.vm_bytes)) return false;
      head.counters.push_back(x);
    }
    if (!c.get_varint(n) || n > payload.size()) return false;
    for (uint64_t i = 0; i < n; ++i) {
      CheckpointHead::MarkerCopy m;
      const uint8_t* label;
      std::size_t len;
      if (!c.get_varint(m.time) || !c.get_varint(m.sampling) || !c.get_bytes(label, len)) return false;
      m.label.assign(reinterpret_cast<const char*>(label), len);
      head.process_markers.push_back(std::move(m));
    }
    head.has_process = true;
    return true;
  }
  if (op != static_cast<uint8_t>(CheckpointOp::Blocks)) return true;  // a later op: skipped
  uint8_t domain;
  uint64_t n;
  if (!c.get_u8(domain) || domain >= kCheckpointDomains || !c.get_varint(n) || n > payload.size()) return false;
  uint64_t addr = 0;
  for (uint64_t i = 0; i < n; ++i) {
    CheckpointEntry e;
    uint64_t da, age;
    uint8_t api;
    if (!c.get_varint(da) || !c.get_varint(e.size) || !c.get_varint(e.stack) || !c.get_varint(age) || !c.get_u8(api) ||
        !c.get_varint(e.weight) || api >= kApiCount || age > time)
      return false;
    addr += da;
    e.addr = addr;
    e.time = time - age;
    e.api = static_cast<Api>(api);
    entry(static_cast<CheckpointDomain>(domain), e);
  }
  return true;
}

}  // namespace memtide::fmt
