// A program not built position-independent that takes malloc's address: the loader gives it a
// stub of its own as malloc's canonical address, which dlsym finds first, yet every call still
// reaches the interposer (node is such a program). It must not be taken for one with its own
// allocator.
#include <stdio.h>
#include <stdlib.h>

void* (*volatile allocate)(size_t);

int main(void) {
  allocate = malloc;  // an immediate in the code: the link gives the program a canonical stub
  char* p = allocate(4000);
  p[0] = 1;
  printf("address %d\n", p[0]);
  free(p);
  return 0;
}
