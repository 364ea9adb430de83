// A service-like program for bench/attach.sh: what an attach costs it, seen from inside.
//
//   memtide-bench-attach-probe [--threads N] [--seconds S] [--ready FILE]
//
// N threads handle "requests" (a map of strings built, a response string, both thrown away:
// about 40 allocations each) as fast as they can; every 250 ms the program prints
// `rate T_MS REQUESTS_PER_S CPU_NS_PER_REQUEST` for the interval that ended at T_MS (since its
// start; the process's CPU time, every thread's, the recorder's included). A ticker
// thread sleeps 1 ms at a time and notes the longest time between two of its wakes: how long
// the process was held, printed at the end as `max_gap_ms G at T_MS`. FILE is written once
// the threads run.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <time.h>
#include <unistd.h>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

unsigned long handle(unsigned long id) {
  std::map<std::string, std::string> fields;
  for (int i = 0; i < 8; ++i) fields["field-" + std::to_string(i)] = "value " + std::to_string(id * 31 + i);
  std::string out;
  for (const auto& [k, v] : fields) out += k + "=" + v + ";";
  return out.size();
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  double seconds = 10;
  const char* ready = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--ready")) ready = argv[i + 1];
  }
  std::atomic<unsigned long> handled{0};
  std::atomic<bool> stop{false};
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      unsigned long sum = 0;
      for (unsigned long id = t; !stop.load(std::memory_order_relaxed); id += threads) {
        sum += handle(id);
        handled.fetch_add(1, std::memory_order_relaxed);
      }
      if (sum == 1) std::puts("");
    });
  double max_gap = 0, max_gap_at = 0;
  std::thread ticker([&] {
    auto last = Clock::now();
    while (!stop.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const auto now = Clock::now();
      const double gap = std::chrono::duration<double, std::milli>(now - last).count();
      if (gap > max_gap) {
        max_gap = gap;
        max_gap_at = std::chrono::duration<double, std::milli>(now - start).count();
      }
      last = now;
    }
  });
  if (ready) std::ofstream(ready) << getpid() << "\n";
  // CPU time per request is what the recording adds; requests per second also depends on
  // what else the machine runs.
  auto cpu_ns = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
  };
  unsigned long before = 0;
  double cpu_before = cpu_ns();
  for (int tick = 1; tick * 0.25 <= seconds; ++tick) {
    std::this_thread::sleep_until(start + std::chrono::milliseconds(250 * tick));
    const unsigned long now = handled.load();
    const double cpu = cpu_ns();
    std::printf("rate %d %lu %.0f\n", 250 * tick, (now - before) * 4, now > before ? (cpu - cpu_before) / (now - before) : 0.0);
    std::fflush(stdout);
    before = now;
    cpu_before = cpu;
  }
  stop = true;
  for (auto& th : pool) th.join();
  ticker.join();
  std::printf("max_gap_ms %.1f at %.0f\n", max_gap, max_gap_at);
  return 0;
}
