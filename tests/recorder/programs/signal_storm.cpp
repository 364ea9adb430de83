// Two threads allocate and free in a loop while the main thread interrupts one of them with
// signals whose handler keeps it busy for a few milliseconds (and allocates nothing). Some
// signals land between the recorder reading the clock for a record and committing it, so that
// record is committed milliseconds after its time, while the writer thread goes on with its
// passes and the other thread with its records. A recorder whose watermark vouched for such a
// record before it was written lets it reach the file out of order.
//   signal_storm [SIGNALS]   (default 400; about 4 ms each)
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
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

}  // namespace

int main(int argc, char** argv) {
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
