// A program whose executable defines malloc and free: the loader binds every module's calls
// (libc's included) to them. Attached, those blocks must not reach glibc's free: memtide attach
// refuses. Sleeps for argv[1] seconds, allocating now and then.
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Alignas(16) unsigned char heap[1 << 22];
static size_t used;

void* malloc(size_t n) {
  n = (n + 31) & ~(size_t)15;
  if (n > sizeof heap - used) return NULL;
  unsigned char* p = heap + used;
  used += n;
  *(size_t*)p = n - 16;
  return p + 16;
}
void free(void* p) { (void)p; }
void* calloc(size_t n, size_t size) {
  void* p = malloc(n * size);
  if (p) memset(p, 0, n * size);
  return p;
}
void* realloc(void* old, size_t n) {
  void* p = malloc(n);
  if (p && old) {
    size_t had = *(size_t*)((unsigned char*)old - 16);
    memcpy(p, old, had < n ? had : n);
  }
  return p;
}

int main(int argc, char** argv) {
  int seconds = argc > 1 ? atoi(argv[1]) : 30;
  for (int i = 0; i < seconds * 10; ++i) {
    free(malloc(100));
    usleep(100000);
  }
  return 0;
}
