// as_limit MB: first thing in main, lowers RLIMIT_AS to the address space the process has mapped
// plus MB megabytes; then makes 100,000 allocations of 64 bytes (each freed), then allocations
// of 1 MiB until malloc fails (all freed after). Prints "done N" (the allocations that
// succeeded) and exits 0.
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

static unsigned long mapped_bytes(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (f) {
    if (fscanf(f, "%lu", &pages) != 1) pages = 0;
    fclose(f);
  }
  return pages * 4096;
}

int main(int argc, char** argv) {
  const unsigned long mb = argc > 1 ? strtoul(argv[1], NULL, 10) : 32;
  const struct rlimit r = {mapped_bytes() + (mb << 20), mapped_bytes() + (mb << 20)};
  if (setrlimit(RLIMIT_AS, &r) != 0) return 2;
  long made = 0;
  for (int i = 0; i < 100000; ++i) {
    void* p = malloc(64);
    if (p) ++made;
    free(p);
  }
  void* held[4096];
  int n = 0;
  while (n < 4096 && (held[n] = malloc(1 << 20)) != NULL) ++n, ++made;
  while (n > 0) free(held[--n]);
  printf("done %ld\n", made);
  return 0;
}
