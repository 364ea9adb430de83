#include "analysis/suppressions.h"

#include <algorithm>
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

bool load_suppressions(SuppressionList& supp, const std::vector<std::string>& files, bool builtin, std::string& error,
                       std::vector<std::string>& notes) {
  for (const std::string& f : files)
    if (!supp.load_file(f, error, notes)) return false;
  if (builtin) supp.add_builtin();
  return true;
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

FunctionSpread::FunctionSpread(const Model& m, Symbolizer& sym, Domain domain, std::size_t max_stacks) {
  const auto& stacks = m.stacks[static_cast<unsigned>(domain)];
  std::vector<const StackStats*> order;
  order.reserve(stacks.size());
  for (const StackStats& s : stacks) {
    if (!s.m.alloc_count) continue;
    total_ += s.m.alloc_count;
    order.push_back(&s);
  }
  if (order.size() > max_stacks) {
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(max_stacks), order.end(),
                      [](const StackStats* a, const StackStats* b) { return a->m.alloc_count > b->m.alloc_count; });
    order.resize(max_stacks);
  }
  std::vector<Frame> frames;
  std::vector<std::string_view> seen, seen_modules;  // of one stack: each counted once
  for (const StackStats* s : order) {
    sym.stack(s->stack, frames);  // outermost caller first
    seen.clear();
    seen_modules.clear();
    for (std::size_t i = 0; i < frames.size(); ++i) {
      const Frame& f = frames[i];
      if (!f.module.empty() && std::find(seen_modules.begin(), seen_modules.end(), f.module) == seen_modules.end()) {
        seen_modules.push_back(f.module);
        auto it = by_module_.find(f.module);
        if (it == by_module_.end()) it = by_module_.emplace(std::string(f.module), 0).first;
        it->second += s->m.alloc_count;
      }
      if (f.function.empty()) continue;
      auto it = functions_.find(f.function);
      if (it == functions_.end()) it = functions_.emplace(std::string(f.function), Use{}).first;
      Use& u = it->second;
      if (std::find(seen.begin(), seen.end(), f.function) == seen.end()) {
        seen.push_back(f.function);
        u.allocations += s->m.alloc_count;
      }
      if (i > 0 && !frames[i - 1].function.empty() && frames[i - 1].function != f.function &&
          u.callers.size() < kManyCallers &&
          std::find(u.callers.begin(), u.callers.end(), frames[i - 1].function) == u.callers.end())
        u.callers.emplace_back(frames[i - 1].function);
    }
  }
}

double FunctionSpread::share(std::string_view function) const {
  if (!total_) return 0;
  auto it = functions_.find(function);
  return it == functions_.end() ? 0 : static_cast<double>(it->second.allocations) / static_cast<double>(total_);
}

double FunctionSpread::share(const Frame& f) const {
  if (!f.function.empty()) return share(f.function);
  if (!total_) return 0;
  auto it = by_module_.find(f.module);
  return it == by_module_.end() ? 0 : static_cast<double>(it->second) / static_cast<double>(total_);
}

std::size_t FunctionSpread::callers(std::string_view function) const {
  auto it = functions_.find(function);
  return it == functions_.end() ? 0 : it->second.callers.size();
}

bool is_library_frame(std::string_view fn, std::string_view module) {
  if (fn.empty()) return true;
  for (std::string_view p : {"std::", "__gnu_cxx::", "operator new", "operator delete", "__", "_dl_", "_IO_", "allocate",
                             "malloc", "calloc", "realloc", "strdup", "make_unique", "make_shared"})
    if (fn.substr(0, p.size()) == p) return true;
  for (std::string_view m : {"libc.so", "libstdc++.so", "ld-linux", "libm.so", "libgcc_s.so"})
    if (module.find(m) != std::string_view::npos) return true;
  return false;
}

namespace {
// A program's own allocation function, by its name (xmalloc, zcalloc, zrealloc_usable, g_malloc0,
// pool_alloc, AllocBuffer): pprof drops such frames by a pattern too.
bool names_an_allocator(std::string_view fn) {
  for (std::size_t i = 0; i + 5 <= fn.size(); ++i)
    if ((fn[i] == 'a' || fn[i] == 'A') && fn.substr(i + 1, 4) == "lloc") return true;
  return false;
}
}  // namespace

std::size_t suggested_frame(const std::vector<SuggestionFrame>& frames) {
  for (std::size_t i = 0; i < frames.size(); ++i)
    if (!is_library_frame(frames[i].function, frames[i].module) && !frames[i].widespread &&
        !names_an_allocator(frames[i].function))
      return i;
  for (std::size_t i = 0; i < frames.size(); ++i)
    if (!is_library_frame(frames[i].function, frames[i].module)) return i;
  for (std::size_t i = 0; i < frames.size(); ++i)
    if (!frames[i].function.empty()) return i;
  return 0;
}

std::string suppression_line(std::string_view function, std::string_view module) {
  std::string target(function.empty() ? basename_of(module) : function);
  for (char& c : target)
    if (c == '*' || c == '^' || c == '$' || c == '\n' || c == '\r') c = '*';
  return "leak:" + target;
}

std::string suggest_suppression(const std::vector<Frame>& leaf_first, const FunctionSpread& spread) {
  std::vector<SuggestionFrame> v;
  v.reserve(leaf_first.size());
  for (const Frame& f : leaf_first)
    v.push_back({f.function, f.module, spread.widespread(f)});
  if (v.empty()) return {};
  const Frame& f = leaf_first[suggested_frame(v)];
  return suppression_line(f.function, f.module);
}

std::vector<Suggestion> suggest_suppressions(const std::vector<std::vector<Frame>>& stacks, const FunctionSpread& spread,
                                             std::size_t count) {
  // How many of the stacks other than `self` the line matches.
  auto others_matched = [&](const std::string& line, std::size_t self, std::size_t stop_at) {
    SuppressionList one;
    std::string error;
    std::vector<std::string> notes;
    if (!one.parse(line + "\n", "suggestion", error, notes)) return stacks.size();
    std::size_t n = 0;
    for (std::size_t k = 0; k < stacks.size() && n < stop_at; ++k)
      if (k != self && one.match(stacks[k]) >= 0) ++n;
    return n;
  };
  std::vector<Suggestion> out(std::min(count, stacks.size()));
  for (std::size_t i = 0; i < out.size(); ++i) {
    Suggestion& best = out[i];
    best.line = suggest_suppression(stacks[i], spread);
    if (best.line.empty()) continue;
    best.others = others_matched(best.line, i, SIZE_MAX);
    for (std::size_t f = 0; f < stacks[i].size() && best.others > 0; ++f) {
      const std::string line = suppression_line(stacks[i][f].function, stacks[i][f].module);
      if (line == best.line) continue;
      const std::size_t n = others_matched(line, i, best.others);
      if (n < best.others) best = {line, n};
    }
  }
  return out;
}

}  // namespace memtide::analysis
