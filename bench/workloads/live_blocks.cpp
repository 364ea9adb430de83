// Live blocks for the reader-scaling benchmark (bench/live_blocks.sh): N allocations of 16
// bytes, then (when EVENTS is larger than N) frees of the oldest block, each followed by a new
// allocation, until EVENTS allocations and frees were made: the replay's live set stays at N
// blocks, packed as the allocator places them (LD_PRELOAD another allocator to see its layout).
// With --random, the blocks are of 16 to 255 bytes and each free is of a block picked at random
// (xorshift, fixed seed): frees and allocations all over the live set, as a cache evicting at
// random makes them.
//
//   memtide-bench-live-blocks N [EVENTS] [--random]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  const bool random = argc > 1 && std::strcmp(argv[argc - 1], "--random") == 0;
  if (random) --argc;
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: memtide-bench-live-blocks N [EVENTS] [--random]\n");
    return 2;
  }
  const long n = std::atol(argv[1]);
  const long events = argc == 3 ? std::atol(argv[2]) : n;
  uint64_t rng = 88172645463325252ull;
  auto next = [&] {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  };
  auto size = [&]() -> std::size_t { return random ? 16 + next() % 240 : 16; };
  if (n < 0 || events < n) {
    std::fprintf(stderr, "memtide-bench-live-blocks: need 0 <= N <= EVENTS\n");
    return 2;
  }
  // The ring of live blocks is allocated before the first counted allocation (mmap'd by glibc
  // for large N: it is not one of the N).
  std::vector<void*> ring(static_cast<std::size_t>(n > 0 ? n : 1));
  for (long i = 0; i < n; ++i) ring[static_cast<std::size_t>(i)] = std::malloc(size());
  long done = n;
  for (long i = 0; n > 0 && done + 2 <= events; ++i, done += 2) {
    void*& slot = ring[static_cast<std::size_t>(random ? static_cast<long>(next() % static_cast<uint64_t>(n)) : i % n)];
    std::free(slot);
    slot = std::malloc(size());
  }
  std::printf("%ld live blocks, %ld events\n", n, done);
  return 0;
}
