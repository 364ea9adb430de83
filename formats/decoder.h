// Record decoding: a block's raw payload into one visitor call per record, in file order.
//
// Sections:
//   [1] Visitors: RecordVisitor (virtual) and NullVisitor (base for template visitors)
//   [2] Per-stream registers, scratch space, errors
//   [3] decode_record / decode_block (templates: the visitor's calls are inlined)
//   [4] RecordDecoder and read_records (whole-file loop)
//   [5] Iterators over ProcessInfo argv and Symbols entries
//
// Two ways to consume records:
//   - derive from RecordVisitor and override what you need; one virtual call per record;
//   - or write a struct deriving from NullVisitor with same-named non-virtual methods and pass
//     it to the templates: alloc/free decode then inlines into your code (the fast path).
// Every length, count and varint is checked against the record and the block; a record that
// does not fit is a Corrupt result naming the block offset and the payload position.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "formats/reader.h"
#include "formats/records.h"
#include "formats/wire.h"

namespace memtide::fmt {

// ---------------------------------------------------------------------------------------
// [1] Visitors. `stream` is the block's stream (thread index; 0 is the process stream).
// ---------------------------------------------------------------------------------------

class RecordVisitor {
 public:
  virtual ~RecordVisitor() = default;
  virtual void on_block(const Block&) {}  // before the block's records (not in merged order)
  virtual void on_process_info(uint32_t, const ProcessInfo&) {}
  virtual void on_module_load(uint32_t, const ModuleLoad&) {}
  virtual void on_module_unload(uint32_t, const ModuleUnload&) {}
  virtual void on_thread_start(uint32_t, const ThreadStart&) {}
  virtual void on_thread_name(uint32_t, const ThreadName&) {}
  virtual void on_thread_exit(uint32_t, const ThreadExit&) {}
  virtual void on_stack_def(uint32_t, const StackDef&) {}
  virtual void on_counters(uint32_t, const Counters&) {}
  virtual void on_marker(uint32_t, const Marker&) {}
  virtual void on_sample_weight(uint32_t, const SampleWeight&) {}
  virtual void on_watermark(uint32_t, const Watermark&) {}
  virtual void on_end(uint32_t, const End&) {}
  virtual void on_symbols(uint32_t, const Symbols&) {}
  virtual void on_scan(uint32_t, const Scan&) {}
  virtual void on_alloc(uint32_t, const Alloc&) {}
  virtual void on_free(uint32_t, const Free&) {}
  // A length-prefixed record whose tag this reader does not know; it has been skipped.
  virtual void on_unknown(uint32_t, uint8_t /*tag*/, std::span<const uint8_t> /*payload*/) {}
};

// Base for template visitors: every method present and empty, none virtual. Hide the ones
// you need with methods of the same name and signature.
struct NullVisitor {
  void on_block(const Block&) {}
  void on_process_info(uint32_t, const ProcessInfo&) {}
  void on_module_load(uint32_t, const ModuleLoad&) {}
  void on_module_unload(uint32_t, const ModuleUnload&) {}
  void on_thread_start(uint32_t, const ThreadStart&) {}
  void on_thread_name(uint32_t, const ThreadName&) {}
  void on_thread_exit(uint32_t, const ThreadExit&) {}
  void on_stack_def(uint32_t, const StackDef&) {}
  void on_counters(uint32_t, const Counters&) {}
  void on_marker(uint32_t, const Marker&) {}
  void on_sample_weight(uint32_t, const SampleWeight&) {}
  void on_watermark(uint32_t, const Watermark&) {}
  void on_end(uint32_t, const End&) {}
  void on_symbols(uint32_t, const Symbols&) {}
  void on_scan(uint32_t, const Scan&) {}
  void on_alloc(uint32_t, const Alloc&) {}
  void on_free(uint32_t, const Free&) {}
  void on_unknown(uint32_t, uint8_t, std::span<const uint8_t>) {}
};

// ---------------------------------------------------------------------------------------
// [2] Registers, scratch, errors
// ---------------------------------------------------------------------------------------

// A stream's decoding state; reset from the block header at each block.
struct StreamRegs {
  uint64_t time = 0;
  uint64_t addr = 0;
  uint64_t weight = 0;  // pending SampleWeight for the next Alloc (0: none)
  AddrRings ring;       // the block's recent addresses (short Alloc/Free forms)
};

// Where variable-sized records are decoded to; big, so allocate it once (RecordDecoder does).
struct DecodeScratch {
  ModuleLoad module;
  uint64_t ips[kMaxStackDefFrames];
};

enum class DecodeError : uint8_t {
  None,
  AllocFree,       // an Alloc/Free runs past the block end or has an invalid varint
  Length,          // a length prefix that is invalid or runs past the block end
  Fields,          // the fields run past the record's length (or an invalid varint)
  TooManyFrames,   // StackDef count > kMaxStackDefFrames
  TooManySegments, // ModuleLoad nseg > kMaxSegments
};

// "stack record (tag 0x07): 5000 frames exceed the limit of 4096" style text.
std::string describe(DecodeError e, uint8_t tag);
// Name of the record a tag stands for ("alloc", "stack", ... or "unknown").
std::string_view tag_name(uint8_t tag);
// RecordType of a known tag; RecordType::Count for an unknown one.
RecordType record_type_of_tag(uint8_t tag);

// ---------------------------------------------------------------------------------------
// [3] Decoding
// ---------------------------------------------------------------------------------------

namespace detail {

// LEB128 without bounds checks: the caller guarantees kMaxVarint readable bytes at p.
// Varints of up to 8 bytes (56 bits: every realistic dt, size, stack id and address delta)
// decode without a data-dependent branch, from one 8-byte load: the first byte with its top
// bit clear ends the varint, and the 7-bit groups below it are squeezed together in three
// mask-and-shift steps. Longer ones take the byte loop.
__attribute__((always_inline)) inline bool varint_fast(const uint8_t*& p, uint64_t& out) {
  const uint64_t w = wire::load_le<uint64_t>(p);
  const uint64_t stops = ~w & 0x8080808080808080ull;
  if (stops != 0) [[likely]] {
    const uint64_t keep = stops ^ (stops - 1);  // the bytes up to and including the last one
    uint64_t x = w & keep & 0x7f7f7f7f7f7f7f7full;
    x = ((x & 0x7f007f007f007f00ull) >> 1) | (x & 0x007f007f007f007full);
    x = ((x & 0x3fff00003fff0000ull) >> 2) | (x & 0x00003fff00003fffull);
    x = ((x & 0x0fffffff00000000ull) >> 4) | (x & 0x000000000fffffffull);
    out = x;
    p += (static_cast<unsigned>(__builtin_ctzll(stops)) + 1) / 8;
    return true;
  }
  uint64_t v = 0;
  for (unsigned i = 0; i < wire::kMaxVarint; ++i) {
    const uint64_t b = p[i];
    v |= (b & 0x7f) << (7 * i);
    if (b < 0x80) {
      if (i == wire::kMaxVarint - 1 && b > 1) return false;  // bits past 64
      out = v;
      p += i + 1;
      return true;
    }
  }
  return false;
}

// The length-prefixed records (everything but Alloc/Free); kept out of the inlined path.
template <class V>
[[gnu::noinline]] DecodeError decode_prefixed(const uint8_t*& p, const uint8_t* end, StreamRegs& r, uint32_t stream,
                                              DecodeScratch& s, V& v) {
  const uint8_t tag = *p;
  wire::Cursor outer(p + 1, end);
  uint64_t len;
  if (!outer.get_varint(len) || len > outer.remaining()) return DecodeError::Length;
  const uint8_t* body = outer.pos();
  const uint8_t* body_end = body + len;
  wire::Cursor c(body, body_end);
  auto str = [&c](std::string_view& out) {
    const uint8_t* d;
    std::size_t n;
    if (!c.get_bytes(d, n)) return false;
    out = {reinterpret_cast<const char*>(d), n};
    return true;
  };
  auto timed = [&c, &r](uint64_t& t) {
    uint64_t dt;
    if (!c.get_varint(dt)) return false;
    r.time += dt;
    t = r.time;
    return true;
  };

  switch (tag) {
    case tag_of(RecordType::ProcessInfo): {
      ProcessInfo x;
      uint8_t mode;
      if (!(c.get_varint(x.pid) && c.get_varint(x.ppid) && c.get_varint(x.realtime_start_ns) &&
            c.get_varint(x.monotonic_start_ns) && c.get_varint(x.page_size) && c.get_u8(mode) &&
            c.get_varint(x.sample_interval) && c.get_varint(x.max_depth) && c.get_varint(x.counter_interval_ns) &&
            str(x.exe) && str(x.cwd) && c.get_varint(x.argc)))
        return DecodeError::Fields;
      x.mode = static_cast<RecordingMode>(mode);
      if (x.argc > c.remaining()) return DecodeError::Fields;  // each argument takes >= 1 byte
      x.argv_data = c.pos();
      for (uint64_t i = 0; i < x.argc; ++i) {
        const uint8_t* d;
        std::size_t n;
        if (!c.get_bytes(d, n)) return DecodeError::Fields;
      }
      x.argv_end = c.pos();
      if (!str(x.options)) return DecodeError::Fields;
      v.on_process_info(stream, x);
      break;
    }
    case tag_of(RecordType::ModuleLoad): {
      ModuleLoad& x = s.module;
      uint64_t nseg;
      if (!(timed(x.time) && c.get_varint(x.module_id) && c.get_varint(x.load_bias) && str(x.path) &&
            str(x.build_id) && c.get_varint(nseg)))
        return DecodeError::Fields;
      if (nseg > kMaxSegments) return DecodeError::TooManySegments;
      x.nseg = static_cast<uint32_t>(nseg);
      for (uint32_t i = 0; i < x.nseg; ++i) {
        Segment& g = x.segments[i];
        if (!(c.get_varint(g.vaddr) && c.get_varint(g.memsz) && c.get_u8(g.flags))) return DecodeError::Fields;
      }
      v.on_module_load(stream, x);
      break;
    }
    case tag_of(RecordType::ModuleUnload): {
      ModuleUnload x;
      if (!(timed(x.time) && c.get_varint(x.module_id))) return DecodeError::Fields;
      v.on_module_unload(stream, x);
      break;
    }
    case tag_of(RecordType::ThreadStart): {
      ThreadStart x;
      if (!(timed(x.time) && c.get_varint(x.thread) && c.get_varint(x.os_tid) && c.get_varint(x.parent)))
        return DecodeError::Fields;
      v.on_thread_start(stream, x);
      break;
    }
    case tag_of(RecordType::ThreadName): {
      ThreadName x;
      if (!(timed(x.time) && c.get_varint(x.thread) && str(x.name))) return DecodeError::Fields;
      v.on_thread_name(stream, x);
      break;
    }
    case tag_of(RecordType::ThreadExit): {
      ThreadExit x;
      if (!(timed(x.time) && c.get_varint(x.thread))) return DecodeError::Fields;
      v.on_thread_exit(stream, x);
      break;
    }
    case tag_of(RecordType::StackDef): {
      StackDef x;
      uint64_t count;
      if (!(c.get_varint(x.first_id) && c.get_varint(x.parent_id) && c.get_varint(count))) return DecodeError::Fields;
      if (count > kMaxStackDefFrames) return DecodeError::TooManyFrames;
      x.count = static_cast<uint32_t>(count);
      uint64_t ip = 0;
      for (uint32_t i = 0; i < x.count; ++i) {
        int64_t d;
        if (!c.get_svarint(d)) return DecodeError::Fields;
        ip += static_cast<uint64_t>(d);
        s.ips[i] = ip;
      }
      x.ips = s.ips;
      v.on_stack_def(stream, x);
      break;
    }
    case tag_of(RecordType::Counters): {
      Counters x;
      if (!(timed(x.time) && c.get_varint(x.rss_bytes) && c.get_varint(x.vm_bytes) &&
            c.get_varint(x.heap_live_bytes) && c.get_varint(x.heap_blocks)))
        return DecodeError::Fields;
      v.on_counters(stream, x);
      break;
    }
    case tag_of(RecordType::Marker): {
      Marker x;
      if (!(timed(x.time) && str(x.label))) return DecodeError::Fields;
      if (c.remaining() && !c.get_varint(x.sampling)) return DecodeError::Fields;
      v.on_marker(stream, x);
      break;
    }
    case tag_of(RecordType::SampleWeight): {
      SampleWeight x;
      if (!c.get_varint(x.weight)) return DecodeError::Fields;
      r.weight = x.weight;
      v.on_sample_weight(stream, x);
      break;
    }
    case tag_of(RecordType::Watermark): {
      Watermark x;
      if (!timed(x.time)) return DecodeError::Fields;
      v.on_watermark(stream, x);
      break;
    }
    case tag_of(RecordType::End): {
      End x;
      uint8_t reason;
      if (!(timed(x.time) && c.get_u8(reason) && c.get_varint(x.status) && c.get_varint(x.allocations) &&
            c.get_varint(x.frees) && c.get_varint(x.lost_events)))
        return DecodeError::Fields;
      x.reason = static_cast<EndReason>(reason);
      v.on_end(stream, x);
      break;
    }
    case tag_of(RecordType::Symbols): {
      Symbols x;
      if (!(c.get_varint(x.module_id) && c.get_varint(x.count))) return DecodeError::Fields;
      if (x.count > c.remaining() / 5) return DecodeError::Fields;  // an entry takes >= 5 bytes
      x.data = c.pos();
      for (uint64_t i = 0; i < x.count; ++i) {
        uint64_t u;
        const uint8_t* d;
        std::size_t n;
        if (!(c.get_varint(u) && c.get_bytes(d, n) && c.get_bytes(d, n) && c.get_varint(u) && c.get_varint(u)))
          return DecodeError::Fields;
      }
      x.end = c.pos();
      v.on_symbols(stream, x);
      break;
    }
    case tag_of(RecordType::Scan): {
      Scan x;
      uint8_t op;
      if (!c.get_u8(op)) return DecodeError::Fields;
      x.op = static_cast<ScanOp>(op);
      if (x.op == ScanOp::Region) {
        uint8_t kind;
        if (!(c.get_varint(x.index) && c.get_u8(kind) && c.get_varint(x.start) && c.get_varint(x.end)))
          return DecodeError::Fields;
        x.kind = static_cast<ScanKind>(kind);
      } else if (x.op == ScanOp::Refs) {
        if (!c.get_varint(x.count)) return DecodeError::Fields;
        if (x.count > c.remaining() / 2) return DecodeError::Fields;  // a pair takes >= 2 bytes
        x.data = c.pos();
        for (uint64_t i = 0; i < x.count; ++i) {
          uint64_t u;
          int64_t d;
          if (!(c.get_varint(u) && c.get_svarint(d))) return DecodeError::Fields;
        }
        x.data_end = c.pos();
      } else if (x.op == ScanOp::Done) {
        if (!(c.get_varint(x.regions) && c.get_varint(x.words) && c.get_varint(x.refs) && c.get_varint(x.duration_ns)))
          return DecodeError::Fields;
      } else if (x.op == ScanOp::Suppressions) {
        std::size_t n;
        if (!c.get_bytes(x.data, n)) return DecodeError::Fields;
        x.data_end = x.data + n;
      }  // (another op: a newer version's; passed on, readers ignore it)
      v.on_scan(stream, x);
      break;
    }
    default:
      v.on_unknown(stream, tag, std::span<const uint8_t>(body, body_end));
      break;
  }
  // Bytes after the known fields belong to a newer minor version: skipped.
  p = body_end;
  return DecodeError::None;
}

}  // namespace detail

// Decodes the record at `p` (p < end), advances `p` past it and calls `v`. On an error `p`
// is unchanged. Alloc/Free are decoded inline (about 4 varints, no calls but the visitor's).
template <class V>
[[gnu::always_inline]] inline DecodeError decode_record(const uint8_t*& p, const uint8_t* end, StreamRegs& r, uint32_t stream,
                                 DecodeScratch& s, V& v) {
  const uint8_t tag = *p;
  if (tag >= kTagAllocBase) [[likely]] {
    // Alloc and Free, full (0x40..0x7F: the address as a delta) or short (0x80..0xFF: the
    // address from the block's rings).
    const uint8_t* q = p + 1;
    const bool recent = tag >= kTagAllocRecent;
    const bool is_alloc = recent ? tag < kTagFreeRecent : tag < kTagFreeBase;
    const auto api = recent ? (is_alloc ? recent_alloc_api(tag) : recent_free_api(tag)) : static_cast<Api>(tag & 31);
    uint64_t dt, za = 0, a = 0, b = 0;
    if (static_cast<std::size_t>(end - q) >= 4 * wire::kMaxVarint) [[likely]] {
      if (!detail::varint_fast(q, dt) || (!recent && !detail::varint_fast(q, za))) return DecodeError::AllocFree;
      if (is_alloc) {
        if (!detail::varint_fast(q, a) || !detail::varint_fast(q, b)) return DecodeError::AllocFree;
      } else if (api == Api::Munmap) {
        if (!detail::varint_fast(q, a)) return DecodeError::AllocFree;
      }
    } else {
      wire::Cursor c(q, end);
      if (!c.get_varint(dt) || (!recent && !c.get_varint(za))) return DecodeError::AllocFree;
      if (is_alloc) {
        if (!c.get_varint(a) || !c.get_varint(b)) return DecodeError::AllocFree;
      } else if (api == Api::Munmap) {
        if (!c.get_varint(a)) return DecodeError::AllocFree;
      }
      q = c.pos();
    }
    r.time += dt;
    // A short Alloc takes a recently freed address (ring 1), a short Free a recently allocated
    // one (ring 0).
    r.addr = recent ? r.ring.get(is_alloc ? 1 : 0, tag & (kRingSize - 1)) : r.addr + static_cast<uint64_t>(wire::unzigzag(za));
    r.ring.push(is_alloc ? 0 : 1, r.addr);
    p = q;
    if (is_alloc) {
      Alloc x;
      x.time = r.time;
      x.addr = r.addr;
      x.size = a;
      x.stack = b;
      x.weight = r.weight;
      x.api = api;
      r.weight = 0;
      v.on_alloc(stream, x);
    } else {
      Free x;
      x.time = r.time;
      x.addr = r.addr;
      x.length = a;
      x.api = api;
      v.on_free(stream, x);
    }
    return DecodeError::None;
  }
  return detail::decode_prefixed(p, end, r, stream, s, v);
}

// Decodes every record of `block` in order (on_block first). Ok, or Corrupt at the first bad
// record; the records before it have been delivered.
template <class V>
ReadResult decode_block(const Block& block, DecodeScratch& s, V& v) {
  v.on_block(block);
  StreamRegs r;
  r.time = block.header.base_time;
  r.addr = block.header.base_addr;
  const uint32_t stream = block.header.stream;
  const uint8_t* const begin = block.payload.data();
  const uint8_t* const end = begin + block.payload.size();
  const uint8_t* p = begin;
  while (p < end) {
    const uint8_t* rec = p;
    const DecodeError e = decode_record(p, end, r, stream, s, v);
    if (e != DecodeError::None) [[unlikely]]
      return ReadResult::corrupt(block.offset, describe(e, *rec), static_cast<uint64_t>(rec - begin));
  }
  return {};
}

extern template ReadResult decode_block<RecordVisitor>(const Block&, DecodeScratch&, RecordVisitor&);

// ---------------------------------------------------------------------------------------
// [4] RecordDecoder: owns the scratch space.
// ---------------------------------------------------------------------------------------

class RecordDecoder {
 public:
  RecordDecoder() : scratch_(std::make_unique<DecodeScratch>()) {}
  template <class V>
  ReadResult decode(const Block& block, V& v) {
    return decode_block(block, *scratch_, v);
  }
  DecodeScratch& scratch() { return *scratch_; }

 private:
  std::unique_ptr<DecodeScratch> scratch_;
};

// Reads and decodes every remaining block of `reader` in file order. Returns EndOfFile at a
// clean end, else the result that stopped it (Truncated, Corrupt, IoError). After a Corrupt
// record the reader is already past that block, so calling again continues with the next one.
template <class V>
ReadResult read_records(FileReader& reader, RecordDecoder& decoder, V& v) {
  Block b;
  for (;;) {
    ReadResult r = reader.next(b);
    if (!r.ok()) return r;
    r = decoder.decode(b, v);
    if (!r.ok()) return r;
  }
}

// ---------------------------------------------------------------------------------------
// [5] Iterators (the decoder has already checked the bytes they walk)
// ---------------------------------------------------------------------------------------

class ArgvIterator {
 public:
  explicit ArgvIterator(const ProcessInfo& p) : c_(p.argv_data, p.argv_end), left_(p.argc) {}
  bool next(std::string_view& arg) {
    const uint8_t* d;
    std::size_t n;
    if (left_ == 0 || !c_.get_bytes(d, n)) return false;
    --left_;
    arg = {reinterpret_cast<const char*>(d), n};
    return true;
  }

 private:
  wire::Cursor c_;
  uint64_t left_;
};

// The `name=value` lines of ProcessInfo's options, in order (empty lines skipped; a line
// without '=' has an empty value).
class OptionIterator {
 public:
  explicit OptionIterator(const ProcessInfo& p) : rest_(p.options) {}
  bool next(std::string_view& name, std::string_view& value) {
    while (!rest_.empty()) {
      const std::size_t nl = rest_.find('\n');
      const std::string_view line = rest_.substr(0, nl);
      rest_ = nl == std::string_view::npos ? std::string_view() : rest_.substr(nl + 1);
      if (line.empty()) continue;
      const std::size_t eq = line.find('=');
      name = line.substr(0, eq);
      value = eq == std::string_view::npos ? std::string_view() : line.substr(eq + 1);
      return true;
    }
    return false;
  }

 private:
  std::string_view rest_;
};

// The (address, value) pairs of a Scan Refs record, in order.
class ScanRefIterator {
 public:
  explicit ScanRefIterator(const Scan& s) : c_(s.data, s.data_end), left_(s.count) {}
  bool next(uint64_t& loc, uint64_t& value) {
    uint64_t dloc;
    int64_t dval;
    if (left_ == 0 || !(c_.get_varint(dloc) && c_.get_svarint(dval))) return false;
    --left_;
    loc_ += dloc * 8;
    value_ += static_cast<uint64_t>(dval);
    loc = loc_;
    value = value_;
    return true;
  }

 private:
  wire::Cursor c_;
  uint64_t left_;
  uint64_t loc_ = 0, value_ = 0;
};

// One entry of a Symbols record: the code at module offset `offset` belongs to `function`
// (at `file`:`line`); inline_depth > 0 marks frames inlined into the preceding entry.
struct SymbolEntry {
  uint64_t offset = 0;
  std::string_view function, file;
  uint64_t line = 0;
  uint64_t inline_depth = 0;
};

class SymbolIterator {
 public:
  explicit SymbolIterator(const Symbols& s) : c_(s.data, s.end), left_(s.count) {}
  bool next(SymbolEntry& e) {
    const uint8_t *f, *l;
    std::size_t fn, ln;
    if (left_ == 0 || !(c_.get_varint(e.offset) && c_.get_bytes(f, fn) && c_.get_bytes(l, ln) &&
                        c_.get_varint(e.line) && c_.get_varint(e.inline_depth)))
      return false;
    --left_;
    e.function = {reinterpret_cast<const char*>(f), fn};
    e.file = {reinterpret_cast<const char*>(l), ln};
    return true;
  }

 private:
  wire::Cursor c_;
  uint64_t left_;
};

}  // namespace memtide::fmt
