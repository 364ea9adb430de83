// MEMTIDE_CHECK(cond): an invariant the code relies on, verified in checked builds
// (configure with -DMEMTIDE_CHECKS=ON; CI runs the suite so) and compiled out otherwise.
// A failure writes one line with write(2) and aborts: no allocation, so the recorder can
// use it inside the interposed malloc.
#pragma once

#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace memtide::detail {

[[noreturn]] inline void check_failed(const char* what, const char* file, int line) {
  char digits[12];
  int n = 0;
  for (int v = line; v > 0 && n < 11; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  auto put = [](const char* s, size_t len) { (void)!::write(2, s, len); };
  put("memtide: check failed: ", 23);
  put(what, std::strlen(what));
  put(" at ", 4);
  put(file, std::strlen(file));
  put(":", 1);
  while (n > 0) put(&digits[--n], 1);
  put("\n", 1);
  std::abort();
}

}  // namespace memtide::detail

#ifdef MEMTIDE_CHECKS
#define MEMTIDE_CHECK(cond) \
  ((cond) ? (void)0 : ::memtide::detail::check_failed(#cond, __FILE__, __LINE__))
#else
#define MEMTIDE_CHECK(cond) ((void)sizeof(!(cond)))
#endif
