// Allocation churn for the benchmark harness (bench/run): strings, vectors and maps, millions
// of small allocations and frees, on one or more threads.
//
//   memtide-bench-churn [--threads N] [--pool] [--iterations M] [--work W]
//
// The total work (M iterations) is split evenly across the threads, so a run on 1, 2 or 4
// threads makes the same number of allocation calls and the per-event cost can be compared.
// Each iteration makes about 6 allocations and as many frees: a string (outside the SSO
// buffer) that replaces an older one in a ring, a vector grown by push_back, and a map node
// inserted while the oldest is erased once the map is full. Deterministic (xorshift RNG); the
// program prints a checksum so that nothing is optimised away.
//
// --pool runs the work on N new threads even when N is 1, as a worker does: its main thread
// allocates, starts a pool and then only waits for it.
//
// --work W adds program work between the allocations: W passes of a byte-wise hash over the
// new string (about 100 ns each), so that the allocation calls are a smaller share of the
// run, as in a program that does something with its memory. Without it the loop does little
// but allocate (about 20 ns of its own work per allocation call).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Rng {
  uint64_t s;
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
};

uint64_t g_work = 0;

uint64_t hash_passes(const std::string& s, uint64_t passes) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t p = 0; p < passes; ++p)
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

uint64_t churn(uint64_t iterations, uint64_t seed) {
  Rng rng{seed * 0x9E3779B97F4A7C15ull + 1};
  constexpr size_t kRing = 4096;
  constexpr size_t kMapMax = 2048;
  std::vector<std::string> ring(kRing);
  std::map<uint64_t, std::string> map;
  uint64_t sum = 0;
  for (uint64_t i = 0; i < iterations; ++i) {
    const uint64_t r = rng.next();
    // A string longer than the small-string buffer: one allocation, and one free of the
    // string it replaces in the ring.
    std::string s(24 + (r & 127), static_cast<char>('a' + (r >> 8) % 26));
    if (g_work) sum += hash_passes(s, g_work);
    ring[i % kRing] = std::move(s);
    // A short-lived vector grown one element at a time: a few reallocations.
    std::vector<uint32_t> v;
    const unsigned n = 1 + ((r >> 16) & 15);
    for (unsigned k = 0; k < n; ++k) v.push_back(static_cast<uint32_t>(r >> k));
    sum += v.back();
    // A map node (with a string value kept outside SSO) in, the oldest out when full.
    map.emplace(r, std::string(20 + ((r >> 24) & 31), 'x'));
    if (map.size() > kMapMax) map.erase(map.begin());
    sum += ring[(i * 7) % kRing].size();
  }
  return sum + map.size();
}

uint64_t parse(const char* s, const char* what) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (end == s || *end != '\0' || v == 0) {
    std::fprintf(stderr, "memtide-bench-churn: bad %s: %s\n", what, s);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t threads = 1;
  uint64_t iterations = 1000000;
  bool pool_always = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = parse(argv[++i], "thread count");
    } else if (std::strcmp(argv[i], "--pool") == 0) {
      pool_always = true;
    } else if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      iterations = parse(argv[++i], "iteration count");
    } else if (std::strcmp(argv[i], "--work") == 0 && i + 1 < argc) {
      g_work = parse(argv[++i], "work");
    } else {
      std::fprintf(stderr, "usage: memtide-bench-churn [--threads N] [--pool] [--iterations M] [--work W]\n");
      return 2;
    }
  }
  std::vector<uint64_t> sums(threads);
  if (threads == 1 && !pool_always) {
    sums[0] = churn(iterations, 1);
  } else {
    std::vector<std::thread> pool;
    for (uint64_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { sums[t] = churn(iterations / threads, t + 1); });
    for (auto& th : pool) th.join();
  }
  uint64_t total = 0;
  for (uint64_t s : sums) total += s;
  std::printf("checksum %llu\n", static_cast<unsigned long long>(total));
  return 0;
}
