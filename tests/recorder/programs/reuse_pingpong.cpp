// Threads that hand addresses to each other, for the ordering tests. A recorder that orders
// events wrongly shows an address allocated twice or freed twice.
//
//   reuse_pingpong [ROUNDS]          two threads pass one address back and forth: the allocator
//                                    thread mallocs a block, the releaser thread frees it, and the
//                                    allocator's next malloc usually gets the same address.
//                                    Prints "rounds R reused N".
//   reuse_pingpong handoff TURNS MS  two threads take turns of MS milliseconds (longer than the
//                                    writer's clock tick, so each turn has ticks where one thread
//                                    records alone): in its turn a thread replaces the blocks of a
//                                    shared table, freeing what the other allocated and getting
//                                    the other's freed addresses back. Prints "turns T reused N"
//                                    (N: mallocs that returned an address the other thread freed).
//   reuse_pingpong pool EVENTS       a worker's shape: the main thread allocates, starts one
//                                    thread that mallocs and frees EVENTS times, and waits for it.
//   reuse_pingpong ring THREADS N    THREADS threads in a ring, each mallocs N blocks and hands
//                                    each to the next thread, which frees it. Prints "ring T N".
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace {

int pingpong(long rounds) {
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

// The addresses one thread freed in its last turn. Fixed room and cleared by generation, so
// that a turn makes no allocation of its own: its first events are the table's, the ones a
// wrong order would show.
class AddressSet {
 public:
  AddressSet() : slots_(kRoom) {}
  void clear() { ++generation_; }
  void insert(void* p) {
    for (size_t i = hash(p);; i = (i + 1) % kRoom) {
      Slot& s = slots_[i];
      if (s.generation != generation_ || s.address == p) {
        s = {p, generation_};
        return;
      }
    }
  }
  bool contains(void* p) const {
    for (size_t i = hash(p);; i = (i + 1) % kRoom) {
      const Slot& s = slots_[i];
      if (s.generation != generation_) return false;
      if (s.address == p) return true;
    }
  }

 private:
  static constexpr size_t kRoom = 1 << 20;  // (far more than one turn frees)
  struct Slot {
    void* address = nullptr;
    unsigned generation = 0;
  };
  static size_t hash(void* p) { return (reinterpret_cast<uintptr_t>(p) >> 4) * 0x9E3779B97F4A7C15ull >> 44; }
  std::vector<Slot> slots_;
  unsigned generation_ = 1;
};

int handoff(int turns, int turn_ms) {
  // Blocks above the tcache sizes go back to the arena of the thread that allocated them, so
  // the next turn of that thread gets the addresses the other one freed.
  constexpr size_t kSlots = 64, kSize = 2000;
  std::vector<void*> table(kSlots, nullptr);
  std::mutex m;
  std::condition_variable cv;
  int turn = 0;
  long reused = 0;
  AddressSet freed_by[2];
  auto player = [&](int me) {
    for (;;) {
      std::unique_lock<std::mutex> lock(m);
      cv.wait(lock, [&] { return turn >= turns || turn % 2 == me; });
      if (turn >= turns) return;
      AddressSet& mine = freed_by[me];
      const AddressSet& theirs = freed_by[1 - me];
      mine.clear();
      const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(turn_ms);
      for (size_t i = 0; i < kSlots || std::chrono::steady_clock::now() < end; ++i) {
        void*& slot = table[i % kSlots];
        if (slot) mine.insert(slot);
        free(slot);
        slot = malloc(kSize);
        if (theirs.contains(slot)) ++reused;
      }
      ++turn;
      cv.notify_all();
    }
  };
  std::thread a(player, 0), b(player, 1);
  a.join();
  b.join();
  for (void* p : table) free(p);
  std::printf("turns %d reused %ld\n", turns, reused);
  return 0;
}

int pool(long events) {
  std::vector<void*> kept;
  for (int i = 0; i < 100; ++i) kept.push_back(malloc(64 + i));
  std::thread worker([events] {
    void* ring[16] = {};
    for (long i = 0; i < events / 2; ++i) {
      free(ring[i % 16]);
      ring[i % 16] = malloc(32 + (i % 7) * 16);
    }
    for (void* p : ring) free(p);
  });
  worker.join();
  for (void* p : kept) free(p);
  std::printf("pool done\n");
  return 0;
}

}  // namespace

int ring(int threads, long n) {
  // One slot per thread: the block its left neighbour handed it, taken by the thread itself.
  std::vector<std::atomic<void*>> slots(static_cast<std::size_t>(threads));
  for (auto& s : slots) s.store(nullptr);
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i) {
    ts.emplace_back([&, i] {
      std::atomic<void*>& mine = slots[static_cast<std::size_t>(i)];
      std::atomic<void*>& next = slots[static_cast<std::size_t>((i + 1) % threads)];
      for (long k = 0; k < n; ++k) {
        void* p = std::malloc(32 + static_cast<std::size_t>(k % 64));
        static_cast<char*>(p)[0] = 1;
        void* old = next.exchange(p);
        if (old) std::free(old);  // not taken yet: freed by the giver
        if (void* got = mine.exchange(nullptr)) std::free(got);
      }
    });
  }
  for (auto& t : ts) t.join();
  for (auto& s : slots) std::free(s.exchange(nullptr));
  std::printf("ring %d %ld\n", threads, n);
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "ring") == 0)
    return ring(argc > 2 ? std::atoi(argv[2]) : 64, argc > 3 ? std::atol(argv[3]) : 2000);
  if (argc > 1 && std::strcmp(argv[1], "handoff") == 0)
    return handoff(argc > 2 ? std::atoi(argv[2]) : 40, argc > 3 ? std::atoi(argv[3]) : 25);
  if (argc > 1 && std::strcmp(argv[1], "pool") == 0) return pool(argc > 2 ? std::atol(argv[2]) : 1000000);
  return pingpong(argc > 1 ? std::atol(argv[1]) : 300000);
}
