// big_heap BLOCKS EVENTS: holds BLOCKS blocks of 16 to 79 bytes and replaces one picked at random
// (a fixed seed) EVENTS times, then frees them all. Prints "done N" (the allocations made) and
// exits 0.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  const long blocks = argc > 1 ? std::atol(argv[1]) : 1000000;
  const long events = argc > 2 ? std::atol(argv[2]) : 10000000;
  if (blocks < 1 || events < 0) return 2;
  std::vector<void*> held(static_cast<size_t>(blocks));
  uint64_t x = 88172645463325252ull;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  long made = 0;
  for (void*& p : held) p = std::malloc(16 + next() % 64), ++made;
  for (long i = 0; i < events; ++i) {
    void*& p = held[next() % static_cast<uint64_t>(blocks)];
    std::free(p);
    p = std::malloc(16 + next() % 64);
    ++made;
  }
  for (void* p : held) std::free(p);
  std::printf("done %ld\n", made);
  return 0;
}
