// Two threads pass one address back and forth: the allocator thread mallocs a block, the
// releaser thread frees it, and the allocator's next malloc usually gets the same address.
// A recorder that orders events wrongly shows an address allocated twice or freed twice.
// Prints how many times the address was reused.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

int main(int argc, char** argv) {
  const long rounds = argc > 1 ? std::atol(argv[1]) : 300000;
  std::atomic<void*> to_free{nullptr};
  std::atomic<long> freed{0};
  std::atomic<bool> done{false};
  std::thread releaser([&] {
    for (;;) {
      if (void* p = to_free.exchange(nullptr, std::memory_order_acq_rel)) {
        free(p);
        freed.fetch_add(1, std::memory_order_release);
      } else if (done.load(std::memory_order_acquire)) {
        return;
      }
    }
  });
  long reused = 0;
  void* last = nullptr;
  for (long i = 0; i < rounds; ++i) {
    // Above the tcache sizes, so a block freed by the other thread goes back to this
    // thread's arena and is handed out again.
    void* p = malloc(2000);
    if (p == last) ++reused;
    last = p;
    to_free.store(p, std::memory_order_release);
    while (freed.load(std::memory_order_acquire) != i + 1) {
    }
  }
  done.store(true, std::memory_order_release);
  releaser.join();
  std::printf("rounds %ld reused %ld\n", rounds, reused);
  return 0;
}
