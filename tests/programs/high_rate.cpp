// high_rate THREADS EVENTS: THREADS threads each make EVENTS allocations as fast as they can,
// each freed a few allocations later by the thread that made it or handed to the next thread
// and freed there; everything is freed before the program ends. Prints "done N" (the
// allocations made) and exits 0.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr int kRing = 16;

struct alignas(64) Mailbox {
  std::atomic<void*> slot{nullptr};
};

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 8;
  const long events = argc > 2 ? std::atol(argv[2]) : 100000;
  if (threads < 1 || events < 1) return 2;
  std::vector<Mailbox> boxes(static_cast<size_t>(threads));
  std::atomic<long> made{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      void* ring[kRing] = {};
      unsigned long seed = static_cast<unsigned long>(t) * 7919 + 1;
      for (long i = 0; i < events; ++i) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        void* p = std::malloc(16 + (seed >> 52) % 1000);
        static_cast<volatile char*>(p)[0] = 1;
        if (seed & (1ULL << 40)) {  // handed to the next thread, which frees what it finds
          if (void* old = boxes[static_cast<size_t>((t + 1) % threads)].slot.exchange(p)) std::free(old);
        } else {
          std::free(ring[i % kRing]);
          ring[i % kRing] = p;
        }
        if (void* mine = boxes[static_cast<size_t>(t)].slot.exchange(nullptr)) std::free(mine);
      }
      for (void* p : ring) std::free(p);
      made.fetch_add(events);
    });
  for (std::thread& th : pool) th.join();
  for (Mailbox& b : boxes) std::free(b.slot.exchange(nullptr));
  std::printf("done %ld\n", made.load());
  return 0;
}
