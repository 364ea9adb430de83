#include "analysis/suppressions.h"

#include <fstream>
#include <sstream>

namespace memtide::analysis {

namespace {

// '*' globbing from the start of `t` to its end (both anchored).
bool glob_full(std::string_view p, std::string_view t) {
  std::size_t pi = 0, ti = 0, star = std::string_view::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = ti;
    } else if (pi < p.size() && p[pi] == t[ti]) {
      ++pi;
      ++ti;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      ti = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// One-time allocations that glibc and libstdc++ make for the life of the process and never
// free (they are released only by __libc_freeres / __gnu_cxx::__freeres under valgrind).
struct Builtin {
  const char* pattern;
  const char* site_module;  // "" : any
  const char* description;
};
constexpr Builtin kBuiltins[] = {
    {"_IO_file_doallocate$", "", "glibc: stdio stream buffers (stdout, stderr, files left open)"},
    {"^_nl_*", "libc.so*", "glibc: locale data loaded by setlocale / catalogs"},
    {"^setlocale$", "libc.so*", "glibc: locale names kept by setlocale"},
    {"tls_get_addr", "", "glibc: dynamic TLS blocks of threads (LeakSanitizer suppresses it too)"},
    {"_dl_allocate_tls", "", "glibc: static TLS of threads"},
    {"^_dl_init$", "libstdc++.so*", "libstdc++: start-up allocations of its static initialisers (emergency "
                                   "exception pool, locale)"},
    {"^_dl_init$", "libc.so*", "glibc: start-up allocations of its static initialisers"},
    {"^__cxa_get_globals", "", "libstdc++: per-thread exception globals"},
    {"^std::locale::", "libstdc++.so*", "libstdc++: the global locale's facets"},
    {"^std::ios_base::Init::Init", "libstdc++.so*", "libstdc++: the standard streams"},
};

}  // namespace

bool glob_match(std::string_view pattern, std::string_view text) {
  if (pattern.empty()) return false;
  const bool start = pattern.front() == '^';
  if (start) pattern.remove_prefix(1);
  const bool end = !pattern.empty() && pattern.back() == '$';
  if (end) pattern.remove_suffix(1);
  std::string p;
  if (!start) p += '*';
  p += pattern;
  if (!end) p += '*';
  return glob_full(p, text);
}

bool SuppressionList::parse(std::string_view text, const std::string& origin, std::string& error,
                            std::vector<std::string>& notes) {
  std::size_t lineno = 0;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++lineno;
    line = trim(line);
    if (line.empty() || line.front() == '#') continue;
    const std::string where = origin + ":" + std::to_string(lineno);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) {
      error = where + ": expected TYPE:PATTERN (e.g. leak:my_function), got '" + std::string(line) + "'";
      return false;
    }
    const std::string_view type = trim(line.substr(0, colon));
    const std::string_view pat = trim(line.substr(colon + 1));
    if (type != "leak") {
      notes.push_back(where + ": '" + std::string(type) + "' suppressions do not apply to leaks; ignored");
      continue;
    }
    if (pat.empty()) {
      error = where + ": empty pattern";
      return false;
    }
    items_.push_back({std::string(pat), where, {}, false, {}});
  }
  return true;
}

bool SuppressionList::load_file(const std::string& path, std::string& error, std::vector<std::string>& notes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": cannot read the suppressions file";
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path, error, notes);
}

void SuppressionList::add_builtin() {
  for (const Builtin& b : kBuiltins) items_.push_back({b.pattern, "built-in", b.description, true, b.site_module});
}

int SuppressionList::match(const std::vector<Frame>& frames) const {
  for (std::size_t i = 0; i < items_.size(); ++i) {
    const std::string& p = items_[i].pattern;
    const std::string& site = items_[i].site_module;
    if (!site.empty() && (frames.empty() || !glob_match("^" + site + "$", basename_of(frames.back().module))))
      continue;
    for (const Frame& f : frames) {
      if ((!f.function.empty() && glob_match(p, f.function)) || (!f.file.empty() && glob_match(p, f.file)) ||
          (!f.module.empty() && glob_match(p, f.module)))
        return static_cast<int>(i);
    }
  }
  return -1;
}

}  // namespace memtide::analysis
