#include "viewer/leaks_model.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>

#include "analysis/alloc_site.h"
#include "analysis/leaks.h"

namespace memtide::viewer {
namespace {

bool contains_nocase(std::string_view hay, std::string_view needle) {
  if (needle.empty()) return true;
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         }) != hay.end();
}


}  // namespace

std::size_t suggested_frame(const std::vector<LeakFrame>& frames) {
  std::vector<analysis::SuggestionFrame> v;
  v.reserve(frames.size());
  for (const LeakFrame& f : frames) {
    // A frame without a name shows its address ("module+0x1a2b"): no function to match.
    const bool named = !f.function.empty() && f.function.find("+0x") == std::string::npos;
    v.push_back({named ? std::string_view(f.function) : std::string_view(), f.module, f.widespread});
  }
  return analysis::suggested_frame(v);
}

LeaksData make_leaks(const analysis::Model& m, analysis::Symbolizer& sym, analysis::Domain domain,
                     std::size_t max_frames, std::size_t max_rows_with_frames) {
  LeaksData d;
  d.scanned = m.leak_scan.complete && domain == analysis::Domain::Heap;
  d.sampled = m.sampling.sampled() && domain != analysis::Domain::Mmap;
  d.kept_range = m.kept_from != 0;
  const auto& stacks = m.stacks[static_cast<unsigned>(domain)];
  std::vector<const analysis::StackStats*> leaking;
  for (const analysis::StackStats& s : stacks)
    if (s.m.leaked_blocks) leaking.push_back(&s);
  std::sort(leaking.begin(), leaking.end(),
            [](const analysis::StackStats* a, const analysis::StackStats* b) { return analysis::larger_leak(*a, *b); });
  auto rel = [&](uint64_t t) { return t > m.time_base ? t - m.time_base : 0; };
  std::vector<analysis::Frame> frames;
  d.rows.reserve(leaking.size());
  const analysis::FunctionSpread spread = leaking.empty() ? analysis::FunctionSpread() : analysis::FunctionSpread(m, sym, domain);
  for (const analysis::StackStats* s : leaking) {
    LeakRow r;
    r.stack = s->stack.value;
    r.bytes = s->m.leaked_bytes;
    r.blocks = s->m.leaked_blocks;
    r.samples = s->m.leaked_samples;
    r.first = rel(s->m.first_leak_time);
    r.last = rel(s->m.last_leak_time);
    r.reachable_bytes = s->m.reachable_bytes;
    r.reachable_blocks = s->m.reachable_blocks;
    r.indirect_bytes = s->m.indirect_bytes;
    r.indirect_blocks = s->m.indirect_blocks;
    r.before_range_bytes = s->m.before_range_bytes;
    r.before_range_blocks = s->m.before_range_blocks;
    d.before_range_bytes += r.before_range_bytes;
    d.before_range_blocks += r.before_range_blocks;
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
        f.file = std::string(it->file);
        f.named = !it->function.empty();
        f.inlined = it->inlined;
        f.share = spread.share(*it);
        f.widespread = spread.widespread(*it);
        r.frames.push_back(std::move(f));
      }
      if (!r.frames.empty()) {
        // Past the allocation functions (zmalloc, xmalloc): where the program allocated.
        std::reverse(frames.begin(), frames.end());
        const LeakFrame& site = r.frames[std::min(analysis::allocation_site(frames), r.frames.size() - 1)];
        r.site = site.function;
        r.module = std::string(analysis::basename_of(site.module));
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
  std::string out = leak_reach(d, r);
  if (r.before_range_blocks)
    out += (out.empty() ? "" : "; ") + std::to_string(r.before_range_blocks) + " before the kept range";
  return out;
}

std::string leak_reach(const LeaksData& d, const LeakRow& r) {
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
                                           bool ascending, bool hide_reachable, const LeakSuppression* hide_suppressed) {
  std::vector<uint32_t> idx;
  idx.reserve(d.rows.size());
  for (uint32_t i = 0; i < d.rows.size(); ++i) {
    const LeakRow& r = d.rows[i];
    if (hide_reachable && d.scanned && r.reachable_blocks == r.blocks) continue;
    if (hide_suppressed && hide_suppressed->suppressed(i)) continue;
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
  if (frame < row.frames.size()) {
    const LeakFrame& f = row.frames[frame];
    const bool named = !f.function.empty() && f.function.find("+0x") == std::string::npos;
    const std::string line = analysis::suppression_line(named ? std::string_view(f.function) : std::string_view(),
                                                        f.module);
    if (line != "leak:") return line;
  }
  return analysis::suppression_line(row.site, {});
}

LeakSuppression suppress_leaks(const LeaksData& d, const analysis::SuppressionList& list) {
  analysis::SuppressionList supp = list;  // (its counts are this data's)
  for (analysis::Suppression& x : supp.items()) x.stacks = x.blocks = x.bytes = 0;
  LeakSuppression out;
  out.by_row.assign(d.rows.size(), -1);
  std::vector<analysis::Frame> frames;
  for (std::size_t i = 0; i < d.rows.size(); ++i) {
    const LeakRow& r = d.rows[i];
    if (r.frames.empty()) {
      ++out.unmatched_rows;
      continue;
    }
    frames.clear();
    for (auto it = r.frames.rbegin(); it != r.frames.rend(); ++it) {  // outermost first, as Symbolizer::stack
      analysis::Frame f;
      f.function = it->named ? std::string_view(it->function) : std::string_view();
      f.file = it->file;
      f.module = it->module;
      f.inlined = it->inlined;
      frames.push_back(f);
    }
    const int k = analysis::suppress_leak(supp, frames, r.blocks, r.bytes);
    out.by_row[i] = k;
    if (k < 0) continue;
    ++out.rows;
    out.blocks += r.blocks;
    out.bytes += r.bytes;
  }
  out.items = std::move(supp.items());
  return out;
}

SuppressionReach suppression_reach(const LeaksData& d, const LeakRow& row, std::size_t frame) {
  SuppressionReach r;
  if (frame < row.frames.size()) r.share = row.frames[frame].share;
  const std::string pattern = suppression_line(row, frame).substr(5);  // after "leak:"
  for (const LeakRow& other : d.rows) {
    if (&other == &row) continue;
    for (const LeakFrame& f : other.frames)
      if (analysis::glob_match(pattern, f.function) || analysis::glob_match(pattern, f.module)) {
        ++r.other_rows;
        r.other_bytes += other.bytes;
        break;
      }
  }
  return r;
}

}  // namespace memtide::viewer
