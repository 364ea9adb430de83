// exact_workload: a program whose every allocation is counted by the program itself.
//
// It uses each allocation API memtide records, across 8 threads, with cross-thread frees,
// a known peak (a 64 MiB block allocated while every worker holds a known block) and known
// leaks (leak_small in each worker, leak_big in main). It writes its own tally as JSON to the
// file named by --out; the end-to-end tests compare memtide's trace with that tally.
//
//   exact_workload [--baseline] [--no-pvalloc] [--out FILE]
//
// --no-pvalloc leaves out pvalloc, which valgrind does not implement (it aborts the program).
// --baseline starts and joins the same threads and does the same I/O but none of the
// counted work: "full run minus baseline run" is exactly what the counted work did.
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <new>
#include <thread>
#include <vector>

#include "memtide.h"

namespace {

constexpr int kThreads = 8;
constexpr size_t kPeakBlock = 64u << 20;
constexpr size_t kLeakSmall = 1013;  // 3 per worker
constexpr size_t kLeakBig = 10007;   // 1, from main with new[]
constexpr int kMailbox = 100;
constexpr size_t kMailboxSize = 48;

enum Api { Malloc, Calloc, Realloc, Reallocarray, PosixMemalign, AlignedAlloc, Memalign, Valloc, Pvalloc,
           Free, New, NewArray, NewAligned, NewArrayAligned, Delete, DeleteArray, DeleteAligned,
           DeleteArrayAligned, Mmap, Munmap, Custom, ApiCount };
const char* kApiNames[ApiCount] = {"malloc", "calloc", "realloc", "reallocarray", "posix_memalign",
                                   "aligned_alloc", "memalign", "valloc", "pvalloc", "free", "new", "new[]",
                                   "new(align)", "new[](align)", "delete", "delete[]", "delete(align)",
                                   "delete[](align)", "mmap", "munmap", "custom"};

struct Tally {
  std::atomic<long> allocs[ApiCount]{};
  std::atomic<long> frees[ApiCount]{};
  std::atomic<long> bytes[ApiCount]{};
} tally;

void counted_alloc(Api a, size_t n) {
  tally.allocs[a]++;
  tally.bytes[a] += static_cast<long>(n);
}
void counted_free(Api a) { tally.frees[a]++; }

struct alignas(64) Aligned {
  char data[64];
};

void* volatile sink;  // keeps the compiler from eliding allocations
void* mailbox[kThreads][kMailbox];
void* held[kThreads];
alignas(64) char custom_arena[4096];
std::barrier<>* phase_a;
std::barrier<>* phase_b;
bool baseline = false;
bool use_pvalloc = true;

__attribute__((noinline)) void leak_small() {
  for (int i = 0; i < 3; ++i) {
    sink = malloc(kLeakSmall);
    counted_alloc(Malloc, kLeakSmall);
  }
}

__attribute__((noinline)) void leak_big() {
  sink = new char[kLeakBig];
  counted_alloc(NewArray, kLeakBig);
}

void c_api() {
  for (int i = 0; i < 1000; ++i) {
    const size_t n = 16 + static_cast<size_t>(i % 256);
    void* p = malloc(n);
    counted_alloc(Malloc, n);
    sink = p;
    free(p);
    counted_free(Free);
  }
  for (int i = 0; i < 100; ++i) {
    void* p = calloc(10, 24);
    counted_alloc(Calloc, 240);
    sink = p;
    free(p);
    counted_free(Free);
  }
  for (int i = 0; i < 50; ++i) {
    void* volatile null_block = nullptr;  // a literal null lets the compiler turn this into malloc
    void* p = realloc(null_block, 32);
    counted_alloc(Realloc, 32);
    for (size_t n : {size_t{64}, size_t{4096}, size_t{16}}) {
      p = realloc(p, n);
      counted_free(Realloc);
      counted_alloc(Realloc, n);
    }
    sink = p;
    p = realloc(p, 0);  // glibc: frees and returns null
    counted_free(Realloc);
    if (p) {  // another allocator might return a minimal block instead
      counted_alloc(Realloc, 0);
      free(p);
      counted_free(Free);
    }
  }
  for (int i = 0; i < 50; ++i) {
    void* p = reallocarray(nullptr, 8, 16);
    counted_alloc(Reallocarray, 128);
    p = reallocarray(p, 16, 16);
    counted_free(Reallocarray);
    counted_alloc(Reallocarray, 256);
    sink = p;
    free(p);
    counted_free(Free);
  }
  for (int i = 0; i < 50; ++i) {
    void* p = nullptr;
    if (posix_memalign(&p, 64, 100) == 0) counted_alloc(PosixMemalign, 100);
    sink = p;
    free(p);
    counted_free(Free);
    p = aligned_alloc(128, 256);
    counted_alloc(AlignedAlloc, 256);
    sink = p;
    free(p);
    counted_free(Free);
    p = memalign(256, 300);
    counted_alloc(Memalign, 300);
    sink = p;
    free(p);
    counted_free(Free);
  }
  for (int i = 0; i < 20; ++i) {
    void* p = valloc(1000);
    counted_alloc(Valloc, 1000);
    sink = p;
    free(p);
    counted_free(Free);
    if (!use_pvalloc) continue;
    p = pvalloc(1000);
    counted_alloc(Pvalloc, 1000);
    sink = p;
    free(p);
    counted_free(Free);
  }
}

void cxx_api() {
  for (int i = 0; i < 100; ++i) {
    int* p = new int(i);
    counted_alloc(New, sizeof(int));
    sink = p;
    delete p;
    counted_free(Delete);
    int* a = new int[10];
    counted_alloc(NewArray, 10 * sizeof(int));
    sink = a;
    delete[] a;
    counted_free(DeleteArray);
  }
  for (int i = 0; i < 50; ++i) {
    Aligned* p = new Aligned;
    counted_alloc(NewAligned, sizeof(Aligned));
    sink = p;
    delete p;
    counted_free(DeleteAligned);
    Aligned* a = new Aligned[4];
    counted_alloc(NewArrayAligned, 4 * sizeof(Aligned));
    sink = a;
    delete[] a;
    counted_free(DeleteArrayAligned);
  }
  for (int i = 0; i < 20; ++i) {
    int* p = new (std::nothrow) int(i);
    counted_alloc(New, sizeof(int));
    sink = p;
    ::operator delete(p, sizeof(int));  // sized delete
    counted_free(Delete);
  }
}

void mappings() {
  for (int i = 0; i < 10; ++i) {
    void* p = mmap(nullptr, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    counted_alloc(Mmap, 65536);
    munmap(p, 65536);
    counted_free(Munmap);
  }
  // One mapping released in two halves.
  char* p = static_cast<char*>(mmap(nullptr, 262144, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  counted_alloc(Mmap, 262144);
  munmap(p, 131072);
  counted_free(Munmap);
  munmap(p + 131072, 131072);
  counted_free(Munmap);
}

void custom_pool(int t) {
  for (int i = 0; i < 20; ++i) {
    char* p = custom_arena + t * 512 + (i % 8) * 64;
    memtide_alloc(p, 32);
    counted_alloc(Custom, 32);
    memtide_free(p);
    counted_free(Custom);
  }
}

void worker(int t) {
  char name[16];
  std::snprintf(name, sizeof name, "worker-%d", t);
  pthread_setname_np(pthread_self(), name);
  if (!baseline) {
    c_api();
    cxx_api();
    mappings();
    custom_pool(t);
    for (int i = 0; i < kMailbox; ++i) {
      mailbox[t][i] = malloc(kMailboxSize);
      counted_alloc(Malloc, kMailboxSize);
    }
    held[t] = malloc(1000 * static_cast<size_t>(t + 1));
    counted_alloc(Malloc, 1000 * static_cast<size_t>(t + 1));
  }
  phase_a->arrive_and_wait();  // main allocates the peak block now
  phase_b->arrive_and_wait();
  if (!baseline) {
    free(held[t]);
    counted_free(Free);
    for (int i = 0; i < kMailbox; ++i) {  // blocks another thread allocated
      free(mailbox[(t + 1) % kThreads][i]);
      counted_free(Free);
    }
    leak_small();
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* out = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--baseline")) baseline = true;
    else if (!std::strcmp(argv[i], "--no-pvalloc")) use_pvalloc = false;
    else if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
    else {
      std::fprintf(stderr, "usage: exact_workload [--baseline] [--no-pvalloc] [--out FILE]\n");
      return 2;
    }
  }
  // Everything the program needs later is set up before the first counted allocation.
  FILE* f = out ? std::fopen(out, "w") : nullptr;
  std::barrier<> a(kThreads + 1), b(kThreads + 1);
  phase_a = &a;
  phase_b = &b;
  memtide_mark("start");

  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);

  a.arrive_and_wait();
  long peak_own = 0;
  if (!baseline) {
    void* big = malloc(kPeakBlock);
    counted_alloc(Malloc, kPeakBlock);
    sink = big;
    memtide_mark("peak");
    // Live blocks of the counted work right now: the peak block, every worker's held block
    // and mailbox (nothing else of it is live: everything else was freed).
    peak_own = static_cast<long>(kPeakBlock) + kThreads * kMailbox * static_cast<long>(kMailboxSize);
    for (int t = 0; t < kThreads; ++t) peak_own += 1000L * (t + 1);
    free(big);
    counted_free(Free);
    memtide_mark("after-peak");
  }
  b.arrive_and_wait();
  for (auto& th : threads) th.join();
  if (!baseline) leak_big();

  if (f) {
    long total_allocs = 0, total_frees = 0;
    std::fprintf(f, "{\n  \"apis\": {\n");
    for (int i = 0; i < ApiCount; ++i) {
      std::fprintf(f, "    \"%s\": {\"allocs\": %ld, \"frees\": %ld, \"bytes\": %ld}%s\n", kApiNames[i],
                   tally.allocs[i].load(), tally.frees[i].load(), tally.bytes[i].load(), i + 1 < ApiCount ? "," : "");
      if (i != Mmap && i != Munmap && i != Custom) {
        total_allocs += tally.allocs[i];
        total_frees += tally.frees[i];
      }
    }
    std::fprintf(f, "  },\n  \"heap_allocs\": %ld,\n  \"heap_frees\": %ld,\n", total_allocs, total_frees);
    std::fprintf(f, "  \"leaks\": {\"leak_small\": {\"blocks\": %d, \"bytes\": %ld}, \"leak_big\": {\"blocks\": %d, \"bytes\": %ld}},\n",
                 baseline ? 0 : 3 * kThreads, baseline ? 0L : static_cast<long>(3 * kThreads * kLeakSmall),
                 baseline ? 0 : 1, baseline ? 0L : static_cast<long>(kLeakBig));
    std::fprintf(f, "  \"peak_own\": %ld\n}\n", peak_own);
    std::fclose(f);
  }
  return 0;
}
