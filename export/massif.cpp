#include "export/massif.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <unordered_map>
#include <vector>

namespace memtide::exporter {
namespace {

using namespace memtide::analysis;

// The format is line-based, and ms_print drops what follows a '#'.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '#') c = ' ';
  return s;
}

// As massif names a code address: "f (file.c:12)", "f (in /lib/libx.so)", "??? (in /lib/libx.so)".
std::string label(const Frame& f) {
  const std::string name = f.function.empty() ? std::string("???") : std::string(f.function);
  if (!f.file.empty()) return name + " (" + std::string(f.file) + ":" + std::to_string(f.line) + ")";
  if (!f.module.empty()) return name + " (in " + std::string(f.module) + ")";
  return name;
}

// A massif heap tree: the root is every allocation function, its children the allocation
// sites, theirs the callers. A node is a code address (a return address, or one of the
// functions inlined at it), as massif's nodes are.
class HeapTree {
 public:
  HeapTree(const Model& m, Symbolizer& s) : m_(m), sym_(s) { nodes_.push_back({}); }

  void add(StackId stack, uint64_t bytes) {
    if (bytes == 0) return;
    nodes_[0].bytes += bytes;
    ips_.clear();
    m_.stack_table.frames(stack, ips_);
    uint32_t at = 0;
    for (auto ip = ips_.rbegin(); ip != ips_.rend(); ++ip) {
      const std::span<const Frame> frames = sym_.resolve(*ip);
      for (std::size_t k = frames.size(); k-- > 0;) {
        at = child(at, *ip, static_cast<uint32_t>(k), frames[k]);
        nodes_[at].bytes += bytes;
      }
    }
  }

  // The tree's lines, depth-first with the largest child first; `threshold_pct` as massif's.
  void write(std::ostream& out, double threshold_pct) {
    const uint64_t total = nodes_[0].bytes;
    auto significant = [&](uint64_t b) { return static_cast<double>(b) * 100 >= threshold_pct * static_cast<double>(total); };
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.2f%%", threshold_pct);
    // (node, depth); iterative: a stack may be thousands of frames deep.
    std::vector<std::pair<uint32_t, uint32_t>> todo{{0, 0}};
    while (!todo.empty()) {
      const auto [n, depth] = todo.back();
      todo.pop_back();
      Node& node = nodes_[n];
      std::sort(node.children.begin(), node.children.end(),
                [&](uint32_t a, uint32_t b) { return nodes_[a].bytes > nodes_[b].bytes; });
      std::size_t shown = 0;
      uint64_t rest = 0;
      for (uint32_t c : node.children)
        if (significant(nodes_[c].bytes)) ++shown;
        else rest += nodes_[c].bytes;
      const std::size_t folded = node.children.size() - shown;
      const std::string indent(depth, ' ');
      out << indent << 'n' << shown + (folded ? 1 : 0) << ": " << node.bytes << ' '
          << (n == 0 ? "(heap allocation functions) malloc/new/new[], --alloc-fns, etc." : node.label) << '\n';
      // Children are printed after their parent, the folded line last: push in reverse.
      if (folded) {
        todo.push_back({kFolded + static_cast<uint32_t>(folded_.size()), depth + 1});
        folded_.push_back(indent + " n0: " + std::to_string(rest) + " in " + std::to_string(folded) +
                          (folded == 1 ? " place, below" : " places, all below") + " massif's threshold (" + pct + ")");
      }
      for (std::size_t i = shown; i-- > 0;) todo.push_back({node.children[i], depth + 1});
      while (!todo.empty() && todo.back().first >= kFolded) {
        out << folded_[todo.back().first - kFolded] << '\n';
        todo.pop_back();
      }
    }
  }

 private:
  static constexpr uint32_t kFolded = 1u << 31;  // todo entries that stand for a folded line
  struct Node {
    uint64_t bytes = 0;
    std::string label;
    std::vector<uint32_t> children;
  };
  struct Key {
    uint32_t parent, inline_index;
    uint64_t ip;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      return std::hash<uint64_t>{}(k.ip * 0x9E3779B97F4A7C15ull ^ (uint64_t{k.parent} << 8) ^ k.inline_index);
    }
  };

  uint32_t child(uint32_t parent, uint64_t ip, uint32_t inline_index, const Frame& f) {
    auto [it, fresh] = index_.try_emplace(Key{parent, inline_index, ip}, static_cast<uint32_t>(nodes_.size()));
    if (!fresh) return it->second;
    Node n;
    char addr[32];
    std::snprintf(addr, sizeof addr, "0x%" PRIX64 ": ", ip ? ip - 1 : 0);
    n.label = addr + one_line(label(f));
    nodes_.push_back(std::move(n));
    nodes_[parent].children.push_back(it->second);
    return it->second;
  }

  const Model& m_;
  Symbolizer& sym_;
  std::vector<Node> nodes_;
  std::unordered_map<Key, uint32_t, KeyHash> index_;
  std::vector<std::string> folded_;
  std::vector<uint64_t> ips_;
};

struct Snapshot {
  uint64_t time = 0, bytes = 0;
  enum Kind { Empty, Peak, Detailed } kind = Empty;
};

}  // namespace

void write_massif(const Model& m, Symbolizer& symbols, const MassifOptions& o, std::ostream& out) {
  const Totals& heap = m.heap();
  std::vector<Snapshot> snaps{{m.time_base, 0, Snapshot::Empty}};
  for (const SeriesPoint& p : m.heap_series.points()) snaps.push_back({p.time, std::min(p.max, heap.peak_bytes), Snapshot::Empty});
  snaps.push_back({std::max(heap.peak_time, m.time_base), heap.peak_bytes, Snapshot::Peak});
  const uint64_t end_bytes = m.heap_series.points().empty() ? 0 : m.heap_series.points().back().last;
  snaps.push_back({std::max(m.last_time, m.time_base), end_bytes, Snapshot::Detailed});
  std::stable_sort(snaps.begin(), snaps.end(), [](const Snapshot& a, const Snapshot& b) { return a.time < b.time; });

  std::string cmd;
  for (const std::string& a : m.process.argv) cmd += (cmd.empty() ? "" : " ") + a;
  if (cmd.empty()) cmd = m.process.exe.empty() ? o.source : m.process.exe;
  out << "desc: memtide export" << (o.source.empty() ? "" : " of " + one_line(o.source)) << '\n'
      << "cmd: " << one_line(cmd) << '\n'
      << "time_unit: ms\n";
  const auto& stacks = m.stacks[static_cast<unsigned>(Domain::Heap)];
  for (std::size_t i = 0; i < snaps.size(); ++i) {
    const Snapshot& s = snaps[i];
    char time[48];
    std::snprintf(time, sizeof time, "%.3f", static_cast<double>(s.time - m.time_base) / 1e6);
    out << "#-----------\nsnapshot=" << i << "\n#-----------\ntime=" << time << "\nmem_heap_B=" << s.bytes
        << "\nmem_heap_extra_B=0\nmem_stacks_B=0\n";
    if (s.kind == Snapshot::Empty) {
      out << "heap_tree=empty\n";
      continue;
    }
    out << (s.kind == Snapshot::Peak ? "heap_tree=peak\n" : "heap_tree=detailed\n");
    HeapTree tree(m, symbols);
    for (const StackStats& st : stacks) tree.add(st.stack, s.kind == Snapshot::Peak ? st.m.peak_bytes : st.m.leaked_bytes);
    tree.write(out, o.threshold_pct);
  }
}

}  // namespace memtide::exporter
