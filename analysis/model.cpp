#include "analysis/model.h"

#include <string_view>

#include <algorithm>

#include "formats/decoder.h"

namespace memtide::analysis {

namespace {
std::string_view file_name(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}
}  // namespace

std::string program_name(const ProcessSummary& p) {
  if (!p.argv.empty() && !file_name(p.argv.front()).empty()) return std::string(file_name(p.argv.front()));
  return std::string(file_name(p.exe));
}

std::string program_label(const ProcessSummary& p) {
  const std::string name = program_name(p);
  if (p.exe.empty()) return name;
  if (name.empty() || name == file_name(p.exe)) return p.exe;
  return name + " (" + p.exe + ")";
}

std::string unrecorded_allocations_note(const ProcessSummary& p) {
  if (p.program_malloc.empty()) return {};
  return "the program's allocations were not recorded: it has a malloc of its own, in " + p.program_malloc;
}

void Series::add_slow(uint64_t time, uint64_t value) {
  if (!started_) {
    started_ = true;
    base_ = time;
  }
  if (time < base_) time = base_;  // out-of-order input lands in the first bucket
  const uint64_t bucket = base_ + (time - base_) / width_ * width_;
  if (!points_.empty() && points_.back().time >= bucket) {
    SeriesPoint& p = points_.back();
    if (value < p.min) p.min = value;
    if (value > p.max) p.max = value;
    p.last = value;
    return;
  }
  if (points_.size() == max_points_) {
    coarsen();
    add_slow(time, value);
    return;
  }
  points_.push_back({bucket, value, value, value});
  cur_start_ = bucket;
  cur_end_ = bucket + width_;
}

void Series::coarsen() {
  width_ *= 2;
  std::size_t out = 0;
  for (std::size_t i = 0; i < points_.size(); ++i) {
    SeriesPoint p = points_[i];
    p.time = base_ + (p.time - base_) / width_ * width_;
    if (out > 0 && points_[out - 1].time == p.time) {
      SeriesPoint& q = points_[out - 1];
      if (p.min < q.min) q.min = p.min;
      if (p.max > q.max) q.max = p.max;
      q.last = p.last;
    } else {
      points_[out++] = p;
    }
  }
  points_.resize(out);
  cur_start_ = points_.empty() ? 1 : points_.back().time;
  cur_end_ = points_.empty() ? 0 : cur_start_ + width_;
}

const ModuleInfo* Model::module(ModuleId id) const {
  for (const ModuleInfo& m : modules)
    if (m.id == id) return &m;
  return nullptr;
}

const ModuleInfo* Model::module_at(uint64_t ip) const {
  const ModuleInfo* best = nullptr;
  for (const ModuleInfo& m : modules)
    if (ip >= m.lo && ip < m.hi && (!best || m.load_time >= best->load_time)) best = &m;
  return best;
}

ModuleInfo module_info(const fmt::ModuleLoad& x) {
  ModuleInfo mi;
  mi.id = ModuleId(x.module_id);
  mi.load_bias = x.load_bias;
  mi.path = x.path;
  mi.build_id = x.build_id;
  mi.segments.assign(x.segments, x.segments + x.nseg);
  mi.load_time = x.time;
  uint64_t lo = UINT64_MAX, hi = 0, alo = UINT64_MAX, ahi = 0;
  for (const fmt::Segment& s : mi.segments) {
    const uint64_t a = x.load_bias + s.vaddr, b = a + s.memsz;
    alo = std::min(alo, a);
    ahi = std::max(ahi, b);
    if (s.flags & fmt::kSegExec) {
      lo = std::min(lo, a);
      hi = std::max(hi, b);
    }
  }
  if (hi == 0) lo = alo, hi = ahi;
  mi.lo = hi ? lo : 0;
  mi.hi = hi;
  return mi;
}

void unload_module(Model& m, const fmt::ModuleUnload& x) {
  for (auto it = m.modules.rbegin(); it != m.modules.rend(); ++it)
    if (it->id.value == x.module_id && it->unload_time == 0) {
      it->unload_time = x.time;
      return;
    }
}

void add_embedded(Model& m, const fmt::Symbols& x) {
  std::vector<EmbeddedSymbol>& v = m.embedded[x.module_id];
  fmt::SymbolIterator it(x);
  for (fmt::SymbolEntry e; it.next(e);)
    v.push_back({e.offset, std::string(e.function), std::string(e.file), static_cast<uint32_t>(e.line),
                 static_cast<uint32_t>(e.inline_depth)});
}

void sort_embedded(Model& m) {
  for (auto& [id, v] : m.embedded)
    std::stable_sort(v.begin(), v.end(), [](const EmbeddedSymbol& a, const EmbeddedSymbol& b) {
      return a.offset != b.offset ? a.offset < b.offset : a.inline_depth < b.inline_depth;
    });
}

}  // namespace memtide::analysis
