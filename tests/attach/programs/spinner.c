// A program none of whose threads ever sleeps, for `memtide attach`: every thread spins in its
// own code and the C library's clock, allocating and freeing, and keeps two copies of a running
// value in vector registers that must stay equal (a call made on the thread that did not give
// its registers back would part them).
//
//   spinner READY THREADS   writes its pid to READY once every thread spins; stops when
//                           READY.stop exists; prints its allocations; exits 1 if the copies
//                           ever differed.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int g_running;
static atomic_int g_stop;
static atomic_int g_parted;
static atomic_long g_allocs;

static long now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000L + ts.tv_nsec / 1000;
}

static void* spin(void* arg) {
  (void)arg;
  double a = 1.0, b = 1.0;
  long n = 0;
  atomic_fetch_add(&g_running, 1);
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
    a = a * 1.0000001 + 1e-9;
    __asm__ volatile("" : "+x"(a));
    const long t = now_us();
    b = b * 1.0000001 + 1e-9;
    __asm__ volatile("" : "+x"(b));
    if (a != b) atomic_store(&g_parted, 1);
    if ((t & 63) == 0) {
      char* p = malloc(100 + (size_t)(t & 1023));
      p[0] = (char)t;
      free(p);
      ++n;
    }
  }
  atomic_fetch_add(&g_allocs, n);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const int threads = atoi(argv[2]);
  pthread_t t[64];
  for (int i = 0; i < threads && i < 64; ++i) pthread_create(&t[i], NULL, spin, NULL);
  while (atomic_load(&g_running) < threads) {
  }
  char path[4096];
  snprintf(path, sizeof path, "%s.tmp", argv[1]);
  FILE* f = fopen(path, "w");
  if (!f) return 2;
  fprintf(f, "%d\n", (int)getpid());
  if (fclose(f) != 0 || rename(path, argv[1]) != 0) return 2;
  snprintf(path, sizeof path, "%s.stop", argv[1]);
  for (long next = now_us() + 50000;;) {  // the main thread spins too
    if (now_us() < next) continue;
    if (access(path, F_OK) == 0) break;
    next = now_us() + 50000;
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < threads && i < 64; ++i) pthread_join(t[i], NULL);
  printf("allocations %ld\n", atomic_load(&g_allocs));
  return atomic_load(&g_parted) ? 1 : 0;
}
