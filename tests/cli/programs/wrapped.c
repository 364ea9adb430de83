// wrapped: allocates through wrappers, as redis does through zmalloc: zmalloc (a name on the
// built-in list of allocation functions) and pool_take (a name of its own, which only
// `--alloc-fn` makes one). Leaks 3 blocks of 100 bytes from create_object through zmalloc and
// 2 blocks of 300 bytes from load_config through pool_take; frees the rest.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) void* zmalloc(size_t n) {
  void* p = malloc(n);
  if (!p) abort();
  memset(p, 0, n);
  return p;
}

__attribute__((noinline)) void* pool_take(size_t n) { return zmalloc(n); }

static void* kept[8];

__attribute__((noinline)) void create_object(int i) { kept[i] = zmalloc(100); }

__attribute__((noinline)) void load_config(int i) { kept[4 + i] = pool_take(300); }

__attribute__((noinline)) void scratch(void) { free(zmalloc(50)); }

int main(void) {
  for (int i = 0; i < 3; ++i) create_object(i);
  for (int i = 0; i < 2; ++i) load_config(i);
  for (int i = 0; i < 10; ++i) scratch();
  printf("leaked %p %p\n", kept[0], kept[4]);
  return 0;
}
