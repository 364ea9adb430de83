// early_leak ROUNDS: leaks 37 blocks of 4000 bytes from leak_early() at its start, then
// allocates and frees (nothing more leaks) for ROUNDS rounds of 6,400 allocations, enough for a
// kept trace's first segments to be removed: its leaks are then from before the kept range.
// Prints "done" and exits 0.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::vector<char*> early;  // (only for the compiler: the blocks are never freed)

__attribute__((noinline)) void leak_early(int i) {
  char* p = static_cast<char*>(std::malloc(4000));
  std::memset(p, i, 4000);
  early.push_back(p);
}

// Sizes and lifetimes that vary, so that the trace does not compress to nothing.
__attribute__((noinline)) unsigned long churn(unsigned long seed) {
  std::vector<std::string> v;
  unsigned long sum = 0;
  for (int i = 0; i < 64; ++i) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    v.emplace_back(16 + (seed >> 50) % 700, static_cast<char>('a' + i % 26));
    if (seed & (1ULL << 40)) v.erase(v.begin());
  }
  for (const std::string& s : v) sum += s.size();
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  const long rounds = argc > 1 ? std::atol(argv[1]) : 100;
  for (int i = 0; i < 37; ++i) leak_early(i);
  unsigned long sum = 0, seed = 1;
  for (long r = 0; r < rounds; ++r)
    for (int i = 0; i < 100; ++i) sum += churn(++seed);
  early.clear();  // (the vector's own buffer is freed: only the 37 blocks stay)
  early.shrink_to_fit();
  std::printf("done %lu\n", sum % 10);
  return 0;
}
