// A program with an allocator of its own: the loader binds every caller's malloc (libc's
// included) to the program's, ahead of LD_PRELOAD's, so no allocation reaches memtide's
// interposer and the recorder must say so instead of writing an empty trace without a word.
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static _Alignas(16) unsigned char heap[1 << 22];
static size_t used;

void* malloc(size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n > sizeof heap - 16 - used) return NULL;
  unsigned char* p = heap + used + 16;
  memcpy(p - 16, &n, sizeof n);
  used += n + 16;
  return p;  // never handed out before: zero, as calloc needs
}
void free(void* p) { (void)p; }
void* calloc(size_t a, size_t b) { return b && a > SIZE_MAX / b ? NULL : malloc(a * b); }
void* realloc(void* p, size_t n) {
  void* q = malloc(n);
  if (q && p) {
    size_t old;
    memcpy(&old, (unsigned char*)p - 16, sizeof old);
    memcpy(q, p, old < n ? old : n);
  }
  return q;
}

int main(void) {
  char* volatile p = malloc(4000);
  p[0] = 1;
  printf("own %d\n", p[0]);
  free(p);
  return 0;
}
