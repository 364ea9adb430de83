#include "analysis/calltree.h"

#include <algorithm>
#include <cstdint>
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

CallTree::Labelled CallTree::labelled_frame(const Frame& f) {
  return {intern(frame_label(f)), intern(f.file), intern(f.module), f.line};
}

uint32_t CallTree::child(uint32_t parent, const Labelled& f) {
  const auto [it, added] = edges_.try_emplace({parent, f.label.data()}, 0);
  if (!added) return it->second;
  const auto id = static_cast<uint32_t>(nodes_.size());
  TreeNode n;
  n.parent = parent;
  n.label = f.label;
  n.file = f.file;
  n.line = f.line;
  n.module = f.module;
  nodes_.push_back(std::move(n));
  nodes_[parent].children.push_back(id);
  it->second = id;
  return id;
}

// The frames of a stack are Symbolizer::stack's (each return address's frames in their order,
// all reversed for bottom-up). Each return address's frames are labelled and their labels
// interned once per build, so that a node's children are found by the label's one string, not
// by building and hashing the label again for every frame of every stack. Top-down, the tree
// node a stack ends at is found once per node of the stack trie (`at`: its parent's, then the
// frames of its return address), so the frames of the prefixes stacks share are not walked
// again for every stack; each stack's value is added where it ends and summed up the tree at
// the end (a node's children come after it). Bottom-up, each stack is walked from its
// allocation site. (The C++ compiler's deep stacks: building and hashing every frame's label
// for every stack was most of a tree's build.)
void CallTree::build(const Model& model, Symbolizer& symbols, Domain domain, Metric metric, bool bottom_up) {
  static const Frame kUnknown{"<unknown>", {}, 0, {}, 0, false};
  const Labelled unknown = labelled_frame(kUnknown);
  std::vector<Labelled> labelled;
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> of_ip;  // [begin, end) in `labelled`
  auto frames_of = [&](uint64_t ip) {
    const auto [it, added] = of_ip.try_emplace(ip, 0, 0);
    if (added) {
      const auto begin = static_cast<uint32_t>(labelled.size());
      for (const Frame& f : symbols.resolve(ip)) labelled.push_back(labelled_frame(f));
      it->second = {begin, static_cast<uint32_t>(labelled.size())};
    }
    return it->second;
  };
  // The edges are kept only while building (a tree of a compiler's trace has millions of
  // nodes): a second build into the same tree finds them again from the nodes.
  if (edges_.empty())
    for (uint32_t i = 1; i < nodes_.size(); ++i) edges_.emplace(std::pair{nodes_[i].parent, nodes_[i].label.data()}, i);
  const StackTable& table = model.stack_table;
  // Top-down: trie node -> tree node (ids are dense: a vector; kNone where not known yet).
  constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> at;
  std::unordered_map<uint64_t, uint32_t> at_sparse;  // ids past StackTable::kDenseLimit
  auto known = [&](uint64_t id) -> uint32_t {
    if (id < StackTable::kDenseLimit) return id < at.size() ? at[id] : kNone;
    const auto it = at_sparse.find(id);
    return it == at_sparse.end() ? kNone : it->second;
  };
  auto remember = [&](uint64_t id, uint32_t node) {
    if (id >= StackTable::kDenseLimit) {
      at_sparse.emplace(id, node);
      return;
    }
    if (id >= at.size()) at.resize(std::max<std::size_t>(id + 1, at.size() * 3 / 2), kNone);
    at[id] = node;
  };
  std::vector<uint64_t> chain, ips;
  std::vector<uint64_t> end_value(nodes_.size()), end_blocks(nodes_.size());
  for (const StackStats& s : model.stacks[static_cast<unsigned>(domain)]) {
    const uint64_t v = s.m.value(metric);
    if (v == 0) continue;
    const uint64_t blocks = s.m.blocks(metric);
    uint32_t cur = 0;
    bool walked = false;
    if (!bottom_up) {
      // Up the trie to a node whose tree node is known (the root's is 0), then down again.
      chain.clear();
      uint64_t id = s.stack.value;
      bool broken = false;  // a node on the way is undefined: the stack starts at <unknown>
      while (id != 0) {
        if (const uint32_t k = known(id); k != kNone) {
          cur = k;
          break;
        }
        const StackTable::Node* n = table.node(StackId(id));
        if (!n || chain.size() >= StackTable::kMaxDepth) {
          broken = n == nullptr;
          break;
        }
        chain.push_back(id);
        id = n->parent;
      }
      if (chain.size() < StackTable::kMaxDepth) {
        if (broken) cur = child(0, unknown);
        for (auto c = chain.rbegin(); c != chain.rend(); ++c) {
          const auto [b, e] = frames_of(table.node(StackId(*c))->ip);
          for (uint32_t i = b; i < e; ++i) cur = child(cur, labelled[i]);
          remember(*c, cur);
        }
        walked = true;
      }
    }
    if (!walked) {  // bottom-up, or a chain too long to be a stack (a hostile file's cycle)
      const bool whole = table.frames(s.stack, ips);
      cur = 0;
      if (!whole && !bottom_up) cur = child(cur, unknown);
      if (bottom_up) {
        for (auto ip = ips.rbegin(); ip != ips.rend(); ++ip) {
          const auto [b, e] = frames_of(*ip);
          for (uint32_t i = e; i-- > b;) cur = child(cur, labelled[i]);
        }
      } else {
        for (const uint64_t ip : ips) {
          const auto [b, e] = frames_of(ip);
          for (uint32_t i = b; i < e; ++i) cur = child(cur, labelled[i]);
        }
      }
      if (!whole && bottom_up) cur = child(cur, unknown);
    }
    if (end_value.size() < nodes_.size()) {
      end_value.resize(nodes_.size());
      end_blocks.resize(nodes_.size());
    }
    end_value[cur] += v;
    end_blocks[cur] += blocks;
  }
  end_value.resize(nodes_.size());
  end_blocks.resize(nodes_.size());
  decltype(edges_)().swap(edges_);
  std::vector<uint32_t>().swap(at);
  std::vector<uint64_t> below_value = end_value, below_blocks = end_blocks;  // the node's and its subtree's
  for (std::size_t i = nodes_.size(); i-- > 0;) {
    TreeNode& n = nodes_[i];
    n.self += end_value[i];
    n.total += below_value[i];
    n.blocks += below_blocks[i];
    if (i) {
      below_value[n.parent] += below_value[i];
      below_blocks[n.parent] += below_blocks[i];
    }
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
