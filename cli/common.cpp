#include "cli/common.h"

#include <cctype>
#include <cstdio>
#include <ctime>
#include <iostream>

namespace memtide::cli {

void print_error(std::string_view file, std::string_view message) {
  std::cout.flush();
  std::cerr << "memtide: " << printable(file) << ": " << message << '\n';
}

void print_warning(std::string_view file, std::string_view message) {
  std::cout.flush();
  std::cerr << "memtide: " << printable(file) << ": warning: " << message << '\n';
}

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

bool manifest_trace_path(const std::string& line, std::string& path) {
  const auto t1 = line.find('\t');
  const auto t2 = t1 == std::string::npos ? std::string::npos : line.find('\t', t1 + 1);
  if (t2 == std::string::npos) return false;
  path = line.substr(t2 + 1);
  return true;
}

std::string shell_quote(std::string_view s) {
  bool safe = !s.empty();
  for (unsigned char c : s)
    if (!(std::isalnum(c) || std::string_view("%+,-./:=@_").find(static_cast<char>(c)) != std::string_view::npos))
      safe = false;
  if (safe) return std::string(s);
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return printable(out + "'");
}

std::string iso_time_utc(uint64_t realtime_ns) {
  const auto secs = static_cast<std::time_t>(realtime_ns / 1000000000u);
  std::tm tm{};
  if (!gmtime_r(&secs, &tm)) return "?";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<unsigned>(realtime_ns % 1000000000u / 1000000u));
  return buf;
}

std::string format_duration(uint64_t ns) {
  char buf[64];
  if (ns >= 1000000000u)
    std::snprintf(buf, sizeof buf, "%.3f s", static_cast<double>(ns) / 1e9);
  else if (ns >= 1000000u)
    std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ns) / 1e6);
  else if (ns >= 1000u)
    std::snprintf(buf, sizeof buf, "%.3f us", static_cast<double>(ns) / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%llu ns", static_cast<unsigned long long>(ns));
  return buf;
}

}  // namespace memtide::cli
