// libFuzzer target: bytes as a trace file through FileReader, the record decoder (file order)
// and the EventMerger (time order), plus header-only skipping and resynchronisation.
//
// Each input runs twice: as given, and with every checksum recomputed, so that mutations
// reach the decoder and merger instead of stopping at a checksum mismatch. Every string and
// array a visitor receives is read in full, so ASan sees any view pointing outside its buffer.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "formats/decoder.h"
#include "formats/encoder.h"
#include "formats/merge.h"
#include "formats/reader.h"

namespace {

using namespace memtide::fmt;

struct Toucher : NullVisitor {
  uint64_t sum = 0;
  void bytes(std::string_view s) {
    for (char c : s) sum += static_cast<uint8_t>(c);
  }
  void on_process_info(uint32_t, const ProcessInfo& x) {
    bytes(x.exe);
    bytes(x.cwd);
    bytes(x.options);
    ArgvIterator it(x);
    for (std::string_view a; it.next(a);) bytes(a);
  }
  void on_module_load(uint32_t, const ModuleLoad& x) {
    bytes(x.path);
    bytes(x.build_id);
    for (uint32_t i = 0; i < x.nseg; ++i) sum += x.segments[i].vaddr + x.segments[i].memsz;
  }
  void on_thread_name(uint32_t, const ThreadName& x) { bytes(x.name); }
  void on_stack_def(uint32_t, const StackDef& x) {
    for (uint32_t i = 0; i < x.count; ++i) sum += x.ips[i];
  }
  void on_marker(uint32_t, const Marker& x) { bytes(x.label); }
  void on_symbols(uint32_t, const Symbols& x) {
    SymbolIterator it(x);
    for (SymbolEntry e; it.next(e);) {
      bytes(e.function);
      bytes(e.file);
    }
  }
  void on_scan(uint32_t, const Scan& x) {
    sum += x.start ^ x.end ^ x.regions;
    ScanRefIterator it(x);
    for (uint64_t loc, value; it.next(loc, value);) sum += loc ^ value;
  }
  void on_alloc(uint32_t, const Alloc& x) { sum += x.time ^ x.addr ^ x.size ^ x.stack ^ x.weight; }
  void on_free(uint32_t, const Free& x) { sum += x.time ^ x.addr ^ x.length; }
  void on_unknown(uint32_t, uint8_t, std::span<const uint8_t> p) {
    for (uint8_t b : p) sum += b;
  }
};

void run(FileReader& r) {
  const uint64_t start = r.offset();
  // File order; after a corrupt block, resynchronise and go on (bounded: offsets only grow).
  {
    RecordDecoder dec;
    Toucher v;
    for (int rounds = 0; rounds < 64; ++rounds) {
      const ReadResult res = read_records(r, dec, v);
      if (res.status != ReadStatus::Corrupt || !r.resync()) break;
    }
  }
  // Time order, with a small buffer limit so that forced releases happen too.
  {
    r.seek(start);
    MergeOptions opt;
    opt.max_buffered_bytes = 1 << 16;
    EventMerger m(opt);
    Toucher v;
    read_merged(r, m, v);
  }
  // Headers only.
  {
    r.seek(start);
    BlockRef ref;
    while (r.skip(ref).ok()) {
    }
  }
}

void run_memory(const uint8_t* data, std::size_t size) {
  FileReader r;
  if (r.open_memory({data, size}).ok()) run(r);
}

// The same through a real file descriptor (pread path), for some inputs.
void run_fd(const uint8_t* data, std::size_t size) {
  const int fd = memfd_create("fuzz", MFD_CLOEXEC);
  if (fd < 0) return;
  if (size == 0 || write(fd, data, size) == static_cast<ssize_t>(size)) {
    FileReader r;
    if (r.open("/proc/self/fd/" + std::to_string(fd)).ok()) run(r);
  }
  close(fd);
}

// Recomputes the file header checksum and every block's checksums that can be found by
// walking the block chain. Returns false when there was nothing to fix.
bool fix_checksums(std::vector<uint8_t>& b) {
  if (b.size() < kFileHeaderSize || std::memcmp(b.data(), kFileMagic, sizeof kFileMagic) != 0) return false;
  memtide::wire::store_le<uint32_t>(b.data() + 28, checksum32(b.data(), 28));
  uint64_t off = memtide::wire::load_le<uint32_t>(b.data() + 12);
  while (off + kBlockHeaderSize <= b.size()) {
    uint8_t* h = b.data() + off;
    if (memtide::wire::load_le<uint32_t>(h) != kBlockMagic) break;
    const uint64_t stored = memtide::wire::load_le<uint32_t>(h + 8);
    const uint64_t avail = std::min<uint64_t>(stored, b.size() - off - kBlockHeaderSize);
    memtide::wire::store_le<uint32_t>(h + 20, checksum32(h + kBlockHeaderSize, avail));
    memtide::wire::store_le<uint32_t>(h + 44, checksum32(h, 44));
    off += kBlockHeaderSize + stored;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  run_memory(data, size);
  std::vector<uint8_t> fixed(data, data + size);
  if (fix_checksums(fixed)) run_memory(fixed.data(), fixed.size());
  if (size % 16 == 0) run_fd(fixed.data(), fixed.size());
  return 0;
}
