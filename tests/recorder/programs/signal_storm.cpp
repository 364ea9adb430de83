// Two threads allocate and free in a loop while the main thread interrupts one of them with
// signals whose handler keeps it busy for a few milliseconds (and allocates nothing). Some
// signals land between the recorder reading the clock for a record and committing it, so that
// record is committed milliseconds after its time, while the writer thread goes on with its
// passes and the other thread with its records. A recorder whose watermark vouched for such a
// record before it was written lets it reach the file out of order.
//   signal_storm [SIGNALS]   (default 400; about 4 ms each)
//
//   signal_storm alloc MS    a handler that allocates (malloc and free of 4321 bytes, which
//                            nothing else allocates), signalled about every 20 us for MS
//                            milliseconds while the thread maps and unmaps anonymous memory
//                            (and allocates nothing, so that the handler's malloc is safe):
//                            many signals land inside the recorder's work on the mappings.
//                            Prints "handler allocations N".
//
//   signal_storm phases STORM_MS QUIET_MS READY   writes its pid to READY, storms as `alloc`
//                            for STORM_MS or until READY.stop exists, then writes READY.quiet
//                            and sleeps QUIET_MS with no signal (for `memtide attach` in each
//                            phase).
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>

namespace {

std::atomic<bool> g_stop{false};
std::atomic<long> g_handled{0};

long now_us() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000L + ts.tv_nsec / 1000;
}

void on_signal(int) {
  const long until = now_us() + 3000;  // busy, not asleep: the thread stays on its CPU
  while (now_us() < until) {
  }
  g_handled.fetch_add(1, std::memory_order_relaxed);
}

void churn(long* count) {
  void* keep[64] = {};
  unsigned i = 0;
  while (!g_stop.load(std::memory_order_relaxed)) {
    free(keep[i % 64]);
    keep[i % 64] = malloc(16 + i % 200);
    ++i;
  }
  for (void* p : keep) free(p);
  *count = i;
}

std::atomic<long> g_handler_allocs{0};

void on_alarm(int) {
  void* p = malloc(4321);
  static_cast<volatile char*>(p)[0] = 1;
  free(p);
  g_handler_allocs.fetch_add(1, std::memory_order_relaxed);
}

// The storm of `alloc` for `ms` milliseconds, or until the file `stop` exists (looked for every
// 50 ms when given); returns the handler's allocations.
long storm(long ms, const char* stop = nullptr) {
  struct sigaction sa = {};
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  // No first round without signals: the recorder resolves the unwind rules of these stacks
  // while the handler runs, and libdw's allocations for that are the recorder's own (they must
  // not hold the program's malloc when the handler calls it).
  sigaction(SIGPROF, &sa, nullptr);
  const long until = now_us() + ms * 1000;
  std::atomic<bool> done{false};
  const pthread_t target = pthread_self();
  std::thread signaller([&] {
    while (!done.load(std::memory_order_relaxed)) {
      pthread_kill(target, SIGPROF);
      const long next = now_us() + 20;
      while (now_us() < next) {
      }
    }
  });
  for (long next_look = now_us() + 50000; now_us() < until;) {
    if (stop && now_us() > next_look) {
      if (access(stop, F_OK) == 0) break;
      next_look = now_us() + 50000;
    }
    void* m = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED) munmap(m, 1 << 20);
  }
  done.store(true);
  signaller.join();
  signal(SIGPROF, SIG_IGN);  // (a signal still pending is dropped, not handled after the count)
  return g_handler_allocs.load();
}

int handler_allocs(long ms) {
  std::printf("handler allocations %ld\n", storm(ms));
  return 0;
}

bool write_file(const std::string& path, const std::string& text) {
  FILE* f = std::fopen((path + ".tmp").c_str(), "w");
  if (!f) return false;
  std::fputs(text.c_str(), f);
  return std::fclose(f) == 0 && std::rename((path + ".tmp").c_str(), path.c_str()) == 0;
}

int phases(long storm_ms, long quiet_ms, const std::string& ready) {
  if (!write_file(ready, std::to_string(getpid()) + "\n")) return 2;
  const long n = storm(storm_ms, (ready + ".stop").c_str());
  if (!write_file(ready + ".quiet", "quiet\n")) return 2;
  timespec ts{quiet_ms / 1000, (quiet_ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
  std::printf("handler allocations %ld\n", n);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::string_view(argv[1]) == "alloc") return handler_allocs(std::atol(argv[2]));
  if (argc > 4 && std::string_view(argv[1]) == "phases") return phases(std::atol(argv[2]), std::atol(argv[3]), argv[4]);
  const long signals = argc > 1 ? std::atol(argv[1]) : 400;
  struct sigaction sa = {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, nullptr);
  long a = 0, b = 0;
  std::thread target(churn, &a);
  std::thread other(churn, &b);
  for (long k = 0; k < signals; ++k) {
    pthread_kill(target.native_handle(), SIGUSR1);
    const long until = now_us() + 4000;
    while (now_us() < until) {
      timespec ts{0, 500000};
      nanosleep(&ts, nullptr);
    }
  }
  g_stop.store(true);
  target.join();
  other.join();
  std::printf("signals %ld handled %ld iterations %ld %ld\n", signals, g_handled.load(), a, b);
  return 0;
}
