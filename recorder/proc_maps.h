// /proc/self/maps, read and parsed with system calls only (no allocation, no stdio): the
// thread stacks (threads.cpp) and the leak scan (leak_scan.cpp) both read it.
#pragma once

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace memtide::rec {

// One line: "lo-hi perms offset dev inode   path".
struct Mapping {
  uintptr_t lo = 0, hi = 0;
  bool readable = false, writable = false, executable = false;
  std::string_view path;  // "" for an anonymous mapping
  bool anonymous() const { return path.empty() || path.substr(0, 6) == "[anon:"; }
  bool special() const {
    return path == "[vvar]" || path == "[vdso]" || path == "[vsyscall]" || path == "[uprobes]";
  }
};

namespace proc_maps_detail {
inline uint64_t parse_hex(const char*& p, const char* end) {
  uint64_t v = 0;
  for (; p < end; ++p) {
    const char c = *p;
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) break;
    v = v << 4 | static_cast<uint64_t>(d);
  }
  return v;
}
}  // namespace proc_maps_detail

// Parses the line [p, end) (without its newline). False when it is not a mapping's line.
inline bool parse_mapping(const char* p, const char* end, Mapping& m) {
  using proc_maps_detail::parse_hex;
  m = Mapping{};
  m.lo = parse_hex(p, end);
  if (p == end || *p++ != '-') return false;
  m.hi = parse_hex(p, end);
  if (p == end || *p++ != ' ' || end - p < 4) return false;
  m.readable = p[0] == 'r';
  m.writable = p[1] == 'w';
  m.executable = p[2] == 'x';
  for (int field = 0; field < 4 && p < end; ++field) {  // perms, offset, dev, inode
    while (p < end && *p != ' ') ++p;
    while (p < end && *p == ' ') ++p;
  }
  m.path = std::string_view(p, static_cast<size_t>(end - p));
  return m.hi > m.lo;
}

// Calls f(const Mapping&) for each mapping of the text [p, end) until it returns false.
template <class F>
inline void for_each_mapping(const char* p, const char* end, F&& f) {
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    const char* line_end = nl ? nl : end;
    Mapping m;
    if (parse_mapping(p, line_end, m) && !f(m)) return;
    p = nl ? nl + 1 : end;
  }
}

// Reads /proc/self/maps through a buffer of 4 KiB and calls f(const Mapping&) for each mapping
// until it returns false; a line longer than the buffer is parsed from its first 4 KiB (its
// path cut). False when the file cannot be read.
template <class F>
inline bool read_mappings(F&& f) {
  const int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC));
  if (fd < 0) return false;
  char buf[4096];
  size_t have = 0;
  bool skipping = false;  // the rest of a line longer than the buffer
  bool more = true;
  while (more) {
    const ssize_t n = syscall(SYS_read, fd, buf + have, sizeof buf - have);
    if (n <= 0) break;
    have += static_cast<size_t>(n);
    const char* p = buf;
    const char* const end = buf + have;
    while (more) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
      if (!nl && !(p == buf && have == sizeof buf)) break;  // an incomplete line: read on
      Mapping m;
      if (!skipping && parse_mapping(p, nl ? nl : end, m)) more = f(m);
      skipping = !nl;
      p = nl ? nl + 1 : end;
    }
    have = static_cast<size_t>(end - p);
    std::memmove(buf, p, have);
  }
  syscall(SYS_close, fd);
  return true;
}

}  // namespace memtide::rec
