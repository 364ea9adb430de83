// Every record of the memtide trace format, declared once.
//
// Sections:
//   [1] File and block framing constants
//   [2] Allocation APIs
//   [3] Record types and their wire tags
//   [4] Decoded record structs (what a reader hands to its visitor)
//   [5] Hot-path encoders for Alloc / Free (used by the recorder)
//
// docs/FORMAT.md describes the same bytes in prose; keep them in step.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "formats/wire.h"

namespace memtide::fmt {

// ---------------------------------------------------------------------------------------
// [1] Framing
// ---------------------------------------------------------------------------------------

// File header: 32 bytes at offset 0.
//   0  u8[8]  magic "\x8AMTIDE\r\n"  (high bit and CR/LF catch 7-bit and newline mangling)
//   8  u16    version_major  (a reader refuses a major it does not know; 2 reads 1 and 2)
//   10 u16    version_minor  (newer minor: read with a warning)
//   12 u32    header_size    (32; 48 with checkpoints, formats/checkpoint.h; readers skip any extra bytes)
//   16 u32    flags          (bit 0: sampled recording; bit 1: blocks carry their hints;
//                             bit 2: watermarks vouch for their own time)
//   20 u64    reserved (0)
//   28 u32    checksum: low 32 bits of XXH3_64 over bytes [0, 28)
inline constexpr uint8_t kFileMagic[8] = {0x8A, 'M', 'T', 'I', 'D', 'E', '\r', '\n'};
inline constexpr uint16_t kVersionMajor = 2;
inline constexpr uint16_t kVersionMinor = 2;
// The oldest major this reader reads. 2.0 added the short Alloc and Free forms (tags
// 0x80..0xFF, reserved in 1.x and never written by a 1.x writer); the rest of 1.3 is unchanged.
inline constexpr uint16_t kOldestVersionMajor = 1;
inline constexpr uint32_t kFileHeaderSize = 32;
inline constexpr uint32_t kFileFlagSampled = 1u << 0;
// Set by writers that flag every block holding StackDef or Symbols records (below), so that a
// reader looking only for those can step over the other blocks without decompressing them.
inline constexpr uint32_t kFileFlagBlockHints = 1u << 1;
// Since 1.2: every record timed before a watermark's time is in the watermark's block (before
// it) or in an earlier block, so a reader may release everything before a watermark as soon as
// it reads it. Without this flag that holds only once the next watermark has been read.
inline constexpr uint32_t kFileFlagExactWatermarks = 1u << 2;
// Since 2.2: the writer records checkpoints (formats/checkpoint.h), each head in a block flagged
// kBlockFlagCheckpoint, so that a scan of the block headers finds them all.
inline constexpr uint32_t kFileFlagCheckpoints = 1u << 3;

// Block header: 48 bytes, then `stored_size` payload bytes.
//   0  u32  magic "MTBK" (0x4B42544D little-endian)
//   4  u8   kind   (BlockKind)
//   5  u8   codec  (Codec)
//   6  u16  flags  (hints: kBlockFlagStacks, kBlockFlagSymbols)
//   8  u32  stored_size  payload bytes that follow in the file
//   12 u32  raw_size     payload bytes after decompression (== stored_size for Codec::None)
//   16 u32  stream       thread index the records belong to (0: process stream)
//   20 u32  payload_checksum: low 32 bits of XXH3_64 over the stored payload bytes
//   24 u64  base_time    stream's time (ns, CLOCK_MONOTONIC) before the first record
//   32 u64  base_addr    stream's address state before the first record
//   40 u32  reserved (0)
//   44 u32  header_checksum: low 32 bits of XXH3_64 over header bytes [0, 44)
inline constexpr uint32_t kBlockMagic = 0x4B42544D;  // "MTBK"
inline constexpr uint32_t kBlockHeaderSize = 48;
// No block may claim more than this, stored or raw: a reader's allocation is bounded by it.
inline constexpr uint32_t kMaxBlockPayload = 16u << 20;
// Block flags (hints; a reader that does not use them ignores them). In a file with
// kFileFlagBlockHints every block holding a StackDef has kBlockFlagStacks and every block
// holding a Symbols record has kBlockFlagSymbols; a flag on a block without them is allowed.
inline constexpr uint16_t kBlockFlagStacks = 1u << 0;
inline constexpr uint16_t kBlockFlagSymbols = 1u << 1;
// Since 2.2: a block holding a checkpoint's head (kBlockFlagCheckpoint) or its live blocks
// (kBlockFlagCheckpointData), and nothing else. Readers that replay from the start skip the
// latter by its header.
inline constexpr uint16_t kBlockFlagCheckpoint = 1u << 2;
inline constexpr uint16_t kBlockFlagCheckpointData = 1u << 3;

enum class BlockKind : uint8_t { Records = 0, Count };
enum class Codec : uint8_t { None = 0, Lz4 = 1, Count };

struct BlockHeader {
  BlockKind kind = BlockKind::Records;
  Codec codec = Codec::Lz4;
  uint16_t flags = 0;
  uint32_t stored_size = 0;
  uint32_t raw_size = 0;
  uint32_t stream = 0;
  uint32_t payload_checksum = 0;
  uint64_t base_time = 0;
  uint64_t base_addr = 0;
};

// ---------------------------------------------------------------------------------------
// [2] Allocation APIs: which call made or released a block.
// ---------------------------------------------------------------------------------------

enum class Api : uint8_t {
  Malloc = 0,
  Calloc,
  Realloc,        // realloc: the alloc side (new block) and the free side (old block)
  Reallocarray,   // likewise
  PosixMemalign,
  AlignedAlloc,
  Memalign,
  Valloc,
  Pvalloc,
  Free,
  New,             // operator new (also nothrow)
  NewArray,        // operator new[] (also nothrow)
  NewAligned,      // operator new(size, align_val_t) (also nothrow)
  NewArrayAligned, // operator new[](size, align_val_t)
  Delete,          // operator delete(p) and sized / nothrow forms
  DeleteArray,     // operator delete[](p) and sized / nothrow forms
  DeleteAligned,   // operator delete(p, align_val_t) and sized form
  DeleteArrayAligned,
  Mmap,            // anonymous mmap
  Munmap,
  Mremap,          // alloc side: the new mapping; free side: the old one
  Custom,          // memtide_alloc / memtide_free from memtide.h
  Count
};
inline constexpr unsigned kApiCount = static_cast<unsigned>(Api::Count);
static_assert(kApiCount <= 32, "Alloc/Free wire tags reserve 32 APIs each");

// The family decides which release matches which allocation (new[] released by free is a
// mismatch). Mmap blocks are not heap blocks and are reported apart.
enum class Family : uint8_t { Malloc, New, NewArray, NewAligned, NewArrayAligned, Mmap, Custom, Count };

namespace detail {
constexpr Family family_switch(Api a) {
  switch (a) {
    case Api::New: case Api::Delete: return Family::New;
    case Api::NewArray: case Api::DeleteArray: return Family::NewArray;
    case Api::NewAligned: case Api::DeleteAligned: return Family::NewAligned;
    case Api::NewArrayAligned: case Api::DeleteArrayAligned: return Family::NewArrayAligned;
    case Api::Mmap: case Api::Munmap: case Api::Mremap: return Family::Mmap;
    case Api::Custom: return Family::Custom;
    default: return Family::Malloc;
  }
}
// family_switch of the 32 wire apis, looked up (the replay asks for every event; the switch
// compiles to a chain of compares).
struct FamilyTable {
  Family f[32];
};
inline constexpr FamilyTable kFamilyOfApi = [] {
  FamilyTable t{};
  for (unsigned i = 0; i < 32; ++i) t.f[i] = family_switch(static_cast<Api>(i));
  return t;
}();
}  // namespace detail

constexpr Family family_of(Api a) {
  const auto i = static_cast<unsigned>(a);
  return i < 32 ? detail::kFamilyOfApi.f[i] : Family::Malloc;
}

constexpr bool is_heap(Api a) { return family_of(a) != Family::Mmap; }

constexpr std::string_view api_name(Api a) {
  constexpr std::string_view names[] = {
      "malloc", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
      "memalign", "valloc", "pvalloc", "free", "new", "new[]", "new(align)", "new[](align)",
      "delete", "delete[]", "delete(align)", "delete[](align)", "mmap", "munmap", "mremap",
      "custom"};
  static_assert(sizeof(names) / sizeof(names[0]) == kApiCount, "api_name out of step with Api");
  const auto i = static_cast<unsigned>(a);
  return i < kApiCount ? names[i] : std::string_view("?");
}

// ---------------------------------------------------------------------------------------
// [3] Record types
//
// A block's payload is a sequence of records. Each starts with a one-byte tag:
//   0x40 + api   Alloc: varint dt, svarint daddr, varint size, varint stack
//   0x60 + api   Free:  varint dt, svarint daddr [, varint length if api == Munmap]
//   anything else: a length-prefixed record: tag, varint payload_len, payload.
// Length-prefixed records may gain trailing fields in later minor versions (readers skip
// what they do not know), and a reader skips a whole record whose tag it does not know.
//
// Per stream the decoder keeps two registers, reset from the block header at each block:
//   time  (ns): every timed record carries dt = its time - previous time (never negative)
//   addr      : Alloc and Free carry daddr = address - previous address (zigzag)
// ---------------------------------------------------------------------------------------

enum class RecordType : uint8_t {
  ProcessInfo = 0,
  ModuleLoad,
  ModuleUnload,
  ThreadStart,
  ThreadName,
  ThreadExit,
  StackDef,
  Counters,
  Marker,
  SampleWeight,
  Watermark,
  End,
  Symbols,
  Scan,
  Alloc,
  Free,
  Count
};
inline constexpr unsigned kRecordTypeCount = static_cast<unsigned>(RecordType::Count);

inline constexpr uint8_t kTagAllocBase = 0x40;
inline constexpr uint8_t kTagFreeBase = 0x60;

// Wire tags of the length-prefixed records, indexed by RecordType (Alloc/Free: base tags).
inline constexpr uint8_t kRecordTag[kRecordTypeCount] = {
    0x01,  // ProcessInfo
    0x02,  // ModuleLoad
    0x03,  // ModuleUnload
    0x04,  // ThreadStart
    0x05,  // ThreadName
    0x06,  // ThreadExit
    0x07,  // StackDef
    0x08,  // Counters
    0x09,  // Marker
    0x0A,  // SampleWeight
    0x0B,  // Watermark
    0x0C,  // End
    0x0D,  // Symbols
    0x0E,  // Scan
    kTagAllocBase,
    kTagFreeBase,
};
static_assert(sizeof(kRecordTag) == kRecordTypeCount, "kRecordTag out of step with RecordType");

constexpr uint8_t tag_of(RecordType t) { return kRecordTag[static_cast<unsigned>(t)]; }
constexpr bool is_alloc_tag(uint8_t tag) { return tag >= kTagAllocBase && tag < kTagAllocBase + 32; }
constexpr bool is_free_tag(uint8_t tag) { return tag >= kTagFreeBase && tag < kTagFreeBase + 32; }

// Added in 2.0: the short forms of Alloc and Free, for an address the block used recently
// (docs/FORMAT.md, "Recent addresses"). The tag holds the API and k, the position of the
// address in the block's ring of recent allocated addresses (for a Free) or of recent freed
// addresses (for an Alloc): k = 0 is the latest.
//   0x80 + k  Alloc, malloc        0xA0 + k  Alloc, new
//   0xC0 + k  Free, free           0xE0 + k  Free, delete
inline constexpr uint8_t kTagAllocRecent = 0x80;
inline constexpr uint8_t kTagFreeRecent = 0xC0;
inline constexpr unsigned kRingSize = 32;  // addresses per ring; k < kRingSize
constexpr bool is_alloc_recent_tag(uint8_t tag) { return tag >= kTagAllocRecent && tag < kTagFreeRecent; }
constexpr bool is_free_recent_tag(uint8_t tag) { return tag >= kTagFreeRecent; }
constexpr Api recent_alloc_api(uint8_t tag) { return (tag & 0x20) ? Api::New : Api::Malloc; }
constexpr Api recent_free_api(uint8_t tag) { return (tag & 0x20) ? Api::Delete : Api::Free; }
// The short-form tag base of an API, or 0 when it has none.
constexpr uint8_t recent_tag_base(bool alloc, Api api) {
  if (alloc) return api == Api::Malloc ? kTagAllocRecent : api == Api::New ? kTagAllocRecent + 0x20 : 0;
  return api == Api::Free ? kTagFreeRecent : api == Api::Delete ? kTagFreeRecent + 0x20 : 0;
}

// A block's two rings of recent addresses: every Alloc and Free record of the block, short or
// not, pushes its address into ring 0 (Alloc) or ring 1 (Free). Both start empty (all zero) at
// each block.
struct AddrRings {
  uint64_t slot[2][kRingSize] = {};
  uint32_t pos[2] = {};
  void clear() { *this = AddrRings{}; }
  // The address k pushes ago in ring `r`.
  uint64_t get(unsigned r, unsigned k) const { return slot[r][(pos[r] - 1 - k) & (kRingSize - 1)]; }
  void push(unsigned r, uint64_t addr) { slot[r][pos[r]++ & (kRingSize - 1)] = addr; }
};

constexpr std::string_view record_type_name(RecordType t) {
  constexpr std::string_view names[] = {"process",    "module_load", "module_unload", "thread_start",
                                        "thread_name", "thread_exit", "stack",         "counters",
                                        "marker",     "sample_weight", "watermark",    "end",
                                        "symbols",    "scan",        "alloc",        "free"};
  static_assert(sizeof(names) / sizeof(names[0]) == kRecordTypeCount);
  const auto i = static_cast<unsigned>(t);
  return i < kRecordTypeCount ? names[i] : std::string_view("?");
}

// Whether a record type carries a dt (time delta) as its first payload field.
constexpr bool is_timed(RecordType t) {
  switch (t) {
    case RecordType::ProcessInfo: case RecordType::StackDef: case RecordType::SampleWeight:
    case RecordType::Symbols: case RecordType::Scan: return false;
    default: return true;
  }
}

enum class RecordingMode : uint8_t { Exact = 0, Sampled = 1, Count };

// Why the trace ended (End record).
enum class EndReason : uint8_t {
  Exit = 0,         // return from main / exit() from any thread; `status` is exit's
  ImmediateExit = 1,  // _exit / _Exit (no exit handlers ran)
  Signal = 2,       // fatal signal: flushed, then re-raised; `status` is the signal number
  Exec = 3,         // the process exec'd another program (which records into its own file)
  Error = 4,        // recording stopped after an error (see the message on stderr)
  Detached = 5,     // recording stopped on request
  QuickExit = 6,    // quick_exit (after the at_quick_exit handlers)
  Detach = 7,       // `memtide detach` (or the end of `memtide attach`): the process goes on
  Count
};

// How readers name each reason (`memtide info --end`, JSON "reason").
constexpr std::string_view end_reason_name(EndReason r) {
  constexpr std::string_view names[] = {"exit", "_exit", "signal", "exec", "error", "detached", "quick_exit", "detach"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<unsigned>(EndReason::Count),
                "end_reason_name out of step with EndReason");
  const auto i = static_cast<unsigned>(r);
  return i < static_cast<unsigned>(EndReason::Count) ? names[i] : std::string_view("unknown");
}
// Whether `status` of an End with this reason is an exit status.
constexpr bool end_has_exit_status(EndReason r) {
  return r == EndReason::Exit || r == EndReason::ImmediateExit || r == EndReason::QuickExit;
}

// Segment flags of a module (ModuleLoad).
inline constexpr uint8_t kSegRead = 4, kSegWrite = 2, kSegExec = 1;

// Limits a reader enforces on decoded values, so a hostile file cannot force unbounded work.
inline constexpr uint32_t kMaxStackDefFrames = 4096;
inline constexpr uint32_t kMaxSegments = 256;

// ---------------------------------------------------------------------------------------
// [4] Decoded records. Strings and byte arrays are views into the decoder's block buffer,
//     valid only during the visitor call. `stream` is the block's stream (thread index).
// ---------------------------------------------------------------------------------------

// ProcessInfo (0x01), untimed, first record of stream 0:
//   varint pid, varint ppid, varint realtime_start_ns, varint monotonic_start_ns,
//   varint page_size, u8 mode, varint sample_interval, varint max_depth,
//   varint counter_interval_ns, bytes exe, bytes cwd, varint argc, argc x bytes arg,
//   bytes options ("name=value" pairs separated by '\n')
struct ProcessInfo {
  uint64_t pid = 0, ppid = 0;
  uint64_t realtime_start_ns = 0, monotonic_start_ns = 0;
  uint64_t page_size = 0;
  RecordingMode mode = RecordingMode::Exact;
  uint64_t sample_interval = 0;  // bytes; 0 in exact mode
  uint64_t max_depth = 0;
  uint64_t counter_interval_ns = 0;
  std::string_view exe, cwd, options;
  // argv: `argc` length-prefixed strings starting at `argv_data` (use ArgvIterator).
  uint64_t argc = 0;
  const uint8_t* argv_data = nullptr;
  const uint8_t* argv_end = nullptr;
};

// ModuleLoad (0x02): varint dt, varint module_id, varint load_bias, bytes path,
//   bytes build_id, varint nseg, nseg x (varint vaddr, varint memsz, u8 flags)
//   Segment vaddr is as in the ELF program header; runtime address = load_bias + vaddr.
struct Segment {
  uint64_t vaddr = 0, memsz = 0;
  uint8_t flags = 0;
};
struct ModuleLoad {
  uint64_t time = 0;
  uint64_t module_id = 0;
  uint64_t load_bias = 0;
  std::string_view path;
  std::string_view build_id;  // raw bytes (not hex)
  uint32_t nseg = 0;
  Segment segments[kMaxSegments];
};

// ModuleUnload (0x03): varint dt, varint module_id
struct ModuleUnload {
  uint64_t time = 0, module_id = 0;
};

// ThreadStart (0x04): varint dt, varint thread (index), varint os_tid, varint parent (index)
struct ThreadStart {
  uint64_t time = 0, thread = 0, os_tid = 0, parent = 0;
};
// ThreadName (0x05): varint dt, varint thread, bytes name
struct ThreadName {
  uint64_t time = 0, thread = 0;
  std::string_view name;
};
// ThreadExit (0x06): varint dt, varint thread
struct ThreadExit {
  uint64_t time = 0, thread = 0;
};

// StackDef (0x07), untimed: varint first_id, varint parent_id, varint count,
//   count x svarint (ip - previous ip; the first relative to 0).
// Defines `count` trie nodes: node first_id + i has parent (i == 0 ? parent_id : first_id + i - 1)
// and return address ip[i]. Frames go from the outermost caller towards the allocation site;
// a stack id names a node, and the stack is the path from the root (id 0, the empty stack).
struct StackDef {
  uint64_t first_id = 0, parent_id = 0;
  uint32_t count = 0;
  const uint64_t* ips = nullptr;  // decoded into the decoder's scratch array
};

// Counters (0x08): varint dt, varint rss_bytes, varint vm_bytes, varint heap_live_bytes,
//   varint heap_blocks   (heap_* as tracked by the recorder)
struct Counters {
  uint64_t time = 0, rss_bytes = 0, vm_bytes = 0, heap_live_bytes = 0, heap_blocks = 0;
};

// Marker (0x09): varint dt, bytes label       (memtide_mark)
// Since 2.1 a Marker may end with `varint sampling`: the recording switched to sampled at
// interval sampling - 1 bytes (formats/sampling.h), or to exact for 1, at the marker's time
// (memtide_sample()). Readers before 2.1 skip the field and show the marker's label.
struct Marker {
  uint64_t time = 0;
  std::string_view label;
  uint64_t sampling = 0;  // 0: a marker of the program's own
  bool switches_sampling() const { return sampling != 0; }
  uint64_t sampling_interval() const { return sampling - 1; }
};

// SampleWeight (0x0A), untimed: varint weight. Applies to the next Alloc of the same stream:
// that allocation stands for `weight` bytes (sampled mode). Absent: the weight is the size.
struct SampleWeight {
  uint64_t weight = 0;
};

// Watermark (0x0B), process stream: varint dt. Every record of any stream with a time before
// this one is in a block that precedes the next Watermark in the file.
struct Watermark {
  uint64_t time = 0;
};

// End (0x0C): varint dt, u8 reason, varint status, varint allocations, varint frees,
//   varint lost_events. Last record of a complete trace.
struct End {
  uint64_t time = 0;
  EndReason reason = EndReason::Exit;
  uint64_t status = 0;  // exit status, or signal number for EndReason::Signal
  uint64_t allocations = 0, frees = 0;
  uint64_t lost_events = 0;  // events the recorder could not record (e.g. re-entrant calls)
};

// Symbols (0x0D), untimed, appended by `memtide symbolize`: varint module_id, varint count,
//   count x (varint offset, bytes function, bytes file, varint line, varint inline_depth)
//   (the record's layout is documented in docs/FORMAT.md; readers that do not symbolise skip it)
struct Symbols {
  uint64_t module_id = 0;
  uint64_t count = 0;
  const uint8_t* data = nullptr;
  const uint8_t* end = nullptr;
};

// Scan (0x0E), untimed, stream 0: the reachability scan made at exit (`--leak-scan`). A u8
// op, then:
//   1 Region: varint index, u8 kind (ScanKind), varint start, varint end
//       a range of memory the scan read, [start, end)
//   2 Refs:   varint count, count x (varint dloc, svarint dvalue)
//       words that hold a value inside some writable anonymous mapping or the heap: the word's
//       address is the previous one + 8 * dloc, its value the previous value + dvalue (both
//       start at 0 in each record)
//   3 Done:   varint regions, varint words, varint refs, varint duration_ns
//       the scan is complete; a trace without it has no usable scan
enum class ScanOp : uint8_t { Region = 1, Refs = 2, Done = 3, Suppressions = 4 };
enum class ScanKind : uint8_t {
  Root = 1,     // always a root: module data, the scanning thread's stack above its stack
                // pointer, its static TLS
  Mapping = 2,  // another writable mapping: a root unless heap blocks live in it
  Heap = 3,     // the brk heap: never a root, only the live blocks in it count
};
struct Scan {
  ScanOp op = ScanOp::Region;
  ScanKind kind = ScanKind::Root;  // Region
  uint64_t index = 0, start = 0, end = 0;  // Region
  uint64_t count = 0;  // Refs: the number of pairs in [data, data_end)
  const uint8_t* data = nullptr;  // Refs: the pairs; Suppressions: the text
  const uint8_t* data_end = nullptr;
  uint64_t regions = 0, words = 0, refs = 0, duration_ns = 0;  // Done
};

// Alloc (0x40 + api): varint dt, svarint daddr, varint size, varint stack
struct Alloc {
  uint64_t time = 0;
  uint64_t addr = 0;
  uint64_t size = 0;
  uint64_t stack = 0;
  uint64_t weight = 0;  // from a preceding SampleWeight; 0 when exact
  Api api = Api::Malloc;
};

// Free (0x60 + api): varint dt, svarint daddr [, varint length for Munmap]
struct Free {
  uint64_t time = 0;
  uint64_t addr = 0;
  uint64_t length = 0;  // munmap length; 0 otherwise
  Api api = Api::Free;
};

// ---------------------------------------------------------------------------------------
// [5] Hot-path encoders. `p` must have room for kMaxAllocRecord / kMaxFreeRecord bytes.
// ---------------------------------------------------------------------------------------

inline constexpr std::size_t kMaxAllocRecord = 1 + 4 * wire::kMaxVarint;
inline constexpr std::size_t kMaxFreeRecord = 1 + 3 * wire::kMaxVarint;

inline uint8_t* encode_alloc(uint8_t* p, Api api, uint64_t dt, int64_t daddr, uint64_t size,
                             uint64_t stack) {
  *p++ = static_cast<uint8_t>(kTagAllocBase + static_cast<uint8_t>(api));
  p = wire::put_varint(p, dt);
  p = wire::put_svarint(p, daddr);
  p = wire::put_varint(p, size);
  return wire::put_varint(p, stack);
}

inline uint8_t* encode_free(uint8_t* p, Api api, uint64_t dt, int64_t daddr, uint64_t length) {
  *p++ = static_cast<uint8_t>(kTagFreeBase + static_cast<uint8_t>(api));
  p = wire::put_varint(p, dt);
  p = wire::put_svarint(p, daddr);
  if (api == Api::Munmap) p = wire::put_varint(p, length);
  return p;
}

// The writing side of a block's rings (AddrRings): the same rings, and which entry holds an
// address, found through two small tables indexed by two hashes of it (a byte each: the slot of
// the latest push whose address had that hash). A table entry is only a guess, checked against
// the ring's slot; the slots are cleared at each block, so a slot that holds the address was
// pushed in this block, k pushes ago, k < kRingSize. An entry that another address took over
// costs a full form, never a wrong one. 1.5 KiB, kept by the recorder in each stream, its block
// being the stream's chunk (start_block at each chunk).
struct RecentIndex {
  static constexpr unsigned kSlots = 256;
  uint64_t slot[2][kRingSize] = {};
  uint32_t pos[2] = {};
  uint8_t latest[2][2 * kSlots] = {};  // per ring: by the first hash, then by the second

  void start_block() { std::memset(slot, 0, sizeof slot); }
  // k of `addr` in ring `r` of this block (the address pushed k pushes before the latest one),
  // or -1 when the tables do not lead to it.
  [[gnu::always_inline]] int find(unsigned r, uint64_t addr) const {
    const uint64_t h = mix(addr);
    const int k = holds(r, latest[r][h >> 56], addr);
    return k >= 0 ? k : holds(r, latest[r][kSlots + ((h >> 48) & 0xff)], addr);
  }
  [[gnu::always_inline]] void push(unsigned r, uint64_t addr) {
    const uint64_t h = mix(addr);
    const auto s = static_cast<uint8_t>(pos[r]++ & (kRingSize - 1));
    latest[r][h >> 56] = s;
    latest[r][kSlots + ((h >> 48) & 0xff)] = s;
    slot[r][s] = addr;
  }

 private:
  static uint64_t mix(uint64_t a) { return a * 0x9E3779B97F4A7C15ull; }
  [[gnu::always_inline]] int holds(unsigned r, uint8_t s, uint64_t addr) const {
    return slot[r][s] == addr ? static_cast<int>((pos[r] - 1 - s) & (kRingSize - 1)) : -1;
  }
};

// The short-form tag base of an API by (alloc, api), as recent_tag_base.
inline constexpr auto kRecentTagBase = [] {
  std::array<std::array<uint8_t, 32>, 2> t{};
  for (unsigned i = 0; i < 32; ++i) {
    t[0][i] = recent_tag_base(false, static_cast<Api>(i));
    t[1][i] = recent_tag_base(true, static_cast<Api>(i));
  }
  return t;
}();

// Alloc and Free records in their short form when the block's ring holds the address (an
// Alloc of malloc or new in ring 1, of recent frees; a Free of free or delete in ring 0), full
// otherwise; either way the address is pushed, as a decoder does. `last_addr` is the addr
// register before the record.
[[gnu::always_inline]] inline uint8_t* encode_alloc(uint8_t* p, RecentIndex& recent, Api api, uint64_t dt,
                                                   uint64_t addr, uint64_t last_addr, uint64_t size, uint64_t stack) {
  const uint8_t base = kRecentTagBase[1][static_cast<uint8_t>(api) & 31];
  const int k = base ? recent.find(1, addr) : -1;
  recent.push(0, addr);
  if (k >= 0) {
    *p++ = static_cast<uint8_t>(base + k);
    p = wire::put_varint(p, dt);
  } else {
    *p++ = static_cast<uint8_t>(kTagAllocBase + static_cast<uint8_t>(api));
    p = wire::put_varint(p, dt);
    p = wire::put_svarint(p, static_cast<int64_t>(addr - last_addr));
  }
  p = wire::put_varint(p, size);
  return wire::put_varint(p, stack);
}

[[gnu::always_inline]] inline uint8_t* encode_free(uint8_t* p, RecentIndex& recent, Api api, uint64_t dt,
                                                  uint64_t addr, uint64_t last_addr, uint64_t length) {
  const uint8_t base = kRecentTagBase[0][static_cast<uint8_t>(api) & 31];
  const int k = base ? recent.find(0, addr) : -1;
  recent.push(1, addr);
  if (k >= 0) {
    *p++ = static_cast<uint8_t>(base + k);
    return wire::put_varint(p, dt);
  }
  return encode_free(p, api, dt, static_cast<int64_t>(addr - last_addr), length);
}

}  // namespace memtide::fmt
