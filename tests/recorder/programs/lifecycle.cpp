// One program, several ways to start and end a traced process:
//   lifecycle fork          parent allocates 5555 x2, forks; the child leaks 7777 x3 and exits;
//                           the parent then execs itself as `lifecycle exec-image`
//   lifecycle exec-image    leaks 8888 x2 and exits 0
//   lifecycle setuid-churn N (as root) drops to nobody, then allocates and frees N blocks
//   lifecycle fork-churn MS allocates and frees for MS ms, holding 64 blocks of 3333 bytes, and
//                           forks half-way: the child churns blocks of 4444 bytes for MS ms;
//                           both free everything and exit 0
//   lifecycle quick-exit    leaks 9999 x3, then _exit(3)
//   lifecycle abort         leaks 6666 x1, then abort()
//   lifecycle abort-timer   a 100 us interval timer whose SIGALRM handler siglongjmps out of
//                           whatever runs once three ticks passed since abort() was called;
//                           leaks 6666 x1 and aborts: dies of SIGABRT untraced (abort ends the
//                           program within a tick); prints "survived abort" if it does not
//   lifecycle small-stack N a thread with a 16 KiB stack recurses N frames of 256 bytes, each
//                           allocating and freeing a block; prints "small stack: N frames"
//   lifecycle small-stack-deep N [LIB]  the same, but only the deepest frame allocates: the
//                           first stack walk of the thread, and the first sight of its frames'
//                           code, is where the stack is nearly used up; with LIB (dlopened
//                           first, never called before), through LIB's dl_leak: the first
//                           sight of a whole module
//   lifecycle exit-thread   a second thread leaks 4444 x1 and calls exit(5) while main waits
//   lifecycle threads N     N short-lived threads, each leaking one 4321-byte block
//   lifecycle resident N    N threads at once, each making 2000 allocations (freed at once)
//                           from 16 call depths; while all of them are alive and done, prints
//                           "rss_kb <VmRSS of the process>"
//   lifecycle dlopen LIB    dlopen LIB, call its dl_leak(), dlclose it
//   lifecycle spin          allocates forever (1000 blocks of 3333 kept, the rest churned)
//   lifecycle big N         N x 1 MiB blocks written to, each followed by 2000 small blocks of
//                           pseudo-random sizes freed at once, then exits (fills a small disk)
//   lifecycle pause         leaks 2222 x1 before, 1111 x2 during and 3333 x1 after a pause; a
//                           block made before the pause is freed during it, another realloc'd
//   lifecycle closefds F    closes every descriptor above 2 (as daemons do), opens F for
//                           writing, allocates for a second, writes "program data" to F
//   lifecycle stacks        allocates on other stacks than the thread's own: in ucontext
//                           coroutines (switching back and forth, at several depths) and in a
//                           signal handler on a sigaltstack; frees everything, prints "stacks ok"
//   lifecycle slow-realloc [alone]  one thread reallocs a 256 MiB heap block (a copy of many
//                           flush periods) a few times while another thread keeps allocating
//                           (with `alone`, no other thread: each realloc's free reuses the time
//                           of the allocation just before it)
//   lifecycle callers N     N allocations by one function (alloc_here), called in an irregular
//                           order by via_a (3001 bytes) and via_b (3002 bytes), both from one
//                           call site: the same start of the walk, two stacks above it that
//                           differ in one frame; each block freed at once (prints "callers ok")
//   lifecycle clock N       N markers "m<i>" 1 ms apart, each between two CLOCK_MONOTONIC
//                           readings, printed as "m<i> <before> <after>" (ns)
//   lifecycle bursts N MS   one thread: N bursts of 20 mallocs of 5000+i bytes and their frees,
//                           each between two CLOCK_MONOTONIC readings printed as
//                           "b<i> <before> <after>" (ns), MS ms of sleep after each
//   lifecycle unmapping MS  a second thread maps, touches and unmaps memory and makes and frees
//                           large (mmap-served) blocks without a pause; main returns after MS ms,
//                           so the process exits (and a leak scan reads its memory) meanwhile
//   lifecycle idle-touch MS sleeps MS ms, writes to 64 MiB of a new block (printing
//                           "touch <before> <after>", CLOCK_MONOTONIC ns), sleeps MS ms, exits
//   lifecycle idle-resume MS  allocates, sleeps 300 ms, prints "wakes <n>": the voluntary context
//                           switches of its other threads (the recorder's writer) in MS ms more of
//                           sleep; then one block, 5 ms of sleep, and 50 blocks of 4242 bytes made
//                           and freed between two CLOCK_MONOTONIC readings printed as
//                           "burst <before> <after>"
//   lifecycle usable        malloc_usable_size of malloc/calloc/realloc/memalign blocks is at
//                           least what was asked (prints "usable ok")
//   lifecycle getattr N     N threads whose first allocation is glibc's own, inside their first
//                           call: pthread_getattr_np on themselves (as the JVM's threads do),
//                           which allocates while it holds the thread's lock; each then leaks
//                           one 5151-byte block (prints "getattr done")
//   lifecycle free-chunks N leaves N free chunks in glibc's bins (2N blocks of 16..520 bytes, every
//                           other one freed), then makes and frees 200,000 more blocks; prints
//                           "mallinfo calls <n>": the calls of mallinfo/mallinfo2 made by anyone
//                           in the process (this program defines both, so the recorder's would
//                           come here). glibc answers them by walking every free chunk with the
//                           arena's lock held, so each call stalls the program's allocations
//                           for a time that grows with its free chunks
//   lifecycle handler-malloc call|jmp  one thread; a 100 us interval timer whose SIGALRM handler
//                           mallocs and frees (call) or siglongjmps (jmp) out of whatever runs,
//                           while the thread mallocs and frees 20 M times: undefined behaviour
//                           that glibc ends with SIGABRT (or SIGSEGV) untraced as a rule;
//                           prints "survived" if it does not
//   lifecycle setuid        (as root) gives up its user and group ids for 65534's, then prints
//                           "uid <task> <real> <effective>" for every task of the process
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <grp.h>
#include <malloc.h>
#include <signal.h>
#include <pthread.h>
#include <setjmp.h>
#include <sys/time.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "memtide.h"

static void* volatile sink;

// mallinfo and mallinfo2, defined here so that every call of them in the process comes to this
// program (it precedes libc in the lookup scope), counted and passed on to libc's.
static std::atomic<long> g_mallinfo_calls{0};
extern "C" struct mallinfo2 mallinfo2() {
  g_mallinfo_calls.fetch_add(1);
  using Fn = struct mallinfo2 (*)();
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "mallinfo2"));
  return real ? real() : (struct mallinfo2){};
}
extern "C" struct mallinfo mallinfo() {
  g_mallinfo_calls.fetch_add(1);
  using Fn = struct mallinfo (*)();
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "mallinfo"));
  return real ? real() : (struct mallinfo){};
}

static void leak(size_t size, int n) {
  for (int i = 0; i < n; ++i) sink = malloc(size);
}

// Other stacks: two coroutines allocating at different depths, and a signal handler on an
// alternate stack.
static ucontext_t g_main_ctx, g_co_ctx[2];
static std::vector<void*> g_blocks;

__attribute__((noinline)) static void co_alloc(int depth) {
  if (depth > 0) {
    co_alloc(depth - 1);
    g_blocks.push_back(malloc(16 + static_cast<size_t>(depth)));
    return;
  }
  g_blocks.push_back(malloc(100));
}

static void co_body(int which) {
  for (int round = 0; round < 200; ++round) {
    co_alloc(round % 7 + which);
    swapcontext(&g_co_ctx[which], &g_main_ctx);
  }
}

static void on_usr1(int) {
  for (int i = 0; i < 10; ++i) g_blocks.push_back(malloc(48));
}

static int other_stacks() {
  g_blocks.reserve(100000);
  static char co_stack[2][256 * 1024];
  for (int c = 0; c < 2; ++c) {
    getcontext(&g_co_ctx[c]);
    g_co_ctx[c].uc_stack.ss_sp = co_stack[c];
    g_co_ctx[c].uc_stack.ss_size = sizeof co_stack[c];
    g_co_ctx[c].uc_link = &g_main_ctx;
    makecontext(&g_co_ctx[c], reinterpret_cast<void (*)()>(co_body), 1, c);
  }
  for (int round = 0; round < 200; ++round) {
    for (int c = 0; c < 2; ++c) {
      co_alloc(round % 3);  // the thread's own stack in between
      swapcontext(&g_main_ctx, &g_co_ctx[c]);
    }
  }
  static char alt[64 * 1024];
  stack_t ss{};
  ss.ss_sp = alt;
  ss.ss_size = sizeof alt;
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_handler = on_usr1;
  sa.sa_flags = SA_ONSTACK;
  sigaction(SIGUSR1, &sa, nullptr);
  for (int i = 0; i < 20; ++i) {
    raise(SIGUSR1);
    co_alloc(2);
  }
  for (void* p : g_blocks) free(p);
  std::printf("stacks ok %zu\n", g_blocks.size());
  return 0;
}

extern "C" __attribute__((noinline)) void* alloc_here(size_t size) {
  void* p = malloc(size);
  asm volatile("" : : "r"(p) : "memory");
  return p;
}
extern "C" __attribute__((noinline)) void* via_a(size_t size) {
  void* p = alloc_here(size);
  asm volatile("" : : "r"(p) : "memory");
  static_cast<char*>(p)[0] = 'a';
  return p;
}
extern "C" __attribute__((noinline)) void* via_b(size_t size) {
  void* p = alloc_here(size);
  asm volatile("" : : "r"(p) : "memory");
  static_cast<char*>(p)[1] = 'b';
  return p;
}

__attribute__((noinline)) static void at_depth(int d, int size) {
  if (d > 0) {
    at_depth(d - 1, size);
    sink = nullptr;  // (not a tail call)
    return;
  }
  void* p = malloc(static_cast<size_t>(size));
  sink = p;
  free(p);
}

static long vm_rss_kb() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
  std::fclose(f);
  return kb;
}

// CLOCK_MONOTONIC in ns, as the trace's times are.
static unsigned long long mono() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<unsigned long long>(ts.tv_sec) * 1000000000ull + static_cast<unsigned long long>(ts.tv_nsec);
}

// Voluntary context switches of every thread of the process but the calling one.
static unsigned long long others_switches() {
  unsigned long long total = 0;
  const long self = syscall(SYS_gettid);
  DIR* d = opendir("/proc/self/task");
  if (!d) return 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.' || std::atol(e->d_name) == self) continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
    FILE* f = std::fopen(path, "r");
    if (!f) continue;
    char line[256];
    unsigned long long n = 0;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "voluntary_ctxt_switches: %llu", &n) == 1) break;
    std::fclose(f);
    total += n;
  }
  closedir(d);
  return total;
}

static int resident(int n) {
  std::atomic<int> done{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) threads.emplace_back([&] {
    for (int i = 0; i < 2000; ++i) at_depth(i % 16, 64 + i % 512);
    done.fetch_add(1);
    while (!go.load()) usleep(1000);
  });
  while (done.load() < n) usleep(1000);
  std::printf("rss_kb %ld\n", vm_rss_kb());
  std::fflush(stdout);
  go.store(true);
  for (auto& t : threads) t.join();
  return 0;
}

static int callers(long n) {
  uint32_t x = 12345;
  for (long i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    const bool a = (x >> 16) & 1;
    void* (*volatile fn)(size_t) = a ? via_a : via_b;  // one call site: the stacks differ in one frame
    void* p = fn(a ? 3001 : 3002);
    free(p);
  }
  std::printf("callers ok\n");
  return 0;
}

// small-stack: each frame holds 256 bytes the compiler cannot drop (volatile), and allocates.
__attribute__((noinline)) int recurse_allocating(int left) {
  volatile char pad[256];
  pad[0] = static_cast<char>(left);
  void* p = malloc(24);
  const int below = left > 1 ? recurse_allocating(left - 1) : 0;
  free(p);
  return below + 1;
}

// small-stack-deep: as above, but only the deepest frame allocates (through `g_deep_alloc` when set).
void (*g_deep_alloc)() = nullptr;
__attribute__((noinline)) int recurse_then_allocate(int left) {
  volatile char pad[256];
  pad[0] = static_cast<char>(left);
  if (left > 1) {
    const int below = recurse_then_allocate(left - 1);
    pad[1] = static_cast<char>(below);  // (the frame stays live across the call: no loop made of it)
    return below + 1;
  }
  if (g_deep_alloc) {
    g_deep_alloc();
    return 1;
  }
  void* p = malloc(24);
  static_cast<volatile char*>(p)[0] = pad[0];
  free(p);
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* mode = argv[1];
  if (!std::strcmp(mode, "small-stack-deep") && argc > 2) {
    if (argc > 3) {
      void* lib = dlopen(argv[3], RTLD_NOW);
      if (!lib) return 4;
      g_deep_alloc = reinterpret_cast<void (*)()>(dlsym(lib, "dl_leak"));
      if (!g_deep_alloc) return 4;
    }
    static int depth = std::atoi(argv[2]);
    static int reached = 0;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 16384);
    pthread_t t;
    if (pthread_create(&t, &attr, [](void*) -> void* {
          reached = recurse_then_allocate(depth);
          return nullptr;
        }, nullptr) != 0)
      return 3;
    pthread_join(t, nullptr);
    std::printf("small stack: %d frames\n", reached);
    return 0;
  }
  if (!std::strcmp(mode, "small-stack") && argc > 2) {
    static int depth = std::atoi(argv[2]);
    static int reached = 0;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 16384);
    pthread_t t;
    if (pthread_create(&t, &attr, [](void*) -> void* {
          reached = recurse_allocating(depth);
          return nullptr;
        }, nullptr) != 0)
      return 3;
    pthread_join(t, nullptr);
    std::printf("small stack: %d frames\n", reached);
    return 0;
  }
  if (!std::strcmp(mode, "fork")) {
    void* a = malloc(5555);
    void* b = malloc(5555);
    const pid_t pid = fork();
    if (pid == 0) {
      leak(7777, 3);
      free(a);  // a block of the parent's: the child's trace has no alloc for it
      exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    free(a);
    free(b);
    execl(argv[0], argv[0], "exec-image", static_cast<char*>(nullptr));
    return 1;
  }
  if (!std::strcmp(mode, "fork-churn") && argc > 2) {
    // Allocates and frees for MS ms, holding 64 blocks of 3333 bytes; forks half-way, and the
    // child does the same with blocks of 4444 bytes (freeing the parent's as it goes) for MS ms.
    const long ms = std::atol(argv[2]);
    auto churn = [](size_t size, long for_ms, void** held) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(for_ms);
      for (unsigned i = 0; std::chrono::steady_clock::now() < until; ++i) {
        void*& p = held[i % 64];
        free(p);
        p = malloc(size);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    };
    static void* held[64] = {};
    churn(3333, ms / 2, held);
    const pid_t pid = fork();
    if (pid == 0) {
      churn(4444, ms, held);
      for (void*& p : held) free(p), p = nullptr;
      exit(0);
    }
    churn(3333, ms / 2, held);
    int status = 0;
    waitpid(pid, &status, 0);
    for (void*& p : held) free(p), p = nullptr;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  if (!std::strcmp(mode, "exec-image")) {
    leak(8888, 2);
    return 0;
  }
  if (!std::strcmp(mode, "quick-exit")) {
    leak(9999, 3);
    _exit(3);
  }
  if (!std::strcmp(mode, "abort")) {
    leak(6666, 1);
    abort();
  }
  if (!std::strcmp(mode, "handler-malloc") && argc > 2) {
    static sigjmp_buf env;
    static bool jump = !std::strcmp(argv[2], "jmp");
    signal(SIGALRM, [](int) {
      if (jump) siglongjmp(env, 1);
      free(malloc(64));
    });
    itimerval every{{0, 100}, {0, 100}};
    setitimer(ITIMER_REAL, &every, nullptr);
    void* keep[512] = {};
    for (long i = 0; i < 20000000; ++i) {
      if (jump) sigsetjmp(env, 1);
      free(keep[i & 511]);
      keep[i & 511] = malloc(16 + (i * 7919) % 4000);
    }
    std::puts("survived");
    return 0;
  }
  if (!std::strcmp(mode, "setuid-churn") && argc > 2) {
    // Started as root: drops to nobody (65534), then allocates and frees N blocks of varying
    // sizes, 256 held at a time; prints "done N".
    if (setgroups(0, nullptr) != 0 || setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)
      return 3;
    const long n = std::atol(argv[2]);
    void* held[256] = {};
    for (long i = 0; i < n; ++i) {
      void*& p = held[i & 255];
      free(p);
      p = malloc(16 + static_cast<size_t>((i * 7919) % 2000));
    }
    for (void*& p : held) free(p);
    std::printf("done %ld\n", n);
    return 0;
  }
  if (!std::strcmp(mode, "setuid")) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) return 3;
    DIR* tasks = opendir("/proc/self/task");
    if (!tasks) return 4;
    while (const dirent* e = readdir(tasks)) {
      if (e->d_name[0] == '.') continue;
      char path[64], line[256];
      std::snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
      FILE* f = std::fopen(path, "r");
      if (!f) continue;
      while (std::fgets(line, sizeof line, f)) {
        unsigned real = 0, eff = 0;
        if (std::sscanf(line, "Uid: %u %u", &real, &eff) == 2) std::printf("uid %s %u %u\n", e->d_name, real, eff);
      }
      std::fclose(f);
    }
    closedir(tasks);
    return 0;
  }
  if (!std::strcmp(mode, "abort-timer")) {
    static sigjmp_buf env;
    static volatile sig_atomic_t armed = 0, ticks = 0;
    signal(SIGALRM, [](int) {
      if (!armed) return;
      ticks = ticks + 1;
      if (ticks >= 3) siglongjmp(env, 1);
    });
    itimerval every{{0, 100}, {0, 100}};
    setitimer(ITIMER_REAL, &every, nullptr);
    leak(6666, 1);
    if (sigsetjmp(env, 1) == 0) {
      armed = 1;
      abort();
    }
    armed = 0;
    std::puts("survived abort");
    return 0;
  }
  if (!std::strcmp(mode, "exit-thread")) {
    std::thread t([] {
      leak(4444, 1);
      exit(5);
    });
    t.join();
    return 0;
  }
  if (!std::strcmp(mode, "threads") && argc > 2) {
    const int n = std::atoi(argv[2]);
    for (int i = 0; i < n; i += 50) {
      std::vector<std::thread> batch;
      for (int k = i; k < n && k < i + 50; ++k) batch.emplace_back([] {
        void* p = malloc(100);
        sink = p;
        free(p);
        leak(4321, 1);
      });
      for (auto& t : batch) t.join();
    }
    return 0;
  }
  if (!std::strcmp(mode, "resident") && argc > 2) return resident(std::atoi(argv[2]));
  if (!std::strcmp(mode, "dlopen") && argc > 2) {
    void* h = dlopen(argv[2], RTLD_NOW);
    if (!h) {
      std::fprintf(stderr, "%s\n", dlerror());
      return 1;
    }
    auto fn = reinterpret_cast<void (*)()>(dlsym(h, "dl_leak"));
    if (fn) fn();
    dlclose(h);
    return 0;
  }
  if (!std::strcmp(mode, "stacks")) return other_stacks();
  if (!std::strcmp(mode, "callers") && argc > 2) return callers(std::atol(argv[2]));
  if (!std::strcmp(mode, "slow-realloc")) {
    mallopt(M_MMAP_MAX, 0);  // heap blocks only: a realloc that cannot grow in place copies
    std::atomic<bool> stop{false};
    const bool alone = argc > 2 && !std::strcmp(argv[2], "alone");
    std::thread churn;
    if (!alone) {
      churn = std::thread([&] {
        while (!stop.load()) {
          void* p = malloc(64);
          sink = p;
          free(p);
        }
      });
    }
    size_t n = 256u << 20;
    char* big = static_cast<char*>(malloc(n));
    std::memset(big, 1, n);
    for (int i = 0; i < 3; ++i) {
      void* fence = malloc(4u << 20);  // at the top, after the block: it cannot grow in place
      sink = fence;
      n += 1u << 20;
      char* before = big;
      const auto t0 = std::chrono::steady_clock::now();
      big = static_cast<char*>(realloc(big, n));
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
      std::printf("realloc %s in %lld ms\n", big == before ? "in place" : "moved", static_cast<long long>(ms));
      std::memset(big, 2, n);
      free(fence);
    }
    free(big);
    stop.store(true);
    if (churn.joinable()) churn.join();
    std::printf("slow realloc ok\n");
    return 0;
  }
  if (!std::strcmp(mode, "unmapping") && argc > 2) {
    leak(1212, 3);
    std::thread([] {
      for (unsigned i = 0;; ++i) {
        const size_t n = (1u << 20) + (i % 7) * 4096;
        void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m != MAP_FAILED) {
          std::memset(m, 1, n);
          munmap(m, n);
        }
        void* big = malloc(256 * 1024 + i % 4096);
        sink = big;
        free(big);
      }
    }).detach();
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(argv[2])));
    std::printf("unmapping done\n");
    return 0;
  }
  // N threads allocating without pause (more than the machine's cores: the writer then gets
  // a share of the CPU like any of them), until killed.
  if (!std::strcmp(mode, "spin-threads") && argc > 2) {
    leak(3333, 1000);
    std::vector<std::thread> pool;
    for (int t = std::atoi(argv[2]); t > 0; --t)
      pool.emplace_back([] {
        for (;;) {
          void* p = malloc(64);
          sink = p;
          free(p);
        }
      });
    for (auto& t : pool) t.join();
    return 0;
  }
  if (!std::strcmp(mode, "spin")) {
    leak(3333, 1000);
    for (;;) {
      void* p = malloc(64);
      sink = p;
      free(p);
    }
  }
  if (!std::strcmp(mode, "pause")) {
    void* before = malloc(5050);
    void* moved = malloc(6060);
    leak(2222, 1);
    memtide_pause();
    leak(1111, 2);
    free(before);
    sink = realloc(moved, 60600);  // the old block's release is recorded, the new block is not
    memtide_resume();
    leak(3333, 1);
    return 0;
  }
  // Every descriptor closed (daemons do), by close, closefrom or close_range, by direct system
  // calls, or every number taken over by dup2; then the program's own file, and 400,000 blocks.
  if (!std::strcmp(mode, "closefds") && argc > 3) {
    const std::string how = argv[3];
    if (how == "close") {
      for (int fd = 3; fd < 1024; ++fd) close(fd);
    } else if (how == "closefrom") {
      closefrom(3);
    } else if (how == "close_range") {
      close_range(3, ~0u, 0);
    } else if (how == "syscall") {
      syscall(SYS_close_range, 3u, ~0u, 0u);
    } else if (how == "dup2") {
      const int null_fd = open("/dev/null", O_WRONLY);
      for (int fd = 3; fd < 1024; ++fd)
        if (fd != null_fd) dup2(null_fd, fd);
    } else {
      return 2;
    }
    FILE* f = std::fopen(argv[2], "w");
    if (!f) return 1;
    for (int i = 0; i < 400; ++i) {
      leak(100, 1000);
      usleep(2500);
    }
    std::fputs("program data\n", f);
    std::fclose(f);
    return 0;
  }
  if (!std::strcmp(mode, "free-chunks") && argc > 2) {
    const size_t n = std::strtoul(argv[2], nullptr, 10);
    std::vector<void*> blocks(2 * n);
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = malloc(16 + (i * 7919 % 64) * 8);
    for (size_t i = 0; i < blocks.size(); i += 2) free(blocks[i]);  // their neighbours stay: no merging
    for (int i = 0; i < 200000; ++i) {
      void* p = malloc(16 + (i * 31 % 64) * 8);
      sink = p;
      free(p);
      if (i % 1000 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    for (size_t i = 1; i < blocks.size(); i += 2) free(blocks[i]);
    std::printf("mallinfo calls %ld\n", g_mallinfo_calls.load());
    return 0;
  }
  if (!std::strcmp(mode, "getattr") && argc > 2) {
    const int n = std::atoi(argv[2]);
    std::vector<pthread_t> threads(static_cast<size_t>(n));
    for (pthread_t& t : threads) {
      pthread_create(&t, nullptr, [](void*) -> void* {
        pthread_attr_t attr;
        size_t size = 0;
        void* lo = nullptr;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
          pthread_attr_getstack(&attr, &lo, &size);
          pthread_attr_destroy(&attr);
        }
        sink = malloc(5151);
        return lo;
      }, nullptr);
    }
    for (pthread_t t : threads) pthread_join(t, nullptr);
    std::printf("getattr done\n");
    return 0;
  }
  if (!std::strcmp(mode, "usable")) {
    bool ok = true;
    for (size_t n : {size_t{1}, size_t{24}, size_t{100}, size_t{5000}, size_t{200000}}) {
      void* a = malloc(n);
      void* b = calloc(1, n);
      void* c = realloc(nullptr, n);
      void* d = memalign(64, n);
      for (void* p : {a, b, c, d}) ok = ok && malloc_usable_size(p) >= n;
      free(a);
      free(b);
      free(c);
      free(d);
    }
    std::printf(ok ? "usable ok\n" : "usable WRONG\n");
    return ok ? 0 : 1;
  }
  if (!std::strcmp(mode, "clock") && argc > 2) {
    const int n = std::atoi(argv[2]);
    for (int i = 0; i < n; ++i) {
      char label[32];
      std::snprintf(label, sizeof label, "m%d", i);
      const unsigned long long before = mono();
      memtide_mark(label);
      const unsigned long long after = mono();
      std::printf("%s %llu %llu\n", label, before, after);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return 0;
  }
  if (!std::strcmp(mode, "idle-resume") && argc > 2) {
    free(malloc(4241));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const unsigned long long w0 = others_switches();
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(argv[2])));
    const unsigned long long w1 = others_switches();
    // One event, then 5 ms: the burst must not take that event's time again.
    free(malloc(4243));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const unsigned long long before = mono();
    for (int i = 0; i < 50; ++i) {
      sink = malloc(4242);
      free(sink);
    }
    const unsigned long long after = mono();
    std::printf("wakes %llu\nburst %llu %llu\n", w1 - w0, before, after);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return 0;
  }
  if (!std::strcmp(mode, "idle-touch") && argc > 2) {
    const int ms = std::atoi(argv[2]);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    const size_t size = 64u << 20;
    const unsigned long long before = mono();
    char* p = static_cast<char*>(malloc(size));
    std::memset(p, 1, size);
    sink = p;
    const unsigned long long after = mono();
    std::printf("touch %llu %llu\n", before, after);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return 0;
  }
  if (!std::strcmp(mode, "bursts") && argc > 3) {
    const int n = std::atoi(argv[2]), ms = std::atoi(argv[3]);
    for (int i = 0; i < n; ++i) {
      void* blocks[20];
      const unsigned long long before = mono();
      for (void*& b : blocks) b = malloc(5000 + static_cast<size_t>(i));
      for (void* b : blocks) free(b);
      const unsigned long long after = mono();
      std::printf("b%d %llu %llu\n", i, before, after);
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
    return 0;
  }
  if (!std::strcmp(mode, "big") && argc > 2) {
    const int n = std::atoi(argv[2]);
    uint32_t x = 2463534242u;  // xorshift: sizes that do not compress away, so the trace grows
    for (int i = 0; i < n; ++i) {
      char* p = static_cast<char*>(malloc(1 << 20));
      std::memset(p, i, 1 << 20);
      sink = p;
      for (int k = 0; k < 2000; ++k) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        void* q = malloc(32 + x % 1024);
        sink = q;
        free(q);
      }
    }
    std::printf("big done\n");
    return 0;
  }
  return 2;
}
