// Where the recorder's descriptors live (the trace file's, /proc/self/statm's, libunwind's
// pipe): at numbers the program cannot reach, or failing that at the highest free ones, so
// that the program's descriptors get the numbers they would get untraced. The interposed
// close, close_range, closefrom, dup, dup2, dup3 and fcntl keep the trace's out of the
// program's way (trace_file.cpp, preload.cpp).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "recorder/state.h"
#include "recorder/trace_file.h"

namespace memtide::rec {

namespace {

// Above this the kernel's descriptor table (copied at every fork) would grow for the trace's
// descriptor alone: 64Ki numbers are 512 KiB of table.
constexpr long kFdCeiling = 65536;
// How many numbers the downward search looks at.
constexpr int kMaxProbes = 4096;
// Room above the soft limit: the trace's descriptor, /proc/self/statm's, libunwind's pipe.
constexpr rlim_t kAboveLimit = 8;

bool get_nofile(rlimit& rl) { return syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, nullptr, &rl) == 0; }
bool set_nofile(const rlimit& rl) { return syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &rl, nullptr) == 0; }

}  // namespace

// The recorder's own fcntl: a system call (the exported fcntl is the program's, preload.cpp).
int sys_fcntl(int fd, int cmd, long arg) { return static_cast<int>(syscall(SYS_fcntl, fd, cmd, arg)); }

int dup_out_of_reach(int fd, int spare_top) {
  rlimit rl{};
  if (!get_nofile(rl)) return -1;
  const long soft = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > static_cast<rlim_t>(kFdCeiling)
                        ? kFdCeiling
                        : static_cast<long>(rl.rlim_cur);
  // Just above the soft limit, where no open, dup or fcntl of the program can land: the limit
  // is raised for the one call (the hard limit allowing; room for the recorder's few
  // descriptors) and put back. A descriptor above the limit stays valid.
  if (rl.rlim_cur == static_cast<rlim_t>(soft) &&
      (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > rl.rlim_cur)) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max - rl.rlim_cur > kAboveLimit ? rl.rlim_cur + kAboveLimit
                                                                                              : rl.rlim_max;
    if (set_nofile(raised)) {
      const int high = sys_fcntl(fd, F_DUPFD_CLOEXEC, soft);
      set_nofile(rl);
      if (high >= 0) return high;
    }
  }
  // Else the highest free number below the limit (the top `spare_top` numbers left for the
  // trace's descriptor, whose number the program gets back when it asks for it).
  long n = soft - spare_top;
  for (int probes = 0; --n > 2 && probes < kMaxProbes; ++probes) {
    if (sys_fcntl(static_cast<int>(n), F_GETFD, 0) >= 0 || errno != EBADF) continue;
    const int got = sys_fcntl(fd, F_DUPFD_CLOEXEC, n);
    if (got == n) return got;
    if (got >= 0) syscall(SYS_close, got);  // taken meanwhile by another thread
  }
  return -1;
}

int move_out_of_reach(int fd, int spare_top) {
  const int high = dup_out_of_reach(fd, spare_top);
  if (high < 0) return fd;
  syscall(SYS_close, fd);
  return high;
}

}  // namespace memtide::rec
