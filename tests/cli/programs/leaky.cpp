// leaky: a test program with exactly known leaks, temporaries and one mismatched free, for
// the end-to-end tests of `memtide report|check|flamegraph`.
//
//   leaky          leaks: leak_a 5 x 100 B (malloc), leak_b 1 x 4000 B (new[]),
//                  leak_c 3 x 64 B (malloc through the always-inline inlined_leak);
//                  churn: 1000 temporary malloc(48)/free pairs; one new[] released by free
//   leaky clean    the same work with everything freed (and no mismatch)
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

void* volatile sink;
void* keep[16];
int nkeep = 0;
bool clean = false;

__attribute__((noinline)) void leak_a() {
  for (int i = 0; i < 5; ++i) keep[nkeep++] = std::malloc(100);
}

__attribute__((noinline)) void leak_b() {
  char* p = new char[4000];
  std::memset(p, 1, 4000);
  keep[nkeep++] = p;
}

__attribute__((always_inline)) inline void* inlined_leak(std::size_t n) { return std::malloc(n); }

__attribute__((noinline)) void leak_c() {
  for (int i = 0; i < 3; ++i) keep[nkeep++] = inlined_leak(64);
}

__attribute__((noinline)) void churn() {
  for (int i = 0; i < 1000; ++i) {
    void* p = std::malloc(48);
    sink = p;
    std::free(p);
  }
}

__attribute__((noinline)) void mismatch() {
  int* a = new int[8];
  sink = a;
  if (clean) delete[] a;
  else std::free(a);  // new[] released by free: counted as a mismatch
}

}  // namespace

int main(int argc, char** argv) {
  clean = argc > 1 && std::strcmp(argv[1], "clean") == 0;
  churn();
  leak_a();
  leak_b();
  leak_c();
  mismatch();
  std::printf("leaky: %s\n", clean ? "clean" : "leaking");
  if (clean) {
    for (int i = 0; i < nkeep; ++i) {
      if (i == 5) delete[] static_cast<char*>(keep[i]);
      else std::free(keep[i]);
    }
  }
  return 0;
}
