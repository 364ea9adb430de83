// The stopped world of the exit scan (stop_world.h).
#include "recorder/stop_world.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "recorder/base.h"
#include "recorder/clock.h"
#include "recorder/process.h"
#include "recorder/state.h"
#include "recorder/unwind.h"

namespace memtide::rec {
namespace {

Parked g_parked[kMaxThreads];
std::atomic<int> g_nparked{0};
std::atomic<bool> g_stopping{false};
std::atomic<uint32_t> g_release{0};  // futex word: changes when the parked threads may go on

struct RecorderThread {
  std::atomic<int> tid{0};
  uintptr_t lo = 0, hi = 0;
};
RecorderThread g_recorder_threads[kMaxRecorderThreads];
std::atomic<int> g_nrecorder{0};

std::atomic<uintptr_t> g_created[kMaxCreated];
std::atomic<uint64_t> g_ncreated{0};
std::atomic<uintptr_t> g_exit_sp{0};

long futex(std::atomic<uint32_t>* word, int op, uint32_t value) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, nullptr, nullptr, 0);
}

pid_t own_tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// glibc records the owner of a locked mutex of every kind.
bool holds(const pthread_mutex_t& m, pid_t tid) { return m.__data.__owner == tid; }

void on_stop_signal(int, siginfo_t* si, void* ctx) {
  const int saved_errno = errno;
  if (g_stopping.load(std::memory_order_acquire) && si && si->si_code == SI_TKILL && si->si_pid == getpid()) {
    const pid_t tid = own_tid();
    const int n = g_nparked.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i) {
      Parked& p = g_parked[i];
      if (p.tid.load(std::memory_order_relaxed) != tid || p.state.load(std::memory_order_acquire) != kSignalled) continue;
      // Inside the recorder (its stream half written, or a lock the scan needs held): asked again.
      if (tls_busy || holds(recording.shared_mutex, tid) || holds(recording.registry_mutex, tid) ||
          holds(recording.queue_mutex, tid)) {
        p.state.store(kDeclined, std::memory_order_release);
        break;
      }
      const uint32_t gen = g_release.load(std::memory_order_acquire);
      const auto* uc = static_cast<const ucontext_t*>(ctx);
      p.sp = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
      p.live_lo = reinterpret_cast<uintptr_t>(uc) & ~uintptr_t{7};
      p.self = static_cast<uintptr_t>(pthread_self());
      p.state.store(kParked, std::memory_order_release);
      while (g_release.load(std::memory_order_acquire) == gen) futex(&g_release, FUTEX_WAIT_PRIVATE, gen);
      break;
    }
  }
  errno = saved_errno;
}

// Whether thread `tid` blocks signal `sig` (its SigBlk line in /proc).
bool blocks_signal(pid_t tid, int sig) {
  char path[64], buf[2048];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/status", static_cast<int>(tid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = 0;
  for (ssize_t r; n < static_cast<ssize_t>(sizeof buf) - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) != 0;) {
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    n += r;
  }
  close(fd);
  buf[n > 0 ? n : 0] = 0;
  const char* at = std::strstr(buf, "SigBlk:");
  if (!at) return false;
  at += 7;
  while (*at == ' ' || *at == '\t') ++at;
  uint64_t mask = 0;
  for (; (*at >= '0' && *at <= '9') || (*at >= 'a' && *at <= 'f'); ++at)
    mask = mask << 4 | static_cast<uint64_t>(*at <= '9' ? *at - '0' : *at - 'a' + 10);
  return (mask >> (sig - 1)) & 1;
}

int recorder_threads() { return std::min(g_nrecorder.load(std::memory_order_acquire), kMaxRecorderThreads); }

bool is_recorder_thread(pid_t tid) {
  const int n = recorder_threads();
  for (int i = 0; i < n; ++i)
    if (g_recorder_threads[i].tid.load(std::memory_order_relaxed) == tid) return true;
  return false;
}

// The program's other threads, parked in on_stop_signal until resume() (World's work).
class Stopper {
 public:
  // Stops every thread of the process but the caller and the recorder's threads, as far as they
  // can be stopped. False when no signal was free for it (nothing was stopped).
  bool stop() {
    sig_ = pick_signal();
    if (!sig_) return false;
    self_ = own_tid();
    g_nparked.store(0, std::memory_order_release);  // (a forked child's first stop, say)
    g_stopping.store(true, std::memory_order_release);
    const uint64_t deadline = monotonic_ns() + 2000000000ull;
    // New threads may start while others are being stopped: list the tasks again until a pass
    // finds none (a parked thread starts none).
    for (int pass = 0; pass < 64 && monotonic_ns() < deadline; ++pass) {
      if (!signal_new_tasks()) break;
      wait_parked(deadline);
    }
    return true;
  }

  void resume() {
    if (!sig_) return;
    g_stopping.store(false, std::memory_order_release);
    g_release.fetch_add(1, std::memory_order_acq_rel);
    futex(&g_release, FUTEX_WAKE_PRIVATE, INT32_MAX);
    sig_ = 0;
  }

  int count() const { return g_nparked.load(std::memory_order_acquire); }
  const Parked& at(int i) const { return g_parked[i]; }
  // Whether every thread of the program but the caller is parked or gone.
  bool all_parked() const {
    if (!sig_) return false;
    for (int i = 0, n = count(); i < n; ++i) {
      const int st = g_parked[i].state.load(std::memory_order_acquire);
      if (st != kParked && st != kGone) return false;
    }
    return true;
  }

 private:
  // A real-time signal the program leaves at its default action, from the highest down.
  static int pick_signal() {
    for (int sig = SIGRTMAX; sig >= SIGRTMIN; --sig) {
      struct sigaction old;
      if (sigaction(sig, nullptr, &old) != 0) continue;
      const bool ours = (old.sa_flags & SA_SIGINFO) && old.sa_sigaction == on_stop_signal;
      if (!ours && ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)) continue;  // the program's
      struct sigaction sa;
      std::memset(&sa, 0, sizeof sa);
      sa.sa_sigaction = on_stop_signal;
      sa.sa_flags = SA_SIGINFO | SA_RESTART;
      sigfillset(&sa.sa_mask);  // no handler of the program's runs in a parked thread
      if (sigaction(sig, &sa, nullptr) == 0) return sig;
    }
    return 0;
  }

  bool known(pid_t tid) const {
    for (int i = 0, n = count(); i < n; ++i)
      if (g_parked[i].tid.load(std::memory_order_relaxed) == tid) return true;
    return false;
  }

  // Signals the tasks not yet known. Whether there was one.
  bool signal_new_tasks() {
    const int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return false;
    bool found = false;
    alignas(8) char buf[4096];
    for (;;) {
      const long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
      if (n <= 0) break;
      for (long off = 0; off < n;) {
        const auto* d = reinterpret_cast<const dirent64*>(buf + off);
        off += d->d_reclen;
        const pid_t tid = static_cast<pid_t>(std::strtol(d->d_name, nullptr, 10));
        if (tid <= 0 || tid == self_ || known(tid) || is_recorder_thread(tid)) continue;
        const int i = g_nparked.load(std::memory_order_relaxed);
        if (i == kMaxThreads) break;
        Parked& p = g_parked[i];
        p.tid.store(tid, std::memory_order_relaxed);
        // (Signalled also when it blocks the signal now: a thread that is starting blocks every
        // signal until it runs the program's function.)
        blocked_[i] = blocks_signal(tid, sig_);
        p.state.store(kSignalled, std::memory_order_release);
        g_nparked.store(i + 1, std::memory_order_release);
        found = true;
        if (syscall(SYS_tgkill, getpid(), tid, sig_) != 0) p.state.store(kGone, std::memory_order_release);
      }
    }
    close(fd);
    return found;
  }

  // Waits until each signalled thread is parked (a thread that declined is asked again), or the
  // deadline; what has not answered by then counts as running. A thread that blocks the signal
  // is waited for a quarter of a second: one that is starting unblocks it by then, one that
  // blocks every signal for good (a pool whose signals one thread takes) never answers.
  void wait_parked(uint64_t deadline) {
    uint64_t blocked_until = monotonic_ns() + 250000000ull;
    for (;;) {
      if (monotonic_ns() >= blocked_until) {
        bool gave_up = false;
        for (int i = 0, n = count(); i < n; ++i) {
          if (!blocked_[i] || g_parked[i].state.load(std::memory_order_acquire) != kSignalled) continue;
          blocked_[i] = blocks_signal(g_parked[i].tid.load(std::memory_order_relaxed), sig_);
          int expected = kSignalled;
          if (blocked_[i]) gave_up |= g_parked[i].state.compare_exchange_strong(expected, kRunning, std::memory_order_acq_rel);
        }
        blocked_until = gave_up ? ~0ull : monotonic_ns() + 250000000ull;
      }
      bool waiting = false;
      for (int i = 0, n = count(); i < n; ++i) {
        Parked& p = g_parked[i];
        const int st = p.state.load(std::memory_order_acquire);
        if (st == kDeclined) {
          p.state.store(kSignalled, std::memory_order_release);
          if (syscall(SYS_tgkill, getpid(), p.tid.load(std::memory_order_relaxed), sig_) != 0)
            p.state.store(kGone, std::memory_order_release);
          waiting = true;
        } else if (st == kSignalled) {
          waiting = true;
          if (kill_probe(p)) p.state.store(kGone, std::memory_order_release);
        }
      }
      if (!waiting) return;
      if (monotonic_ns() >= deadline) break;
      const timespec pause{0, 50000};
      nanosleep(&pause, nullptr);
    }
    for (int i = 0, n = count(); i < n; ++i) {
      int expected = kSignalled;
      g_parked[i].state.compare_exchange_strong(expected, kRunning, std::memory_order_acq_rel);
    }
  }

  // Whether a signalled thread has exited (signal 0 finds no such task).
  static bool kill_probe(const Parked& p) {
    return syscall(SYS_tgkill, getpid(), p.tid.load(std::memory_order_relaxed), 0) != 0 && errno == ESRCH;
  }

  int sig_ = 0;
  pid_t self_ = 0;
  bool blocked_[kMaxThreads] = {};  // the thread blocked the signal when it was sent
};

Stopper g_stopper;

}  // namespace

bool World::stop() { return g_stopper.stop(); }
void World::resume() { g_stopper.resume(); }
int World::count() const { return g_stopper.count(); }
const Parked& World::at(int i) const { return g_stopper.at(i); }
bool World::all_parked() const { return g_stopper.all_parked(); }

int recorder_thread_count() { return recorder_threads(); }

StackRange recorder_thread_stack(int i) { return {g_recorder_threads[i].lo, g_recorder_threads[i].hi}; }

uint64_t created_thread_count() { return std::min<uint64_t>(g_ncreated.load(std::memory_order_acquire), kMaxCreated); }

uintptr_t created_thread(uint64_t i) { return g_created[i].load(std::memory_order_relaxed); }

void note_exit_sp(uintptr_t sp) {
  uintptr_t none = 0;
  g_exit_sp.compare_exchange_strong(none, sp, std::memory_order_acq_rel);
}

uintptr_t exit_sp() { return g_exit_sp.load(std::memory_order_acquire); }

void note_recorder_thread() {
  const int i = g_nrecorder.fetch_add(1, std::memory_order_acq_rel);
  if (i >= kMaxRecorderThreads) return;
  UnwindMemo m{};
  thread_stack_bounds(&m);
  g_recorder_threads[i].lo = static_cast<uintptr_t>(m.stack_lo);
  g_recorder_threads[i].hi = static_cast<uintptr_t>(m.stack_hi);
  g_recorder_threads[i].tid.store(own_tid(), std::memory_order_release);
}

void note_thread_created(unsigned long thread) {
  const uint64_t i = g_ncreated.fetch_add(1, std::memory_order_relaxed);
  g_created[i % kMaxCreated].store(static_cast<uintptr_t>(thread), std::memory_order_release);
}

}  // namespace memtide::rec
