// What a clock reading costs on this machine, the figure behind the recorder's time sharing
// (recorder/clock.h): CPU ns per loop iteration of a few loads and stores, with no reading, a
// bare RDTSC, LFENCE + RDTSC (the recorder's ordered reading) and RDTSCP.
//
//   memtide-bench-tsc [ITERATIONS]   (default 20,000,000; three rounds)
#include <x86intrin.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace {

volatile uint64_t g_sink;
uint64_t g_buf[4096];

double cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

template <int Kind>
double per_iteration(long n) {
  const double t0 = cpu_ns();
  uint64_t acc = 0, x = 1;
  for (long i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const uint64_t v = g_buf[x & 4095];
    g_buf[(x >> 12) & 4095] = v + static_cast<uint64_t>(i);
    uint64_t t = 0;
    if constexpr (Kind == 1) t = __rdtsc();
    if constexpr (Kind == 2) {
      _mm_lfence();
      t = __rdtsc();
    }
    if constexpr (Kind == 3) {
      unsigned aux;
      t = __rdtscp(&aux);
    }
    acc += t + v;
  }
  g_sink = acc;
  return (cpu_ns() - t0) / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 20000000;
  if (n <= 0) {
    std::fprintf(stderr, "usage: memtide-bench-tsc [ITERATIONS]\n");
    return 2;
  }
  for (int round = 0; round < 3; ++round)
    std::printf("CPU ns per iteration: none %.2f  rdtsc %.2f  lfence+rdtsc %.2f  rdtscp %.2f\n", per_iteration<0>(n),
                per_iteration<1>(n), per_iteration<2>(n), per_iteration<3>(n));
  return 0;
}
