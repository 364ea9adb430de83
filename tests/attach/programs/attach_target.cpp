// A multi-threaded program for `memtide attach` tests: its threads allocate without pause (so
// an attach lands while they are inside the allocator), free blocks they made long before, and
// leak from known functions. Its output and exit status depend on its arguments alone.
//
//   attach_target --ready FILE [--threads N] [--rounds N] [--round-ms N] [--status N]
// Each thread runs N rounds of --round-ms milliseconds; FILE is created once every thread runs.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<unsigned> g_running{0};

// The leaks the tests look for, one function each, with sizes found nowhere else.
__attribute__((noinline)) void leak_from_malloc() {
  void* p = malloc(4242);
  std::memset(p, 1, 4242);
  asm volatile("" ::"r"(p) : "memory");
}
__attribute__((noinline)) void leak_from_new() {
  char* p = new char[777];
  p[0] = 1;
  asm volatile("" ::"r"(p) : "memory");
}

__attribute__((noinline)) unsigned long churn(unsigned long seed) {
  std::map<std::string, std::string> m;
  for (int i = 0; i < 16; ++i) m["key" + std::to_string(seed + i)] = std::string(40 + i, 'x');
  unsigned long sum = 0;
  for (const auto& [k, v] : m) sum += k.size() + v.size();
  void* a = calloc(3, 100);
  void* b = realloc(malloc(10), 1000);
  void* c = nullptr;
  if (posix_memalign(&c, 64, 256) == 0) free(c);
  void* d = aligned_alloc(128, 512);
  free(d);
  free(b);
  free(a);
  auto* e = new (std::align_val_t(64)) double[8];
  ::operator delete[](e, std::align_val_t(64));
  return sum;
}

void worker(int index, int rounds, int round_ms, unsigned long* result) {
  // Blocks made at the start, freed one by one through the whole run: those freed after an
  // attach were allocated before it.
  std::vector<void*> early;
  for (int i = 0; i < 400; ++i) early.push_back(malloc(64 + i));
  g_running.fetch_add(1);
  unsigned long sum = 0;
  size_t next_early = 0;
  for (int r = 0; r < rounds; ++r) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(round_ms);
    unsigned long n = 0;
    // A fixed amount of work per round, then a sleep to the round's end: the output depends on
    // the arguments only, however slow the recording makes each call.
    for (; n < 200; ++n) sum += churn(static_cast<unsigned long>(index) * 1000 + n);
    if (next_early < early.size()) {
      for (int k = 0; k < 4 && next_early < early.size(); ++k) free(early[next_early++]);
    }
    if (r % 5 == 0) leak_from_malloc();
    if (r % 7 == 0) leak_from_new();
    void* m = mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED) munmap(m, 1 << 16);
    std::this_thread::sleep_until(end);
  }
  while (next_early < early.size()) free(early[next_early++]);
  *result = sum;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 4, rounds = 100, round_ms = 50, status = 0;
  const char* ready = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    else if (a == "--round-ms") round_ms = std::atoi(argv[i + 1]);
    else if (a == "--status") status = std::atoi(argv[i + 1]);
    else if (a == "--ready") ready = argv[i + 1];
  }
  std::vector<unsigned long> results(threads);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) ts.emplace_back(worker, t, rounds, round_ms, &results[t]);
  while (g_running.load() < static_cast<unsigned>(threads)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (ready) std::ofstream(ready) << getpid() << "\n";
  for (auto& t : ts) t.join();
  unsigned long total = 0;
  for (unsigned long r : results) total += r;
  std::printf("threads %d rounds %d checksum %lu\n", threads, rounds, total);
  return status;
}
