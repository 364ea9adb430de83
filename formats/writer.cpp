#include "formats/writer.h"

#include "formats/record_builders.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace memtide::fmt {

namespace {

// Upper bound of a length-prefixed record: tag + length slot + fields.
constexpr std::size_t record_bound(std::size_t varints, std::size_t string_bytes = 0, std::size_t strings = 0) {
  return 1 + kLengthSlot + varints * wire::kMaxVarint + string_bytes + strings * wire::kMaxVarint;
}

}  // namespace

TraceWriter::~TraceWriter() {
  try {
    close();
  } catch (...) {
    // A destructor cannot report; call close() explicitly to see errors.
  }
}

void TraceWriter::open(const std::string& path, const Options& options) {
  close();
  opt_ = options;
  path_ = path;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "cannot create " + path);
  if (opt_.lock && ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw std::system_error(err, std::generic_category(), "cannot lock " + path);
  }
  uint8_t h[kFileHeaderSize];
  encode_file_header(h, opt_.file_flags | kFileFlagBlockHints);
  write_out(h, sizeof h);
}

void TraceWriter::open_append(const std::string& path, const Options& options) {
  close();
  opt_ = options;
  path_ = path;
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "cannot open " + path);
  if (opt_.lock && ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw std::system_error(err, std::generic_category(), "cannot lock " + path);
  }
}

void TraceWriter::open_memory(std::vector<uint8_t>& out, const Options& options) {
  close();
  opt_ = options;
  memory_ = &out;
  uint8_t h[kFileHeaderSize];
  encode_file_header(h, opt_.file_flags | kFileFlagBlockHints);
  write_out(h, sizeof h);
}

void TraceWriter::close() {
  if (fd_ < 0 && !memory_) return;
  flush_all();
  if (fd_ >= 0 && ::close(fd_) != 0) {
    fd_ = -1;
    throw std::system_error(errno, std::generic_category(), "cannot close " + path_);
  }
  fd_ = -1;
  memory_ = nullptr;
  streams_.clear();
  order_.clear();
}

void TraceWriter::abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  memory_ = nullptr;
  streams_.clear();
  order_.clear();
}

void TraceWriter::check_open() const {
  if (fd_ < 0 && !memory_) throw std::logic_error("TraceWriter: not open");
}

void TraceWriter::write_out(const uint8_t* data, std::size_t n) {
  if (memory_) {
    memory_->insert(memory_->end(), data, data + n);
  } else {
    for (std::size_t done = 0; done < n;) {
      const ssize_t w = ::write(fd_, data + done, n - done);
      if (w < 0) {
        if (errno == EINTR) continue;
        throw std::system_error(errno, std::generic_category(), "cannot write " + path_);
      }
      done += static_cast<std::size_t>(w);
    }
  }
  written_ += n;
}

// ---------------------------------------------------------------------------------------
// Pending blocks
// ---------------------------------------------------------------------------------------

TraceWriter::Pending& TraceWriter::pending(uint32_t stream) {
  check_open();
  const auto [it, inserted] = streams_.try_emplace(stream);
  if (inserted) order_.push_back(stream);
  return it->second;
}

uint8_t* TraceWriter::reserve(uint32_t stream, Pending& p, std::size_t max_bytes) {
  if (max_bytes > kMaxBlockPayload) throw std::invalid_argument("TraceWriter: record larger than a block");
  if (!p.raw.empty() && p.raw.size() + max_bytes > kMaxBlockPayload) flush(stream);
  if (p.raw.empty()) {
    p.base_time = p.time;
    p.base_addr = p.addr;
  }
  reserved_at_ = p.raw.size();
  p.raw.resize(reserved_at_ + max_bytes);
  return p.raw.data() + reserved_at_;
}

void TraceWriter::commit(uint32_t stream, Pending& p, std::size_t used) {
  p.raw.resize(reserved_at_ + used);
  if (p.raw.size() >= opt_.block_bytes) flush(stream);
}

void TraceWriter::build(uint32_t stream, Pending& p, std::size_t n, std::size_t reserved) {
  if (n == 0 || n > reserved) throw std::logic_error("TraceWriter: record bound too small");
  commit(stream, p, n);
}

uint64_t TraceWriter::delta_time(uint32_t stream, Pending& p, uint64_t time) {
  if (time < p.time)
    throw std::invalid_argument("TraceWriter: time goes backwards in stream " + std::to_string(stream));
  const uint64_t dt = time - p.time;
  p.time = time;
  return dt;
}

void TraceWriter::flush(uint32_t stream) {
  check_open();
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.raw.empty()) return;
  Pending& p = it->second;
  BlockHeader h;
  h.stream = stream;
  h.base_time = p.base_time;
  h.base_addr = p.base_addr;
  h.flags = p.flags;
  p.flags = 0;
  block_buf_.resize(block_bound(p.raw.size()));
  const std::size_t n = encode_block(h, p.raw.data(), p.raw.size(), block_buf_.data(), block_buf_.size(), opt_.lz4_level);
  if (n == 0) throw std::logic_error("TraceWriter: block encoding failed");
  p.raw.clear();
  write_out(block_buf_.data(), n);
  ++blocks_;
}

void TraceWriter::flush_all() {
  for (uint32_t s : order_) flush(s);
}

uint64_t TraceWriter::time_register(uint32_t stream) const {
  auto it = streams_.find(stream);
  return it == streams_.end() ? 0 : it->second.time;
}

uint64_t TraceWriter::addr_register(uint32_t stream) const {
  auto it = streams_.find(stream);
  return it == streams_.end() ? 0 : it->second.addr;
}

// ---------------------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------------------

void TraceWriter::append(uint32_t s, const ProcessInfo& x, std::span<const std::string_view> argv) {
  std::size_t strings = x.exe.size() + x.cwd.size() + x.options.size();
  for (auto a : argv) strings += a.size();
  Pending& p = pending(s);
  const std::size_t max = record_bound(10, strings, 3 + argv.size()) + 1;
  build(s, p, encode_process_info(reserve(s, p, max), max, x, argv), max);
}

void TraceWriter::append(uint32_t s, const ModuleLoad& x) {
  const uint32_t nseg = std::min<uint32_t>(x.nseg, kMaxSegments);
  Pending& p = pending(s);
  const std::size_t max = record_bound(4 + 2 * nseg, x.path.size() + x.build_id.size() + nseg, 2);
  uint8_t* out = reserve(s, p, max);
  build(s, p, encode_module_load(out, max, x.time - delta_time(s, p, x.time), x), max);
}

void TraceWriter::append(uint32_t s, const ModuleUnload& x) {
  Pending& p = pending(s);
  const std::size_t max = record_bound(2);
  uint8_t* out = reserve(s, p, max);
  build(s, p, encode_module_unload(out, max, x.time - delta_time(s, p, x.time), x), max);
}

void TraceWriter::append(uint32_t s, const ThreadStart& x) {
  Pending& p = pending(s);
  const std::size_t max = record_bound(4);
  uint8_t* out = reserve(s, p, max);
  build(s, p, encode_thread_start(out, max, x.time - delta_time(s, p, x.time), x), max);
}

void TraceWriter::append(uint32_t s, const ThreadName& x) {
  Pending& p = pending(s);
  const std::size_t max = record_bound(2, x.name.size(), 1);
  uint8_t* out = reserve(s, p, max);
  build(s, p, encode_thread_name(out, max, x.time - delta_time(s, p, x.time), x), max);
}

void TraceWriter::append(uint32_t s, const ThreadExit& x) {
  Pending& p = pending(s);
  const std::size_t max = record_bound(2);
  uint8_t* out = reserve(s, p, max);
  build(s, p, encode_thread_exit(out, max, x.time - delta_time(s, p, x.time), x), max);
}

void TraceWriter::append(uint32_t s, const StackDef& x) {
  if (x.count > kMaxStackDefFrames) throw std::invalid_argument("TraceWriter: StackDef with too many frames");
  Pending& p = pending(s);
  const std::size_t max = record_bound(3 + x.count);
  uint8_t* out = reserve(s, p, max);
  p.flags |= kBlockFlagStacks;  // after reserve(), which may have flushed the block before
  build(s, p, encode_stack_def(out, max, x), max);
}

void TraceWriter::append(uint32_t s, const Counters& x) {
  Pending& p = pending(s);
  const std::size_t max = record_bound(5);
  uint8_t* out = reserve(s, p, max);
  build(s, p, encode_counters(out, max, x.time - delta_time(s, p, x.time), x), max);
}

void TraceWriter::append(uint32_t s, const Marker& x) {
  Pending& p = pending(s);
  const std::size_t max = record_bound(2, x.label.size(), 1);
  uint8_t* out = reserve(s, p, max);
  build(s, p, encode_marker(out, max, x.time - delta_time(s, p, x.time), x), max);
}

void TraceWriter::append(uint32_t s, const SampleWeight& x) {
  Pending& p = pending(s);
  const std::size_t max = record_bound(1);
  build(s, p, encode_sample_weight(reserve(s, p, max), max, x), max);
}

void TraceWriter::append(uint32_t s, const Watermark& x) {
  Pending& p = pending(s);
  const std::size_t max = record_bound(1);
  uint8_t* out = reserve(s, p, max);
  build(s, p, encode_watermark(out, max, x.time - delta_time(s, p, x.time), x), max);
}

void TraceWriter::append(uint32_t s, const End& x) {
  Pending& p = pending(s);
  const std::size_t max = record_bound(5) + 1;
  uint8_t* out = reserve(s, p, max);
  build(s, p, encode_end(out, max, x.time - delta_time(s, p, x.time), x), max);
}

void TraceWriter::append(uint32_t s, const Alloc& x) {
  if (x.weight != 0) append(s, SampleWeight{x.weight});
  Pending& p = pending(s);
  uint8_t* out = reserve(s, p, kMaxAllocRecord);
  const uint64_t dt = delta_time(s, p, x.time);
  const auto daddr = static_cast<int64_t>(x.addr - p.addr);
  p.addr = x.addr;
  commit(s, p, static_cast<std::size_t>(encode_alloc(out, x.api, dt, daddr, x.size, x.stack) - out));
}

void TraceWriter::append(uint32_t s, const Free& x) {
  Pending& p = pending(s);
  uint8_t* out = reserve(s, p, kMaxFreeRecord);
  const uint64_t dt = delta_time(s, p, x.time);
  const auto daddr = static_cast<int64_t>(x.addr - p.addr);
  p.addr = x.addr;
  commit(s, p, static_cast<std::size_t>(encode_free(out, x.api, dt, daddr, x.length) - out));
}

void TraceWriter::append_symbols(uint32_t s, uint64_t module_id, std::span<const SymbolEntry> entries) {
  std::size_t strings = 0;
  for (const auto& e : entries) strings += e.function.size() + e.file.size();
  Pending& p = pending(s);
  const std::size_t max = record_bound(2 + 3 * entries.size(), strings, 2 * entries.size());
  RecordBuilder b(reserve(s, p, max), max, RecordType::Symbols);
  b.varint(module_id).varint(entries.size());
  for (const auto& e : entries) b.varint(e.offset).bytes(e.function).bytes(e.file).varint(e.line).varint(e.inline_depth);
  p.flags |= kBlockFlagSymbols;
  build(s, p, b.finish(), max);
}

void TraceWriter::append_record(uint32_t s, std::span<const uint8_t> record) {
  Pending& p = pending(s);
  uint8_t* out = reserve(s, p, record.size());
  if (!record.empty()) std::memcpy(out, record.data(), record.size());
  commit(s, p, record.size());
}

void TraceWriter::append_unknown(uint32_t s, uint8_t tag, std::span<const uint8_t> payload) {
  Pending& p = pending(s);
  const std::size_t max = 1 + wire::kMaxVarint + payload.size();
  uint8_t* out = reserve(s, p, max);
  uint8_t* q = out;
  *q++ = tag;
  q = wire::put_bytes(q, payload.data(), payload.size());
  commit(s, p, static_cast<std::size_t>(q - out));
}

void TraceWriter::append_raw(uint32_t s, std::span<const uint8_t> bytes, uint64_t time_after, uint64_t addr_after) {
  Pending& p = pending(s);
  uint8_t* out = reserve(s, p, bytes.size());
  if (!bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());
  p.flags |= kBlockFlagStacks | kBlockFlagSymbols;  // the bytes may hold either
  p.time = time_after;
  p.addr = addr_after;
  commit(s, p, bytes.size());
}

void TraceWriter::watermark(uint64_t time) {
  flush_all();
  append(0, Watermark{time});
  flush(0);
}

void TraceWriter::end(const End& x) {
  append(0, x);
  flush_all();
}

}  // namespace memtide::fmt
