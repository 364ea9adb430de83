// sample_switch: switches between exact and sampled recording with memtide_sample() while
// blocks of each period are live, for the sampled-mode tests. Deterministic (one thread).
//
//   sample_switch INTERVAL
//   exact:   keeps 20,000 blocks of 1,000 bytes (A)
//   sampled: frees every block of A; allocates and frees 200,000 blocks of 1,000 bytes;
//            asks 1,000 times for 2^56 bytes, which fails (no block, no sample);
//            keeps 10,000 blocks of 2,000 bytes (B, 20 MB)
//   exact:   frees half of B (the even ones); keeps 100 blocks of 3,000 bytes (C)
//   exit:    B's odd half (10 MB) and C (300 KB) are not freed
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "memtide.h"

int main(int argc, char** argv) {
  const size_t interval = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 65536;
  std::vector<void*> a(20000), b(10000), c(100);
  for (auto& p : a) p = std::malloc(1000);
  const size_t in_effect = memtide_sample(interval);
  for (auto& p : a) std::free(p);
  for (int i = 0; i < 200000; ++i) {
    void* volatile t = std::malloc(1000);
    std::free(t);
  }
  int failed = 0;
  volatile size_t huge = size_t{1} << 56;  // (not a constant the compiler could fold)
  for (int i = 0; i < 1000; ++i) failed += std::malloc(huge) == nullptr;
  for (auto& p : b) p = std::malloc(2000);
  const size_t back = memtide_sample(0);
  for (size_t i = 0; i < b.size(); i += 2) std::free(b[i]);
  for (auto& p : c) p = std::malloc(3000);
  std::printf("sampled at %zu, then %zu; %d huge requests failed\n", in_effect, back, failed);
  return 0;
}
