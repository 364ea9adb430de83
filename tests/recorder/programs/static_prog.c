// A statically linked program (no program interpreter): LD_PRELOAD cannot reach it, and
// `memtide run` must say so rather than ask whether the program started.
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  char* volatile p = malloc(4000);
  p[0] = 1;
  printf("static %d\n", p[0]);
  free(p);
  return 4;
}
