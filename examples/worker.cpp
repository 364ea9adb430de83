// memtide-example-worker: a small long-running service, for trying memtide out.
//
// It handles "requests" in a loop: each parses a message into a map of strings, builds a
// response and throws both away (steady churn). One request in 50 also stores its session in
// a cache that is never trimmed (memory that grows for as long as the worker runs, released
// only at exit), and one in 1000 writes an audit line into a buffer that nobody frees (a leak).
// Every second it marks the timeline (memtide_mark) with the number of requests handled.
//
//   memtide-example-worker [--seconds N] [--threads N] [--requests N] [--rate R]
//   (--requests: exactly N requests, the same work every run, however long it takes;
//    --rate: at most R requests a second, a service's steady load)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "memtide.h"

namespace {

struct Session {
  std::string user;
  std::vector<char> scratch;
};

std::mutex cache_mutex;
std::vector<std::unique_ptr<Session>> session_cache;  // grows forever: the leak to find

std::map<std::string, std::string> parse_request(unsigned long id) {
  std::map<std::string, std::string> fields;
  for (int i = 0; i < 8; ++i) fields["field-" + std::to_string(i)] = "value " + std::to_string(id * 31 + i);
  return fields;
}

std::string build_response(const std::map<std::string, std::string>& fields) {
  std::string out;
  for (const auto& [k, v] : fields) out += k + "=" + v + ";";
  return out;
}

__attribute__((noinline)) void write_audit_line(unsigned long id) {
  char* line = new char[128];
  std::snprintf(line, 128, "request %lu handled", id);
  // ... handed to a logger that copies it and forgets to release the original.
}

__attribute__((noinline)) void remember_session(unsigned long id) {
  auto s = std::make_unique<Session>();
  s->user = "user-" + std::to_string(id);
  s->scratch.resize(512);
  std::lock_guard<std::mutex> lock(cache_mutex);
  session_cache.push_back(std::move(s));
}

unsigned long handle_request(unsigned long id) {
  const auto fields = parse_request(id);
  const std::string response = build_response(fields);
  if (id % 50 == 0) remember_session(id);
  if (id % 1000 == 0) write_audit_line(id);
  return response.size();
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  int threads = 2;
  unsigned long requests = 0;  // 0: as many as fit in the time
  double rate = 0;             // requests per second over all threads; 0: as fast as it can
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--requests") && i + 1 < argc) requests = std::strtoul(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--rate") && i + 1 < argc) rate = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "usage: memtide-example-worker [--seconds N] [--threads N] [--requests N] [--rate R]\n");
      return 2;
    }
  }
  if (threads < 1 || threads > 64 || !(seconds > 0) || rate < 0) {
    std::fprintf(stderr, "memtide-example-worker: bad --seconds or --threads\n");
    return 2;
  }
  std::atomic<unsigned long> handled{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      unsigned long id = static_cast<unsigned long>(t);
      unsigned long bytes = 0;
      const auto begin = std::chrono::steady_clock::now();
      unsigned long done = 0;
      // With --requests: exactly that many, request ids 0..N-1 shared out among the threads
      // (the same work every run), and the time limit does not apply.
      while (requests ? id < requests : !stop.load(std::memory_order_relaxed)) {
        bytes += handle_request(id);
        id += static_cast<unsigned long>(threads);
        if (rate > 0)  // paced: this thread's share of the rate
          std::this_thread::sleep_until(begin + std::chrono::duration<double>(++done * threads / rate));
        handled.fetch_add(1, std::memory_order_relaxed);
      }
      if (bytes == 0) std::puts("");  // keep the work observable
    });
  }
  const auto start = std::chrono::steady_clock::now();
  for (int tick = 1; !requests; ++tick) {
    std::this_thread::sleep_until(start + std::chrono::milliseconds(static_cast<long>(std::min<double>(tick, seconds) * 1000)));
    char label[64];
    std::snprintf(label, sizeof label, "tick %d: %lu requests", tick, handled.load());
    memtide_mark(label);
    if (tick >= seconds) break;
  }
  stop = true;
  for (auto& th : pool) th.join();
  std::printf("handled %lu requests, %zu sessions cached\n", handled.load(), session_cache.size());
  return 0;
}
