// The exit scan's workload (bench/exit_scan.sh): holds MB megabytes of the heap, written, in
// blocks of 4 KiB chained from a global (every block reachable, each holding pointers), with
// THREADS threads waiting for the end; then returns from main.
//   memtide-bench-exit-scan MB THREADS
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace {
void** g_head = nullptr;
// Never destroyed: a condition variable with waiters cannot be (its destructor at exit would
// wait for them).
std::mutex* g_lock = new std::mutex;
std::condition_variable* g_cond = new std::condition_variable;
}  // namespace

int main(int argc, char** argv) {
  const long mb = argc > 1 ? std::atol(argv[1]) : 100;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 0;
  constexpr std::size_t kBlock = 4096;
  for (long i = 0; i < mb * 1024 * 1024 / static_cast<long>(kBlock); ++i) {
    auto** b = static_cast<void**>(std::malloc(kBlock));
    std::memset(b, 0x11, kBlock);
    b[0] = g_head;
    g_head = b;
  }
  std::vector<std::thread> waiting;
  for (int i = 0; i < threads; ++i)
    waiting.emplace_back([] {
      std::unique_lock<std::mutex> l(*g_lock);
      g_cond->wait(l, [] { return false; });  // until the process ends
    });
  for (auto& t : waiting) t.detach();
  return 0;
}
