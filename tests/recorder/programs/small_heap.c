/* A small heap for the tests of a tight address-space limit: prints its address-space size at
 * the start of main (VmSize, in KiB), then makes N allocations of 100 to 1099 bytes, frees two
 * in three, and prints how many it made.
 *   small_heap N */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long vm_size_kib(void) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmSize: %ld kB", &kib) == 1) break;
  if (f) fclose(f);
  return kib;
}

int main(int argc, char** argv) {
  printf("vmsize %ld\n", vm_size_kib());
  const long n = argc > 1 ? atol(argv[1]) : 20000;
  long made = 0;
  for (long i = 0; i < n; ++i) {
    char* p = malloc(100 + i % 1000);
    if (!p) break;
    memset(p, 1, 16);
    if (i % 3) free(p);
    ++made;
  }
  printf("made %ld\n", made);
  return 0;
}
