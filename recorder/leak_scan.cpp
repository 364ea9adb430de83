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
// The world is stopped first, as LeakSanitizer stops it: each other thread of the program is sent
// a real-time signal whose handler saves its registers on its own stack (the signal frame) and
// parks it, and only then does the recording end, so the recorded live set and the memory read
// are one instant (a thread that frees its argument as the program exits is parked before or
// after that free, never between). What is dead is not read: the exiting thread's stack below
// the stack pointer it had when the program called exit (or main returned), each parked
// thread's stack below its signal frame, the stacks glibc keeps for reuse after their threads
// exited (their descriptors still hold the start argument and the result), and the stacks of
// the recorder's own threads. A thread inside the recorder is not parked there: it is asked
// again until it is out. A thread that blocks the signal is waited for a quarter of a second (a
// starting thread blocks every signal until it runs the program's function); one that never
// answers is read whole while it runs. The loader's lock is held from before the stop (the
// scan's dl_iterate_phdr would otherwise wait for a parked dlopen).
// (The stop itself: stop_world.h.)
//
// Memory is read with pread on /proc/self/mem, so a mapping that another thread unmaps during
// the scan gives an error, not a crash. Only resident pages are read (mincore): untouched
// reservations are skipped, and so are pages swapped out. The recorder's own memory (its
// mimalloc heaps, libmemtide's globals) is skipped, so its copies of block addresses do not
// keep blocks alive; with --allocator mimalloc the program's blocks share mimalloc's memory
// with the recorder's, so only libmemtide's globals are skipped then.
#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <mimalloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "formats/encoder.h"
#include "recorder/base.h"
#include "recorder/clock.h"
#include "recorder/proc_maps.h"
#include "recorder/process.h"
#include "recorder/state.h"
#include "recorder/stop_world.h"
#include "recorder/recorder.h"
#include "recorder/stream.h"
#include "recorder/unwind.h"
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
constexpr size_t kMaxSuppressions = 32 * 1024;  // bytes of the program's suppressions kept

class Scanner {
 public:
  bool init(uintptr_t sp, const World& world, const char* suppressions, uint64_t start_ns) {
    start_ns_ = start_ns;
    sp_ = sp;
    suppressions_ = suppressions;
    world_ = &world;
    skip_mimalloc_ = recording.opts.allocator != AllocatorKind::Mimalloc;
    buf_ = static_cast<uint8_t*>(mem_alloc(kPiece));
    locs_ = static_cast<uint64_t*>(mem_alloc(kBatch * sizeof(uint64_t)));
    vals_ = static_cast<uint64_t*>(mem_alloc(kBatch * sizeof(uint64_t)));
    rec_ = static_cast<uint8_t*>(mem_alloc(kMaxRecord));
    if (!buf_ || !locs_ || !vals_ || !rec_) return false;
    mem_fd_ = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    if (mem_fd_ < 0 || !read_maps()) return false;
    find_own_segments();
    return known_stacks() && build_skips();
  }

  ~Scanner() {
    if (mem_fd_ >= 0) close(mem_fd_);
    for (void* p : {static_cast<void*>(buf_), static_cast<void*>(locs_), static_cast<void*>(vals_),
                    static_cast<void*>(rec_), static_cast<void*>(maps_), static_cast<void*>(targets_),
                    static_cast<void*>(known_), static_cast<void*>(skips_), static_cast<void*>(roots_),
                    static_cast<void*>(mlist_)})
      if (p) mem_free(p);
  }

  // Scans every writable mapping, then the scanning thread's static TLS blocks. False when a
  // record could not be written (the scan is then incomplete and gets no Done record).
  bool run() {
    if (suppressions_ && *suppressions_) {
      const size_t n = fmt::encode_scan_suppressions(rec_, kMaxRecord, suppressions_, strnlen(suppressions_, kMaxSuppressions));
      if (!n || !append(n)) return false;
    }
    // Targets: where heap blocks can be (anonymous writable memory and the brk heap).
    const char* const maps_end = maps_ + maps_len_;
    bool ok = true;
    for_each_mapping(maps_, maps_end, [&](const Mapping& m) {
      // (Any protection: a block may have pages the program made read-only or inaccessible.)
      if (m.anonymous() || m.path == "[heap]") {
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
      if (!m.readable || m.special() || (!m.writable && !m.anonymous() && m.path != "[heap]")) return true;
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
          const auto here = reinterpret_cast<uintptr_t>(&leak_scan_at_exit);
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
    bool ok = true;
    for (size_t i = 0; i < nknown_ && ok; ++i) ok = region(fmt::ScanKind::Root, known_[i].lo, known_[i].hi, /*read=*/false);
    for (size_t i = 0; i < nroots_ && ok; ++i) ok = region(fmt::ScanKind::Root, roots_[i].lo, roots_[i].hi, /*read=*/false);
    return ok;
  }

  // The stacks of the program's threads that recorded (their bounds from their first event),
  // but the scanning thread's.
  bool known_stacks() {
    constexpr size_t kMaxStacks = 4096;
    known_ = static_cast<Range*>(mem_alloc(kMaxStacks * sizeof(Range)));
    if (!known_) return false;
    timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 2;
    if (pthread_mutex_timedlock(&recording.registry_mutex, &deadline) == 0) {
      for (Stream* st = recording.registry; st && nknown_ < kMaxStacks; st = st->reg_next) {
        const auto* ts = reinterpret_cast<const ThreadState*>(st);  // Stream is its first member
        if (ts == tls_thread || ts->memo.stack_hi <= ts->memo.stack_lo) continue;
        if (sp_ >= ts->memo.stack_lo && sp_ < ts->memo.stack_hi) continue;  // the scanning thread's
        known_[nknown_++] = {static_cast<uintptr_t>(ts->memo.stack_lo), static_cast<uintptr_t>(ts->memo.stack_hi)};
      }
      pthread_mutex_unlock(&recording.registry_mutex);
    }
    return true;
  }

  // The mappings as [lo, hi) with whether each is anonymous and writable, in address order.
  struct MapEntry {
    uintptr_t lo, hi;
    bool anon_rw;
  };
  const MapEntry* mapping_at(uintptr_t a) const {
    size_t lo = 0, hi = nmlist_;
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (mlist_[mid].hi <= a) lo = mid + 1;
      else hi = mid;
    }
    return lo < nmlist_ && a >= mlist_[lo].lo ? &mlist_[lo] : nullptr;
  }

  static bool contains(const Range& r, uintptr_t a) { return a >= r.lo && a < r.hi; }

  // What is not read: libmemtide's globals, the recorder threads' stacks, each parked thread's
  // stack below its signal frame, and glibc's cached stacks of threads that exited.
  bool build_skips() {
    const char* const maps_end = maps_ + maps_len_;
    size_t nmaps = 0;
    for_each_mapping(maps_, maps_end, [&](const Mapping&) { return ++nmaps, true; });
    mlist_ = static_cast<MapEntry*>(mem_alloc((nmaps + 1) * sizeof(MapEntry)));
    if (!mlist_) return false;
    for_each_mapping(maps_, maps_end, [&](const Mapping& m) {
      if (nmlist_ < nmaps) mlist_[nmlist_++] = {m.lo, m.hi, m.writable && m.anonymous()};
      return true;
    });
    const int nthreads = world_->count();
    const uint64_t ncreated = created_thread_count();
    const size_t cap = kMaxOwn + kMaxRecorderThreads + static_cast<size_t>(nthreads) + 2 * ncreated + 1;
    skips_ = static_cast<Range*>(mem_alloc(cap * sizeof(Range)));
    roots_ = static_cast<Range*>(mem_alloc((static_cast<size_t>(nthreads) + 1) * sizeof(Range)));
    if (!skips_ || !roots_) return false;
    for (size_t i = 0; i < nown_; ++i) skips_[nskips_++] = own_[i];
    const int nrec = recorder_thread_count();
    for (int i = 0; i < nrec; ++i)
      if (const StackRange t = recorder_thread_stack(i); t.hi > t.lo) skips_[nskips_++] = {t.lo, t.hi};
    // Parked threads: their stack from their signal frame up is a root, below it is dead.
    for (int i = 0; i < nthreads; ++i) {
      const Parked& p = world_->at(i);
      if (p.state.load(std::memory_order_acquire) != kParked) continue;
      Range stack{0, 0};
      for (size_t k = 0; k < nknown_ && !stack.hi; ++k)
        if (contains(known_[k], p.sp)) stack = known_[k];
      if (!stack.hi) {
        const MapEntry* m = mapping_at(p.sp);
        if (!m) continue;
        stack = {m->lo, m->hi};
        // A stack glibc made ends with the thread's descriptor: a mapping merged above it is not
        // this stack.
        if (p.self > p.sp && p.self < m->hi) stack.hi = std::min<uintptr_t>(m->hi, (p.self + kPage) & ~(kPage - 1));
        roots_[nroots_++] = {p.live_lo, stack.hi};
      }
      if (contains(stack, p.sp) && p.live_lo >= stack.lo && p.live_lo <= p.sp) skips_[nskips_++] = {stack.lo, p.live_lo};
    }
    // Stacks kept by glibc after their threads exited, known by the descriptor at their top.
    // Only when every other thread is parked: a running thread's stack could be among them.
    if (world_->all_parked()) {
      for (uint64_t k = 0; k < ncreated; ++k) {
        const uintptr_t pd = created_thread(k);
        const MapEntry* m = pd ? mapping_at(pd) : nullptr;
        if (!m || !m->anon_rw) continue;
        const Range r{m->lo, std::min<uintptr_t>(m->hi, (pd + kPage) & ~(kPage - 1))};
        bool live = contains(r, sp_);
        for (int i = 0; i < nthreads && !live; ++i) {
          const Parked& p = world_->at(i);
          live = p.state.load(std::memory_order_acquire) == kParked && (contains(r, p.sp) || contains(r, p.live_lo));
        }
        for (int i = 0; i < nrec && !live; ++i) {
          const StackRange t = recorder_thread_stack(i);
          live = t.lo < r.hi && r.lo < t.hi;
        }
        // (Not its descriptor's second word: the thread's DTV, which glibc keeps with the stack,
        // its dlopen'ed modules' TLS blocks hanging from it.)
        if (!live) {
          const uintptr_t dtv = pd + sizeof(void*);
          skips_[nskips_++] = {r.lo, std::min(r.hi, dtv)};
          skips_[nskips_++] = {std::min(r.hi, dtv + sizeof(void*)), r.hi};
        }
      }
    }
    std::sort(skips_, skips_ + nskips_, [](const Range& a, const Range& b) { return a.lo < b.lo; });
    size_t out = 0;
    for (size_t i = 0; i < nskips_; ++i) {
      if (skips_[i].hi <= skips_[i].lo) continue;
      if (out && skips_[i].lo <= skips_[out - 1].hi) skips_[out - 1].hi = std::max(skips_[out - 1].hi, skips_[i].hi);
      else skips_[out++] = skips_[i];
    }
    nskips_ = out;
    return true;
  }

  // A Region record, then (with `read`) the words of [lo, hi).
  bool region(fmt::ScanKind kind, uintptr_t lo, uintptr_t hi, bool read = true) {
    const size_t n = fmt::encode_scan_region(rec_, kMaxRecord, regions_, kind, lo, hi);
    if (!n || !append(n)) return false;
    ++regions_;
    return !read || scan(lo, hi);
  }

  // Reads [lo, hi) minus the ranges not read (skips_).
  bool scan(uintptr_t lo, uintptr_t hi) {
    size_t k = static_cast<size_t>(
        std::upper_bound(skips_, skips_ + nskips_, lo, [](uintptr_t v, const Range& r) { return v < r.hi; }) - skips_);
    for (uintptr_t a = lo; a < hi;) {
      if (k < nskips_ && skips_[k].lo <= a) {
        a = std::max(a, skips_[k].hi);
        ++k;
        continue;
      }
      const uintptr_t b = k < nskips_ && skips_[k].lo < hi ? skips_[k].lo : hi;
      while (a < b) {
        const uintptr_t piece_end = ((a & ~(kPiece - 1)) + kPiece) < b ? (a & ~(kPiece - 1)) + kPiece : b;
        if (!scan_piece(a, piece_end)) return false;
        a = piece_end;
      }
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

  uint64_t start_ns_ = 0;  // when the world began to stop
  const char* suppressions_ = nullptr;  // the program's __lsan_default_suppressions()
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
  const World* world_ = nullptr;
  Range* known_ = nullptr;  // the recorded threads' stacks
  size_t nknown_ = 0;
  Range* skips_ = nullptr;  // not read; sorted, apart
  size_t nskips_ = 0;
  Range* roots_ = nullptr;  // parked threads' live stacks that no recorded thread's bounds give
  size_t nroots_ = 0;
  MapEntry* mlist_ = nullptr;
  size_t nmlist_ = 0;
  ElfW(Addr) own_base_ = 0;
  uint8_t* buf_ = nullptr;
  uint64_t* locs_ = nullptr;
  uint64_t* vals_ = nullptr;
  uint8_t* rec_ = nullptr;
  size_t n_ = 0;
  uint64_t regions_ = 0, words_ = 0, refs_ = 0;
};

}  // namespace

namespace {

// A function of the executable by name: exported (dlsym), or from the executable's own symbol
// table (an executable exports only what a library linked with it uses).
void* program_function(const char* name) {
  if (void* f = dlsym(RTLD_DEFAULT, name)) return f;
  ElfW(Addr) bias = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name && info->dlpi_name[0]) return 0;  // the executable has no name here
        *static_cast<ElfW(Addr)*>(out) = info->dlpi_addr;
        return 1;
      },
      &bias);
  const int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  void* f = nullptr;
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  for (Elf_Scn* scn = nullptr; elf && !f && (scn = elf_nextscn(elf, scn));) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    for (size_t i = 0; data && !f && i < sh.sh_size / sh.sh_entsize; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_value) continue;
      const char* s = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (s && std::strcmp(s, name) == 0) f = reinterpret_cast<void*>(bias + sym.st_value);
    }
  }
  if (elf) elf_end(elf);
  close(fd);
  return f;
}

}  // namespace

bool leak_scan_at_exit(uintptr_t sp, bool (*end)()) {
  // The stack pointer at the program's exit, when it lies above here on this thread's stack.
  const uintptr_t at_exit = exit_sp();
  if (at_exit > sp) {
    uint64_t lo = 0, hi = 0;
    bool same = false;
    read_mappings([&](const Mapping& m) {
      if (sp >= m.lo && sp < m.hi) {
        lo = m.lo, hi = m.hi;
        same = at_exit < hi;
        return false;
      }
      return true;
    });
    if (same) sp = at_exit;
  }
  // The program's own suppressions, where LeakSanitizer reads them (asked before the world
  // stops: the lookup takes the loader's lock, which a parked thread may hold).
  const char* suppressions = nullptr;
  {
    BusyScope busy(kOwnAllocs);  // (a failed lookup allocates its message)
    if (auto fn = reinterpret_cast<const char* (*)()>(program_function("__lsan_default_suppressions"))) suppressions = fn();
  }
  // The loader's lock for the whole scan: a thread parked inside dlopen would hold it.
  struct Args {
    uintptr_t sp;
    bool (*end)();
    const char* suppressions;
    bool ended;
  } args{sp, end, suppressions, false};
  dl_iterate_phdr(
      [](dl_phdr_info*, size_t, void* a) {
        auto* x = static_cast<Args*>(a);
        const uint64_t start = monotonic_ns();
        World world;
        world.stop();
        x->ended = x->end();
        if (x->ended) {
          Scanner s;
          if (!s.init(x->sp, world, x->suppressions, start) || !s.run())
            message("the leak scan at exit could not be completed; leaks are blocks not freed");
        }
        world.resume();
        return 1;
      },
      &args);
  return args.ended;
}

}  // namespace memtide::rec
