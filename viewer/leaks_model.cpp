#include "viewer/leaks_model.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>

namespace memtide::viewer {
namespace {

bool contains_nocase(std::string_view hay, std::string_view needle) {
  if (needle.empty()) return true;
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         }) != hay.end();
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool is_library_frame(const LeakFrame& f) {
  const std::string_view fn = f.function;
  if (fn.empty()) return true;
  for (std::string_view p : {"std::", "__gnu_cxx::", "operator new", "operator delete", "__", "_dl_", "_IO_", "allocate",
                             "malloc", "calloc", "realloc", "strdup", "make_unique", "make_shared"})
    if (starts_with(fn, p)) return true;
  for (std::string_view m : {"libc.so", "libstdc++.so", "ld-linux", "libm.so", "libgcc_s.so"})
    if (f.module.find(m) != std::string::npos) return true;
  return false;
}

}  // namespace

std::size_t suggested_frame(const std::vector<LeakFrame>& frames) {
  for (std::size_t i = 0; i < frames.size(); ++i)
    if (!is_library_frame(frames[i])) return i;
  for (std::size_t i = 0; i < frames.size(); ++i)
    if (!frames[i].function.empty()) return i;
  return 0;
}

LeaksData make_leaks(const analysis::Model& m, analysis::Symbolizer& sym, analysis::Domain domain,
                     std::size_t max_frames, std::size_t max_rows_with_frames) {
  LeaksData d;
  d.scanned = m.leak_scan.complete && domain == analysis::Domain::Heap;
  const auto& stacks = m.stacks[static_cast<unsigned>(domain)];
  std::vector<const analysis::StackStats*> leaking;
  for (const analysis::StackStats& s : stacks)
    if (s.m.leaked_blocks) leaking.push_back(&s);
  std::sort(leaking.begin(), leaking.end(), [](const analysis::StackStats* a, const analysis::StackStats* b) {
    return a->m.leaked_bytes != b->m.leaked_bytes ? a->m.leaked_bytes > b->m.leaked_bytes : a->stack < b->stack;
  });
  auto rel = [&](uint64_t t) { return t > m.time_base ? t - m.time_base : 0; };
  std::vector<analysis::Frame> frames;
  d.rows.reserve(leaking.size());
  for (const analysis::StackStats* s : leaking) {
    LeakRow r;
    r.stack = s->stack.value;
    r.bytes = s->m.leaked_bytes;
    r.blocks = s->m.leaked_blocks;
    r.first = rel(s->m.first_leak_time);
    r.last = rel(s->m.last_leak_time);
    r.reachable_bytes = s->m.reachable_bytes;
    r.reachable_blocks = s->m.reachable_blocks;
    r.indirect_bytes = s->m.indirect_bytes;
    r.indirect_blocks = s->m.indirect_blocks;
    d.total_bytes += r.bytes;
    d.total_blocks += r.blocks;
    d.reachable_bytes += r.reachable_bytes;
    d.indirect_bytes += r.indirect_bytes;
    if (d.rows.size() < max_rows_with_frames) {
      sym.stack(s->stack, frames);
      // Allocation site first, as LSan and `memtide report` print them.
      for (auto it = frames.rbegin(); it != frames.rend() && r.frames.size() < max_frames; ++it) {
        LeakFrame f;
        f.function = it->function.empty() ? analysis::frame_label(*it) : std::string(it->function);
        if (!it->file.empty()) {
          f.location = std::string(analysis::basename_of(it->file));
          if (it->line) f.location += ":" + std::to_string(it->line);
        } else {
          char buf[32];
          std::snprintf(buf, sizeof buf, "+0x%" PRIx64, it->offset);
          f.location = buf;
        }
        f.module = std::string(it->module);
        f.inlined = it->inlined;
        r.frames.push_back(std::move(f));
      }
      if (!r.frames.empty()) {
        r.site = r.frames.front().function;
        r.module = std::string(analysis::basename_of(r.frames.front().module));
      }
      r.suggested = suggested_frame(r.frames);
    } else {
      ++d.stacks_without_frames;
      r.site = "stack #" + std::to_string(r.stack);
    }
    d.rows.push_back(std::move(r));
  }
  return d;
}

std::string leak_kind(const LeaksData& d, const LeakRow& r) {
  if (!d.scanned) return "";
  const uint64_t definite = r.blocks - r.reachable_blocks - r.indirect_blocks;
  if (r.reachable_blocks == r.blocks) return "reachable";
  if (r.indirect_blocks == r.blocks) return "indirect";
  if (definite == r.blocks) return "definite";
  std::string out;
  auto part = [&](uint64_t n, const char* what) {
    if (n) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + what;
  };
  part(definite, "definite");
  part(r.indirect_blocks, "indirect");
  part(r.reachable_blocks, "reachable");
  return out;
}

std::vector<uint32_t> filter_and_sort_leaks(const LeaksData& d, std::string_view filter, LeakColumn column,
                                           bool ascending, bool hide_reachable) {
  std::vector<uint32_t> idx;
  idx.reserve(d.rows.size());
  for (uint32_t i = 0; i < d.rows.size(); ++i) {
    const LeakRow& r = d.rows[i];
    if (hide_reachable && d.scanned && r.reachable_blocks == r.blocks) continue;
    bool keep = filter.empty() || contains_nocase(r.site, filter);
    for (std::size_t k = 0; !keep && k < r.frames.size(); ++k) {
      const LeakFrame& f = r.frames[k];
      keep = contains_nocase(f.function, filter) || contains_nocase(f.location, filter) || contains_nocase(f.module, filter);
    }
    if (keep) idx.push_back(i);
  }
  auto key_less = [&](const LeakRow& a, const LeakRow& b) -> int {
    auto cmp = [](auto x, auto y) { return x < y ? -1 : y < x ? 1 : 0; };
    switch (column) {
      case LeakColumn::Bytes: return cmp(a.bytes, b.bytes);
      case LeakColumn::Blocks: return cmp(a.blocks, b.blocks);
      case LeakColumn::First: return cmp(a.first, b.first);
      case LeakColumn::Last: return cmp(a.last, b.last);
      case LeakColumn::Site: return a.site.compare(b.site);
      case LeakColumn::Module: return a.module.compare(b.module);
      case LeakColumn::Count_: break;
    }
    return 0;
  };
  std::stable_sort(idx.begin(), idx.end(), [&](uint32_t x, uint32_t y) {
    const int c = key_less(d.rows[x], d.rows[y]);
    if (c != 0) return ascending ? c < 0 : c > 0;
    return d.rows[x].bytes != d.rows[y].bytes ? d.rows[x].bytes > d.rows[y].bytes : x < y;
  });
  return idx;
}

std::string suppression_line(const LeakRow& row, std::size_t frame) {
  std::string target;
  if (frame < row.frames.size()) {
    const LeakFrame& f = row.frames[frame];
    target = f.function.empty() || f.function.find("+0x") != std::string::npos
                 ? std::string(analysis::basename_of(f.module))
                 : f.function;
  }
  if (target.empty()) target = row.site;
  for (char& c : target)
    if (c == '*' || c == '^' || c == '$' || c == '\n' || c == '\r') c = '*';
  return "leak:" + target;
}

}  // namespace memtide::viewer
