/* A program whose allocator is a bump allocator of 10,000 bytes in the executable, as small
 * embedded-style programs have: a request it cannot serve ends the program (status 98). It
 * uses about 4,200 bytes itself (its stdout buffer, one string): under the preload it must run
 * as it does untraced, so the recorder's start-up may not take the rest (libstdc++'s emergency
 * pool alone asks for 72 KiB). Prints what it used. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static _Alignas(16) unsigned char heap[10000];
static size_t used;

void* malloc(size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n > sizeof heap - used) {
    static const char msg[] = "tiny_malloc: out of memory\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(98);
  }
  void* p = heap + used;
  used += n;
  return p;
}
void free(void* p) { (void)p; }
void* calloc(size_t a, size_t b) {
  void* p = malloc(a * b);
  memset(p, 0, a * b);
  return p;
}
void* realloc(void* p, size_t n) {
  void* q = malloc(n);
  if (p) memcpy(q, p, n);
  return q;
}

int main(void) {
  char* s = malloc(100);
  strcpy(s, "hello");
  puts(s);
  return 0;
}
