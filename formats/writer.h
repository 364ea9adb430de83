// TraceWriter: a convenient, allocating writer of whole trace files, for tests, tools and
// `memtide symbolize`. The recorder does not use it (it has its own allocation-free path
// over formats/encoder.h).
//
// It keeps one pending block per stream and the per-stream time/addr registers: append the
// decoded record structs of formats/records.h with their absolute times and addresses, and
// it writes the deltas. A block is flushed when it reaches Options::block_bytes, on flush(),
// watermark(), end() and close(). Errors (I/O, time going backwards in a stream, a record
// larger than a block may be) throw std::system_error / std::invalid_argument.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "formats/decoder.h"
#include "formats/encoder.h"
#include "formats/records.h"

namespace memtide::fmt {

class TraceWriter {
 public:
  struct Options {
    uint32_t file_flags = 0;             // kFileFlagSampled
    std::size_t block_bytes = 64 << 10;  // raw payload size that triggers a flush
    int lz4_level = 0;                   // 0: fast LZ4; 1..12: LZ4-HC
    bool lock = true;                    // hold flock(LOCK_EX) on the file until close()
  };

  TraceWriter() = default;
  ~TraceWriter();  // close(), swallowing errors
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Creates (truncates) `path` and writes the file header.
  // Blocks are flagged with the StackDef and Symbols records they hold, and the header says
  // so (kFileFlagBlockHints, added to options.file_flags).
  void open(const std::string& path, const Options& options);
  void open(const std::string& path) { open(path, Options{}); }
  // Appends the file to `out` instead of a file (no locking).
  void open_memory(std::vector<uint8_t>& out, const Options& options);
  void open_memory(std::vector<uint8_t>& out) { open_memory(out, Options{}); }
  // Appends blocks to an existing trace (`memtide symbolize`): no header is written; the file
  // must end at a block boundary (the caller checks). file_flags is ignored.
  void open_append(const std::string& path, const Options& options);

  // Records. Timed records use their `time` field (absolute); it must not go backwards
  // within a stream. Alloc with weight != 0 is preceded by a SampleWeight record. ProcessInfo
  // takes its arguments from `argv` (its argc / argv_data fields are not used).
  void append(uint32_t stream, const ProcessInfo& x, std::span<const std::string_view> argv);
  void append(uint32_t stream, const ModuleLoad& x);
  void append(uint32_t stream, const ModuleUnload& x);
  void append(uint32_t stream, const ThreadStart& x);
  void append(uint32_t stream, const ThreadName& x);
  void append(uint32_t stream, const ThreadExit& x);
  void append(uint32_t stream, const StackDef& x);
  void append(uint32_t stream, const Counters& x);
  void append(uint32_t stream, const Marker& x);
  void append(uint32_t stream, const SampleWeight& x);
  void append(uint32_t stream, const Watermark& x);
  void append(uint32_t stream, const End& x);
  void append(uint32_t stream, const Alloc& x);
  void append(uint32_t stream, const Free& x);
  void append_symbols(uint32_t stream, uint64_t module_id, std::span<const SymbolEntry> entries);
  // A length-prefixed record with any tag and payload (for extension tests).
  void append_unknown(uint32_t stream, uint8_t tag, std::span<const uint8_t> payload);
  // A whole untimed record, already encoded (e.g. by encode_scan_refs).
  void append_record(uint32_t stream, std::span<const uint8_t> record);
  // Already-encoded record bytes; the caller states the registers after them.
  void append_raw(uint32_t stream, std::span<const uint8_t> bytes, uint64_t time_after, uint64_t addr_after);

  // Flushes every stream's pending block, then writes a Watermark at `time` in stream 0 and
  // flushes that too: every record appended so far precedes the next watermark.
  void watermark(uint64_t time);
  // Appends End to stream 0 and flushes every stream.
  void end(const End& x);

  void flush(uint32_t stream);
  void flush_all();
  // Flushes and closes; further appends throw. Safe to call twice.
  void close();
  // Closes without writing what is still pending (after a write failed). Safe to call twice.
  void abandon();

  uint64_t time_register(uint32_t stream) const;
  uint64_t addr_register(uint32_t stream) const;
  uint64_t bytes_written() const { return written_; }
  uint64_t blocks_written() const { return blocks_; }

 private:
  struct Pending {
    std::vector<uint8_t> raw;
    uint64_t time = 0, addr = 0;            // registers after the last appended record
    uint64_t base_time = 0, base_addr = 0;  // registers when the pending block started
    uint16_t flags = 0;                     // kBlockFlagStacks / kBlockFlagSymbols of its records
  };
  Pending& pending(uint32_t stream);
  uint64_t delta_time(uint32_t stream, Pending& p, uint64_t time);
  // Room for a record of at most `max_bytes`; returns where to build it.
  uint8_t* reserve(uint32_t stream, Pending& p, std::size_t max_bytes);
  void commit(uint32_t stream, Pending& p, std::size_t used_from_reserve);
  void build(uint32_t stream, Pending& p, std::size_t n, std::size_t reserved);  // n: the encoded size
  void write_out(const uint8_t* data, std::size_t n);
  void check_open() const;

  Options opt_;
  int fd_ = -1;
  std::vector<uint8_t>* memory_ = nullptr;
  std::string path_;
  std::unordered_map<uint32_t, Pending> streams_;
  std::vector<uint32_t> order_;  // streams in first-use order, for deterministic flush_all
  std::vector<uint8_t> block_buf_;
  std::size_t reserved_at_ = 0;
  uint64_t written_ = 0;
  uint64_t blocks_ = 0;
};

}  // namespace memtide::fmt
