// The recorder's messages (base.h): one line on stderr each, or to `memtide attach`, at most 20.
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>

#include "recorder/attach.h"
#include "recorder/base.h"

namespace memtide::rec {

void message(const char* fmt, ...) {
  static std::atomic<int> count{0};
  if (count.fetch_add(1, std::memory_order_relaxed) >= 20) return;
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, "memtide[%d]: ", static_cast<int>(getpid()));
  va_list ap;
  va_start(ap, fmt);
  n += std::vsnprintf(buf + n, sizeof buf - static_cast<size_t>(n) - 1, fmt, ap);
  va_end(ap);
  if (n > static_cast<int>(sizeof buf) - 2) n = sizeof buf - 2;
  buf[n++] = '\n';
  if (!attach_message(buf, static_cast<size_t>(n))) (void)!write(2, buf, static_cast<size_t>(n));
}

}  // namespace memtide::rec
