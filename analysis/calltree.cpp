#include "analysis/calltree.h"

#include <algorithm>
#include <functional>

namespace memtide::analysis {

std::string folded_label(std::string_view label) {
  if (label.empty()) return "?";
  std::string s(label);
  for (char& c : s)
    if (c == ';' || static_cast<unsigned char>(c) < 0x20) c = ':';
  return s;
}

std::string_view CallTree::intern(std::string_view s) {
  if (s.empty()) return {};
  return *strings_.emplace(s).first;
}

uint32_t CallTree::child(uint32_t parent, const Frame& f) {
  const std::string label = frame_label(f);
  const uint64_t h = std::hash<std::string>{}(label) * 31 + parent;
  for (uint64_t k = h;; ++k) {
    auto it = edges_.find(k);
    if (it == edges_.end()) {
      const auto id = static_cast<uint32_t>(nodes_.size());
      TreeNode n;
      n.parent = parent;
      n.label = intern(label);
      n.file = intern(f.file);
      n.line = f.line;
      n.module = intern(f.module);
      nodes_.push_back(std::move(n));
      nodes_[parent].children.push_back(id);
      edges_.emplace(k, id);
      return id;
    }
    const TreeNode& n = nodes_[it->second];
    if (n.parent == parent && n.label == label) return it->second;
  }
}

void CallTree::build(const Model& model, Symbolizer& symbols, Domain domain, Metric metric, bool bottom_up) {
  std::vector<Frame> frames;
  for (const StackStats& s : model.stacks[static_cast<unsigned>(domain)]) {
    const uint64_t v = s.m.value(metric);
    if (v == 0) continue;
    symbols.stack(s.stack, frames);
    if (bottom_up) std::reverse(frames.begin(), frames.end());
    uint32_t cur = 0;
    nodes_[0].total += v;
    nodes_[0].blocks += s.m.blocks(metric);
    for (const Frame& f : frames) {
      cur = child(cur, f);
      nodes_[cur].total += v;
      nodes_[cur].blocks += s.m.blocks(metric);
    }
    nodes_[cur].self += v;
  }
}

void CallTree::write_folded(std::ostream& out) const {
  if (nodes_.empty()) return;
  if (nodes_[0].self) out << "[unknown] " << nodes_[0].self << '\n';
  // Iterative depth-first walk (stacks can be thousands of frames deep); `path` holds the
  // labels from the root to the node on top of the stack.
  std::vector<std::pair<uint32_t, std::size_t>> todo;  // node, depth
  std::vector<std::string> path;
  for (auto it = nodes_[0].children.rbegin(); it != nodes_[0].children.rend(); ++it) todo.push_back({*it, 0});
  std::string line;
  while (!todo.empty()) {
    const auto [id, depth] = todo.back();
    todo.pop_back();
    const TreeNode& n = nodes_[id];
    path.resize(depth);
    path.push_back(folded_label(n.label));
    if (n.self) {
      line.clear();
      for (std::size_t i = 0; i < path.size(); ++i) {
        if (i) line += ';';
        line += path[i];
      }
      out << line << ' ' << n.self << '\n';
    }
    for (auto it = n.children.rbegin(); it != n.children.rend(); ++it) todo.push_back({*it, depth + 1});
  }
}

}  // namespace memtide::analysis
