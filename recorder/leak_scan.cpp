// The reachability scan at exit (--leak-scan, MEMTIDE_LEAK_SCAN=1).
//
// LeakSanitizer tells a leak from memory that is still reachable by scanning, when the program
// ends, the places a program keeps pointers (globals, thread stacks, thread-local storage) and
// then the blocks those point to. The recorder cannot do that part alone: which blocks are
// live is known only to the analysis, which replays the trace. So at exit, after the
// program's destructors, the recorder reads its writable memory and writes into the trace
// every aligned word whose value falls inside an anonymous writable mapping or the brk heap
// (where heap blocks can be), with the word's address, as Scan records (formats/records.h):
//
//   - Region records say what was read and what it is: module data, the scanning thread's
//     stack above its stack pointer and its static TLS, and the stacks of the other threads
//     that recorded are roots (ScanKind::Root); the brk heap
//     is heap (never a root); any other writable mapping (anonymous memory: other threads'
//     stacks, a module's .bss, the program's own mmaps, glibc's per-thread arenas) is decided
//     by the analysis: heap if live blocks lie in it, otherwise a root;
//   - Refs records carry the (address, value) pairs;
//   - a Done record closes a complete scan.
//
// The analysis then marks what the roots reach, through the live blocks (analysis/reach.h).
//
// Memory is read with pread on /proc/self/mem, so a mapping that another thread unmaps during
// the scan gives an error, not a crash. Only resident pages are read (mincore): untouched
// reservations are skipped, and so are pages swapped out. The recorder's own memory (its
// mimalloc heaps, libmemtide's globals) is skipped, so its copies of block addresses do not
// keep blocks alive; with --allocator mimalloc the program's blocks share mimalloc's memory
// with the recorder's, so only libmemtide's globals are skipped then.
#include <fcntl.h>
#include <link.h>
#include <mimalloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "formats/encoder.h"
#include "recorder/base.h"
#include "recorder/clock.h"
#include "recorder/proc_maps.h"
#include "recorder/process.h"
#include "recorder/state.h"
#include "recorder/stream.h"
#include "recorder/writer.h"

namespace memtide::rec {
namespace {

struct Range {
  uintptr_t lo, hi;
};

constexpr size_t kPiece = 64 * 1024;  // bytes read at a time
constexpr size_t kPage = 4096;
constexpr size_t kBatch = 2048;       // pairs per Refs record
constexpr size_t kMaxRecord = 11 + 20 * kBatch;
constexpr size_t kMaxOwn = 16;

class Scanner {
 public:
  bool init(uintptr_t sp) {
    sp_ = sp;
    skip_mimalloc_ = recording.opts.allocator != AllocatorKind::Mimalloc;
    buf_ = static_cast<uint8_t*>(mem_alloc(kPiece));
    locs_ = static_cast<uint64_t*>(mem_alloc(kBatch * sizeof(uint64_t)));
    vals_ = static_cast<uint64_t*>(mem_alloc(kBatch * sizeof(uint64_t)));
    rec_ = static_cast<uint8_t*>(mem_alloc(kMaxRecord));
    if (!buf_ || !locs_ || !vals_ || !rec_) return false;
    mem_fd_ = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    if (mem_fd_ < 0 || !read_maps()) return false;
    find_own_segments();
    return true;
  }

  ~Scanner() {
    if (mem_fd_ >= 0) close(mem_fd_);
    for (void* p : {static_cast<void*>(buf_), static_cast<void*>(locs_), static_cast<void*>(vals_),
                    static_cast<void*>(rec_), static_cast<void*>(maps_), static_cast<void*>(targets_)})
      if (p) mem_free(p);
  }

  // Scans every writable mapping, then the scanning thread's static TLS blocks. False when a
  // record could not be written (the scan is then incomplete and gets no Done record).
  bool run() {
    // Targets: where heap blocks can be (anonymous writable memory and the brk heap).
    const char* const maps_end = maps_ + maps_len_;
    bool ok = true;
    for_each_mapping(maps_, maps_end, [&](const Mapping& m) {
      if (m.writable && (m.anonymous() || m.path == "[heap]")) {
        if (ntargets_ == targets_cap_ && !grow_targets()) return ok = false;
        targets_[ntargets_++] = {m.lo, m.hi};
      }
      return true;
    });
    if (!ok) return false;
    if (ntargets_ > 0) {  // (else no word can point to a block: tspan_ 0)
      tmin_ = targets_[0].lo;
      tspan_ = targets_[ntargets_ - 1].hi - tmin_;
    }

    for_each_mapping(maps_, maps_end, [&](const Mapping& m) {
      if (!m.readable || !m.writable || m.special()) return true;
      fmt::ScanKind kind = fmt::ScanKind::Root;
      if (m.path == "[heap]") kind = fmt::ScanKind::Heap;
      else if (m.anonymous()) kind = fmt::ScanKind::Mapping;
      uintptr_t lo = m.lo;
      if (sp_ >= m.lo && sp_ < m.hi) {  // the scanning thread's stack: what is above its frame
        kind = fmt::ScanKind::Root;
        lo = sp_ & ~uintptr_t{7};
      }
      return ok = region(kind, lo, m.hi);
    });
    if (!ok) return false;
    // The other threads' stacks (with their TLS and thread descriptor at the top): roots, read
    // with the mappings that hold them. Said apart because the kernel may have merged a stack's
    // mapping with a chunk glibc mapped next to it, which makes the region heap.
    if (!thread_stacks()) return false;
    // The scanning thread's static TLS blocks: roots, whose words were read with the mapping
    // that holds them (the brk heap for the main thread, else the thread's stack mapping).
    tls_ok_ = true;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* self) {
          auto* s = static_cast<Scanner*>(self);
          if (!info->dlpi_tls_data || info->dlpi_addr == s->own_base_) return 0;
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const ElfW(Phdr)& ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_TLS || ph.p_memsz == 0) continue;
            const auto lo = reinterpret_cast<uintptr_t>(info->dlpi_tls_data) & ~uintptr_t{7};
            if (!s->region(fmt::ScanKind::Root, lo, reinterpret_cast<uintptr_t>(info->dlpi_tls_data) + ph.p_memsz,
                           /*read=*/false)) {
              s->tls_ok_ = false;
              return 1;
            }
          }
          return 0;
        },
        this);
    if (!tls_ok_ || !flush()) return false;
    const size_t n = fmt::encode_scan_done(rec_, kMaxRecord, regions_, words_, refs_, monotonic_ns() - start_ns_);
    return n && append(n);
  }

 private:
  bool read_maps() {
    const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    size_t cap = 64 * 1024, len = 0;
    maps_ = static_cast<char*>(mem_alloc(cap + 1));
    for (;;) {
      if (!maps_) break;
      if (len == cap) {
        char* bigger = static_cast<char*>(mem_alloc(cap * 2 + 1));
        if (bigger) std::memcpy(bigger, maps_, len);
        mem_free(maps_);
        maps_ = bigger;
        cap *= 2;
        continue;
      }
      const ssize_t r = read(fd, maps_ + len, cap - len);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      len += static_cast<size_t>(r);
    }
    close(fd);
    if (!maps_) return false;
    maps_[len] = 0;
    maps_len_ = len;
    return true;
  }

  bool grow_targets() {
    const size_t cap = targets_cap_ ? targets_cap_ * 2 : 256;
    auto* t = static_cast<Range*>(mem_alloc(cap * sizeof(Range)));
    if (!t) return false;
    if (targets_) {
      std::memcpy(t, targets_, ntargets_ * sizeof(Range));
      mem_free(targets_);
    }
    targets_ = t;
    targets_cap_ = cap;
    return true;
  }

  // libmemtide's writable segments (its globals hold block addresses of its own): those of the
  // module whose code holds this function.
  void find_own_segments() {
    dl_iterate_phdr(
        [](dl_phdr_info* di, size_t, void* self) {
          auto* s = static_cast<Scanner*>(self);
          const auto here = reinterpret_cast<uintptr_t>(&leak_scan);
          bool mine = false;
          for (int i = 0; i < di->dlpi_phnum; ++i) {
            const ElfW(Phdr)& ph = di->dlpi_phdr[i];
            mine |= ph.p_type == PT_LOAD && here >= di->dlpi_addr + ph.p_vaddr &&
                    here < di->dlpi_addr + ph.p_vaddr + ph.p_memsz;
          }
          if (!mine) return 0;
          s->own_base_ = di->dlpi_addr;
          for (int i = 0; i < di->dlpi_phnum && s->nown_ < kMaxOwn; ++i) {
            const ElfW(Phdr)& ph = di->dlpi_phdr[i];
            if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_W)) continue;
            s->own_[s->nown_++] = {(di->dlpi_addr + ph.p_vaddr) & ~(kPage - 1),
                                   (di->dlpi_addr + ph.p_vaddr + ph.p_memsz + kPage - 1) & ~(kPage - 1)};
          }
          return 1;
        },
        this);
  }

  bool in_targets(uint64_t v) const {
    if (v - tmin_ >= tspan_) return false;
    size_t a = 0, b = ntargets_;
    while (a < b) {  // the first target whose hi is above v
      const size_t mid = (a + b) / 2;
      if (targets_[mid].hi <= v) a = mid + 1;
      else b = mid;
    }
    return a < ntargets_ && v >= targets_[a].lo;
  }

  bool thread_stacks() {
    constexpr size_t kMaxStacks = 4096;
    auto* stacks = static_cast<Range*>(mem_alloc(kMaxStacks * sizeof(Range)));
    if (!stacks) return false;
    size_t n = 0;
    timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 2;
    if (pthread_mutex_timedlock(&recording.registry_mutex, &deadline) == 0) {
      for (Stream* st = recording.registry; st && n < kMaxStacks; st = st->reg_next) {
        const auto* ts = reinterpret_cast<const ThreadState*>(st);  // Stream is its first member
        if (ts == tls_thread || ts->memo.stack_hi <= ts->memo.stack_lo) continue;
        if (sp_ >= ts->memo.stack_lo && sp_ < ts->memo.stack_hi) continue;  // the scanning thread's
        stacks[n++] = {static_cast<uintptr_t>(ts->memo.stack_lo), static_cast<uintptr_t>(ts->memo.stack_hi)};
      }
      pthread_mutex_unlock(&recording.registry_mutex);
    }
    bool ok = true;
    for (size_t i = 0; i < n && ok; ++i) ok = region(fmt::ScanKind::Root, stacks[i].lo, stacks[i].hi, /*read=*/false);
    mem_free(stacks);
    return ok;
  }

  // A Region record, then (with `read`) the words of [lo, hi).
  bool region(fmt::ScanKind kind, uintptr_t lo, uintptr_t hi, bool read = true) {
    const size_t n = fmt::encode_scan_region(rec_, kMaxRecord, regions_, kind, lo, hi);
    if (!n || !append(n)) return false;
    ++regions_;
    return !read || scan(lo, hi, 0);
  }

  // Reads [lo, hi) minus libmemtide's own segments (from own_[k] on).
  bool scan(uintptr_t lo, uintptr_t hi, size_t k) {
    for (; k < nown_; ++k) {
      const Range& o = own_[k];
      if (o.hi <= lo || o.lo >= hi) continue;
      if (lo < o.lo && !scan(lo, o.lo, k + 1)) return false;
      return o.hi < hi ? scan(o.hi, hi, k + 1) : true;
    }
    for (uintptr_t a = lo; a < hi;) {
      const uintptr_t piece_end = ((a & ~(kPiece - 1)) + kPiece) < hi ? (a & ~(kPiece - 1)) + kPiece : hi;
      if (!scan_piece(a, piece_end)) return false;
      a = piece_end;
    }
    return true;
  }

  bool scan_piece(uintptr_t lo, uintptr_t hi) {
    // Resident pages only.
    const uintptr_t page_lo = lo & ~(kPage - 1);
    unsigned char resident[kPiece / kPage + 1];
    if (mincore(reinterpret_cast<void*>(page_lo), hi - page_lo, resident) != 0) return true;  // gone
    const ssize_t got = pread(mem_fd_, buf_, hi - lo, static_cast<off_t>(lo));
    if (got <= 0) return true;
    const uintptr_t end = lo + static_cast<size_t>(got);
    for (uintptr_t page = page_lo; page < end; page += kPage) {
      if (!(resident[(page - page_lo) / kPage] & 1)) continue;
      if (skip_mimalloc_ && mi_is_in_heap_region(reinterpret_cast<void*>(page))) continue;
      const uintptr_t a = page < lo ? lo : page;
      const uintptr_t b = page + kPage < end ? page + kPage : end;
      for (uintptr_t w = a; w + 8 <= b; w += 8) {
        uint64_t v;
        std::memcpy(&v, buf_ + (w - lo), 8);
        if (!in_targets(v)) continue;
        locs_[n_] = w;
        vals_[n_] = v;
        if (++n_ == kBatch && !flush()) return false;
      }
      words_ += (b - a) / 8;
    }
    return true;
  }

  bool flush() {
    if (n_ == 0) return true;
    const size_t n = fmt::encode_scan_refs(rec_, kMaxRecord, locs_, vals_, n_);
    refs_ += n_;
    n_ = 0;
    return n && append(n);
  }

  // Timed: exit() may be called from a signal handler that interrupted a holder of the lock.
  bool append(size_t n) {
    timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 2;
    if (pthread_mutex_timedlock(&recording.shared_mutex, &deadline) != 0) return false;
    const bool ok = append_record(&recording.shared, rec_, n);
    pthread_mutex_unlock(&recording.shared_mutex);
    wait_for_writer();
    return ok;
  }

  uint64_t start_ns_ = monotonic_ns();
  uintptr_t sp_ = 0;
  bool skip_mimalloc_ = true;
  bool tls_ok_ = true;
  int mem_fd_ = -1;
  char* maps_ = nullptr;  // /proc/self/maps as it was when the scan began
  size_t maps_len_ = 0;
  Range* targets_ = nullptr;
  size_t ntargets_ = 0, targets_cap_ = 0;
  uint64_t tmin_ = 0, tspan_ = 0;
  Range own_[kMaxOwn] = {};
  size_t nown_ = 0;
  ElfW(Addr) own_base_ = 0;
  uint8_t* buf_ = nullptr;
  uint64_t* locs_ = nullptr;
  uint64_t* vals_ = nullptr;
  uint8_t* rec_ = nullptr;
  size_t n_ = 0;
  uint64_t regions_ = 0, words_ = 0, refs_ = 0;
};

}  // namespace

void leak_scan(uintptr_t sp) {
  Scanner s;
  if (!s.init(sp) || !s.run()) message("the leak scan at exit could not be completed; leaks are blocks not freed");
}

}  // namespace memtide::rec
