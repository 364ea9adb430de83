// The stopped world of the exit scan (leak_scan.cpp), as LeakSanitizer stops it: each other
// thread of the program is sent a real-time signal whose handler saves its registers on its own
// stack (the signal frame) and parks it until the world resumes. A thread inside the recorder
// is not parked there: it is asked again until it is out. A thread that blocks the signal is
// waited for a quarter of a second (a starting thread blocks every signal until it runs the
// program's function); one that never answers counts as running. Also what the scan must know
// of the process's threads: the recorder's own threads' stacks, the descriptors of the threads
// pthread_create made (glibc keeps their stacks for reuse after they exit), and the stack
// pointer the program had when it called exit (process.h's note_* functions feed them).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memtide::rec {

constexpr int kMaxThreads = 4096;
constexpr int kMaxRecorderThreads = 8;
constexpr size_t kMaxCreated = 16384;  // the most recent pthread_create calls remembered

enum ParkState : int { kSignalled = 1, kParked, kDeclined, kRunning, kGone };

// A thread of the program, as the stop left it.
struct Parked {
  std::atomic<int> tid{0};
  std::atomic<int> state{0};
  uintptr_t sp = 0;       // the interrupted stack pointer
  uintptr_t live_lo = 0;  // its signal frame: registers, red zone and live frames lie above
  uintptr_t self = 0;     // its pthread_self()
};

// The program's other threads, parked until resume(). One world stops at a time.
class World {
 public:
  // Stops every thread of the process but the caller and the recorder's threads, as far as they
  // can be stopped. False when no signal was free for it (nothing was stopped).
  bool stop();
  void resume();
  int count() const;
  const Parked& at(int i) const;
  // Whether every thread of the program but the caller is parked or gone.
  bool all_parked() const;
};

struct StackRange {
  uintptr_t lo, hi;
};
// The recorder's own threads (note_recorder_thread): how many, and the stack of each.
int recorder_thread_count();
StackRange recorder_thread_stack(int i);
// The descriptors (pthread_t) of the most recent kMaxCreated threads pthread_create made: how
// many are known, and each.
uint64_t created_thread_count();
uintptr_t created_thread(uint64_t i);

}  // namespace memtide::rec
