// The clock (clock.h): the epoch a stream's event times are read against, and the TSC's
// calibration, made on the writer thread.
#include <cpuid.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "recorder/clock.h"
#include "recorder/state.h"
#include "recorder/stream.h"

namespace memtide::rec {

TscClock g_tsc;
std::atomic<uint64_t> g_clock_epoch{0};

uint64_t event_time_read(Stream* s, uint64_t e) {
  // The clock is read after the epoch was (now_ns orders the reading after earlier loads; the
  // system clock does the same): a reading paired with an epoch is never older. Ownership is
  // taken, or the tick made shared, before the reading (clock.h).
  s->reuse_left = 0;
  const uint64_t me = s->index != 0 && s->index <= kMaxOwnerIndex ? uint64_t{s->index} + 1 : 0;
  while (!(e & kEpochShared)) {
    const uint64_t owner = (e & kOwnerMask) >> kOwnerShift;
    if (owner == 0 && me != 0) {
      if (!g_clock_epoch.compare_exchange_weak(e, e | (me << kOwnerShift), std::memory_order_seq_cst,
                                               std::memory_order_relaxed))
        continue;  // (e reloaded: another thread took the tick, or the writer ticked)
      e |= me << kOwnerShift;
    } else if (owner != me || me == 0) {
      g_clock_epoch.fetch_or(kEpochShared, std::memory_order_seq_cst);
      break;
    }
    s->reuse_epoch = e;
    s->reuse_left = (e & kEpochIdle) ? 0 : kReuseEvents;
    break;
  }
  return now_ns();
}

namespace {
uint64_t g_cal_tsc = 0, g_cal_ns = 0;
bool g_cal_ok = false;
TscParams g_tsc_steps[2];  // the first calibration, the final one (published in turn, never changed)
constexpr uint64_t kFirstStepNs = 4000000, kFinalStepNs = 100000000;

// Invariant TSC (CPUID 0x80000007 EDX bit 8), and the kernel's clocksource is the TSC.
bool tsc_usable() {
  unsigned a, b, c, d;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return false;
  __get_cpuid(0x80000007u, &a, &b, &c, &d);
  if (!(d & (1u << 8))) return false;
  const int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[32] = {};
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  return n >= 3 && std::strncmp(buf, "tsc", 3) == 0 && (buf[3] == '\n' || buf[3] == 0);
}

// Whether the TSC may be used, found by the thread that starts the writer (tsc_probe), not by
// the writer: the file it reads takes the lowest free descriptor for a moment, which must not
// be taken from under a program that is opening its own (their numbers are the program's).
int g_tsc_usable = -1;
}  // namespace

void tsc_probe() {
  if (g_tsc_usable < 0) g_tsc_usable = tsc_usable() ? 1 : 0;
}

void tsc_calibrate_begin() {
  // (In a child forked during the first step, the final one is made from here.)
  const TscParams* p = g_tsc.params.load();
  tsc_probe();
  g_cal_ok = (p == nullptr || p == &g_tsc_steps[0]) && g_tsc_usable == 1;
  if (!g_cal_ok) return;
  g_cal_ns = monotonic_ns();
  g_cal_tsc = __builtin_ia32_rdtsc();
}

uint64_t tsc_calibrate_due() {
  return g_cal_ns + (g_tsc.params.load(std::memory_order_relaxed) ? kFinalStepNs : kFirstStepNs);
}

bool tsc_calibrate_step() {
  if (!g_cal_ok) return false;
  const uint64_t ns = monotonic_ns();
  const uint64_t tsc = __builtin_ia32_rdtsc();
  if (tsc <= g_cal_tsc || ns <= g_cal_ns) {  // (not a TSC that counts forward: stay with the system clock)
    g_cal_ok = false;
    return false;
  }
  const uint64_t span = ns - g_cal_ns;
  const TscParams* first = g_tsc.params.load(std::memory_order_relaxed);
  if (span < (first ? kFinalStepNs : kFirstStepNs)) return true;
  TscParams& p = g_tsc_steps[first ? 1 : 0];
  p.mult = static_cast<uint64_t>((static_cast<unsigned __int128>(span) << 32) / (tsc - g_cal_tsc));
  p.anchor_tsc = tsc;
  p.anchor_ns = first ? first->at(tsc) : ns;  // the final step goes on from where the first one is
  g_tsc.params.store(&p, std::memory_order_release);
  g_cal_ok = first == nullptr;
  return g_cal_ok;
}

}  // namespace memtide::rec
