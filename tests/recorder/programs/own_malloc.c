// A program with an allocator of its own: the loader binds every caller's malloc (libc's
// included) to the program's, ahead of LD_PRELOAD's, so no allocation reaches memtide's
// interposer, and the recorder must say so instead of writing an empty trace without a word.
// Like jemalloc (rustc's), the allocator maps memory while it holds its lock, and must not be
// entered again from there: the recorder, seeing that mmap, must not allocate (libc would do it
// with this allocator). Entered again, it says so and exits with status 99 (a real allocator
// would wait for its own lock for ever).
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static _Alignas(16) unsigned char heap[1 << 22];
static size_t used;
static int locked;

void* malloc(size_t n) {
  if (locked) {
    static const char msg[] = "own_malloc: malloc entered again from inside itself\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(99);
  }
  locked = 1;
  // A page for the allocator's own books, as an allocator growing its arena would map.
  void* page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page != MAP_FAILED) munmap(page, 4096);
  n = (n + 15) & ~(size_t)15;
  unsigned char* p = NULL;
  if (n <= sizeof heap - 16 - used) {
    p = heap + used + 16;
    memcpy(p - 16, &n, sizeof n);
    used += n + 16;
  }
  locked = 0;
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
