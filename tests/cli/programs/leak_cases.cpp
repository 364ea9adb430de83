// Programs whose leaks are known exactly, one per way an exit scan can be wrong (the leak gate's
// cases: tests/cli/leak_cases_test.py). Built without optimisation, so that stale pointers stay in
// dead stack frames as they do in a debug build.
//
//   leak_cases CASE      the case's program; exits 0
//
// Each case's verdict, as LeakSanitizer and valgrind's memcheck give it, is in the test.
#include <alloca.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace {

// --- A pointer left in a dead frame --------------------------------------------------------
__attribute__((noinline)) void* make(size_t n) {
  void* volatile p = malloc(n);
  memset(p, 0x5a, n);
  return p;
}

__attribute__((noinline)) void deep(size_t n) {
  void* volatile p = make(n);  // dropped: the only copies are in this frame and make's
  (void)p;
}

// The stale copies lie below `pad` bytes of this frame, where a shallow call made later does not
// overwrite them.
__attribute__((noinline)) void drop(size_t n, size_t pad) {
  volatile char* room = static_cast<volatile char*>(alloca(pad));
  for (size_t i = 0; i < pad; i += 64) room[i] = 0;
  deep(n);
}

int stale_stack() {
  drop(77, 512);
  return 0;
}

int stale_stack_exit() {
  drop(77, 512);
  exit(0);
}

// Another thread leaves the pointer in a dead frame, then waits for ever.
std::atomic<int> g_ready{0};

void* stale_then_wait(void*) {
  drop(77, 16384);  // (below the signal frame that stops this thread)
  g_ready.store(1);
  for (;;) pause();
}

int thread_stale_stack() {
  pthread_t t;
  pthread_create(&t, nullptr, stale_then_wait, nullptr);
  while (!g_ready.load()) usleep(100);
  return 0;
}

// --- Threads that free at exit ---------------------------------------------------------------
struct Work {
  char* buffers[4];
};
std::atomic<bool> g_stop{false};

void* free_at_exit(void* arg) {
  auto* w = static_cast<Work*>(arg);
  g_ready.fetch_add(1);
  while (!g_stop.load(std::memory_order_relaxed)) {
    char* b = static_cast<char*>(malloc(48));  // churn while waiting
    b[0] = 1;
    free(b);
  }
  for (char*& b : w->buffers) {
    free(b);
    b = nullptr;
  }
  free(w);
  return nullptr;
}

int detached_free() {
  constexpr int kThreads = 8;
  for (int i = 0; i < kThreads; ++i) {
    auto* w = static_cast<Work*>(malloc(sizeof(Work)));
    for (char*& b : w->buffers) b = static_cast<char*>(malloc(100));
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    pthread_create(&t, &a, free_at_exit, w);
    pthread_attr_destroy(&a);
  }
  while (g_ready.load() < kThreads) usleep(100);
  g_stop.store(true);
  return 0;  // the threads free their work as the process exits
}

// A pool whose workers take tasks from a queue and free them; the program exits with tasks in
// the queue and workers busy.
struct Task {
  Task* next;
  char* payload;
};
pthread_mutex_t g_queue_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_queue_cond = PTHREAD_COND_INITIALIZER;
Task* g_queue = nullptr;

void* pool_worker(void*) {
  for (;;) {
    pthread_mutex_lock(&g_queue_lock);
    while (!g_queue) pthread_cond_wait(&g_queue_cond, &g_queue_lock);
    Task* t = g_queue;
    g_queue = t->next;
    pthread_mutex_unlock(&g_queue_lock);
    char* copy = static_cast<char*>(malloc(64));
    memcpy(copy, t->payload, 64);
    free(t->payload);
    free(t);
    free(copy);
  }
}

int pool() {
  for (int i = 0; i < 4; ++i) {
    pthread_t t;
    pthread_create(&t, nullptr, pool_worker, nullptr);
  }
  for (int i = 0; i < 20000; ++i) {
    auto* t = static_cast<Task*>(malloc(sizeof(Task)));
    t->payload = static_cast<char*>(calloc(1, 64));
    pthread_mutex_lock(&g_queue_lock);
    t->next = g_queue;
    g_queue = t;
    pthread_cond_signal(&g_queue_cond);
    pthread_mutex_unlock(&g_queue_lock);
  }
  return 0;
}

// --- Leaks handed to threads and returned by them ---------------------------------------------
void* drops_arg(void*) { return nullptr; }
void* returns_block(void*) { return make(24); }

int thread_args() {
  for (int i = 0; i < 50; ++i) {
    pthread_t t;
    pthread_create(&t, nullptr, drops_arg, make(16));
    pthread_join(t, nullptr);
    pthread_create(&t, nullptr, returns_block, nullptr);
    pthread_join(t, nullptr);  // the result is dropped
  }
  return 0;  // 50 x 16 + 50 x 24 bytes leaked in 100 blocks
}

// --- Blocks the scan must see ------------------------------------------------------------------
void* g_held;

int protected_block() {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, 3 * 4096) != 0) return 1;
  memset(p, 1, 3 * 4096);
  mprotect(p, 4096, PROT_READ);  // its first page read-only
  g_held = p;
  return 0;
}

int zero_size() {
  void* volatile p = malloc(0);
  p = nullptr;
  (void)p;
  return 0;
}

struct WithDestructor {
  ~WithDestructor() { g_held = nullptr; }
};
WithDestructor* g_empty_array;

int new_array0() {
  g_empty_array = new WithDestructor[0];  // points past the element count
  return 0;
}

// --- The program's own suppressions, where LeakSanitizer users keep them ---------------------------
__attribute__((noinline)) void hidden_leak() {
  void* volatile p = malloc(31);
  p = nullptr;
  (void)p;
}

__attribute__((noinline)) void shown_leak() {
  void* volatile p = malloc(33);
  p = nullptr;
  (void)p;
}

int default_suppressions() {
  hidden_leak();
  shown_leak();
  return 0;
}

}  // namespace

extern "C" const char* __lsan_default_suppressions() { return "# the program's own\nleak:hidden_leak\n"; }

int main(int argc, char** argv) {
  const char* c = argc > 1 ? argv[1] : "";
  if (!strcmp(c, "stale-stack")) return stale_stack();
  if (!strcmp(c, "stale-stack-exit")) return stale_stack_exit();
  if (!strcmp(c, "thread-stale-stack")) return thread_stale_stack();
  if (!strcmp(c, "detached-free")) return detached_free();
  if (!strcmp(c, "pool")) return pool();
  if (!strcmp(c, "thread-args")) return thread_args();
  if (!strcmp(c, "protected-block")) return protected_block();
  if (!strcmp(c, "zero-size")) return zero_size();
  if (!strcmp(c, "new-array0")) return new_array0();
  if (!strcmp(c, "default-suppressions")) return default_suppressions();
  fprintf(stderr, "leak_cases: unknown case '%s'\n", c);
  return 2;
}
