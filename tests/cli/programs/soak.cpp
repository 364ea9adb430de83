// soak: a worker's life in a few seconds, for the growth tests (memtide report --growth, check
// --max-growth). Every millisecond:
//   churn()        allocates 1 to 8 blocks of 16 B .. 4 KiB and frees them at once;
//   cache_insert() every 4 ms: a cache of 200 entries of 512 B, filled in the first 0.8 s, then
//                  each insertion evicts the oldest (it fills, then holds);
//   leak_slowly()  every 2 ms, 64 B never freed (1.83 MiB/min), unless --no-leak.
// The cache is still live at the end, as a worker's is when it is stopped.
//
//   soak [--seconds S] [--no-leak]
#include <time.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace {

void* volatile sink;
constexpr int kCache = 200;
void* cache[kCache];
int cache_next = 0;
void* leaked[1 << 16];
int nleaked = 0;
unsigned rng = 12345;

__attribute__((noinline)) void leak_slowly() {
  if (nleaked < (1 << 16)) leaked[nleaked++] = std::malloc(64);
}

__attribute__((noinline)) void cache_insert() {
  void*& slot = cache[cache_next++ % kCache];
  std::free(slot);
  slot = std::malloc(512);
  std::memset(slot, 1, 512);
}

__attribute__((noinline)) void churn() {
  void* blocks[8];
  rng = rng * 1103515245 + 12345;
  const int n = 1 + static_cast<int>((rng >> 16) % 8);
  for (int i = 0; i < n; ++i) {
    rng = rng * 1103515245 + 12345;
    blocks[i] = std::malloc(16 + (rng >> 16) % 4096);
    sink = blocks[i];
  }
  for (int i = 0; i < n; ++i) std::free(blocks[i]);
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 4;
  bool leak = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc)
      seconds = std::atof(argv[++i]);
    else if (a == "--no-leak")
      leak = false;
  }
  const uint64_t start = now_ns(), end = start + static_cast<uint64_t>(seconds * 1e9);
  // Paced by the clock, not by a count of iterations: a busy machine changes how many run, not
  // how long the run is nor the rates per second.
  for (uint64_t tick = 0;; ++tick) {
    const uint64_t due = start + tick * 1'000'000;
    if (due >= end) break;
    const uint64_t t = now_ns();
    if (t < due) {
      const timespec d{0, static_cast<long>(due - t)};
      nanosleep(&d, nullptr);
    }
    churn();
    if (tick % 4 == 0) cache_insert();
    if (leak && tick % 2 == 0) leak_slowly();
  }
  return 0;
}
