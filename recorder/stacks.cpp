// The stack table: each distinct call stack is stored once, as a path in a trie of
// (parent node, return address) nodes, and named by the id of its last node.
//
// Lookup, fastest first:
//   1. the thread's direct-mapped cache: full-stack hash -> id (no shared memory touched);
//   2. the shared index: full-stack hash -> id, an open-addressing table written only under
//      `stacks_mutex` and read without any lock (entries are published with release stores;
//      a grown table replaces the old one, which is kept, never freed, for late readers);
//   3. first sight: under `stacks_mutex`, walk the trie from the root, create the missing
//      nodes, append one StackDef record for them to the calling thread's stream.
// The full-stack hash is 64-bit XXH3 over the return addresses; two different stacks with
// the same hash (odds ~n^2 / 2^65) would share an id.
// Inlined from the library's header (its XXH_INLINE_ALL mode): one hash per allocation.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstring>

#include "formats/encoder.h"
#include "formats/check.h"
#include "formats/record_builders.h"
#include "recorder/stacks.h"
#include "recorder/state.h"
#include "recorder/stream.h"
#include "recorder/trace_state.h"

namespace memtide::rec {

pthread_mutex_t stacks_mutex = MT_MUTEX_INITIALIZER;

namespace {

using Index = StackTables::Index;
using IndexEntry = StackTables::IndexEntry;

// A node is found by its path key, a hash of the return addresses from the root down to it
// (child_key), and its parent's id. The key of a node's child is a bijection of the child's
// return address, so among the children of one node (same parent id, same parent key) equal
// keys mean equal addresses: the match is exact. Since the key of each depth follows from the
// addresses alone, not from the node found one level up, the probes of a walk down the trie do
// not wait for each other (a new stack of cc1plus walks about ten known levels before its new
// ones, each probe a cache miss in a table of tens of megabytes).
using TrieEntry = StackTables::TrieEntry;
using Trie = StackTables::Trie;

// The path key of the root, and of a child given its parent's (a bijection of `ip` for a given
// parent key: xor, then the 64-bit finalizer of MurmurHash3, itself a bijection).
constexpr uint64_t kRootKey = 0x632BE59BD9B4E019ull;
inline uint64_t child_key(uint64_t parent_key, uint64_t ip) {
  uint64_t h = parent_key ^ ip;
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 33);
}

Index* index_new(uint64_t capacity) {
  auto* t = static_cast<Index*>(mem_alloc(sizeof(Index) + capacity * sizeof(IndexEntry)));
  if (t) t->mask = capacity - 1;
  return t;
}

void index_put(Index* t, uint64_t hash, uint32_t id) {
  for (uint64_t i = hash & t->mask;; i = (i + 1) & t->mask) {
    if (t->slots[i].hash.load(std::memory_order_relaxed) == 0) {
      t->slots[i].id = id;
      t->slots[i].hash.store(hash, std::memory_order_release);
      ++t->used;
      return;
    }
  }
}

// Under stacks_mutex.
void index_insert(uint64_t hash, uint32_t id) {
  Index* t = g_trace.stacks.index.load(std::memory_order_relaxed);
  if (!t || (t->used + 1) * 2 > t->mask + 1) {
    Index* bigger = index_new(t ? (t->mask + 1) * 2 : 4096);
    if (!bigger) return;  // out of memory: the stack is re-resolved through the trie next time
    if (t) {
      for (uint64_t i = 0; i <= t->mask; ++i) {
        const uint64_t h = t->slots[i].hash.load(std::memory_order_relaxed);
        if (h) index_put(bigger, h, t->slots[i].id);
      }
    }
    bigger->retired = t;
    g_trace.stacks.index.store(bigger, std::memory_order_release);
    t = bigger;
  }
  index_put(t, hash, id);
}

uint32_t index_find(uint64_t hash) {
  Index* t = g_trace.stacks.index.load(std::memory_order_acquire);
  if (!t) return 0;
  for (uint64_t i = hash & t->mask;; i = (i + 1) & t->mask) {
    const uint64_t h = t->slots[i].hash.load(std::memory_order_acquire);
    if (h == hash) return t->slots[i].id;
    if (h == 0) return 0;
  }
}

// Under stacks_mutex.
bool trie_grow() {
  const uint64_t cap = g_trace.stacks.trie.slots ? (g_trace.stacks.trie.mask + 1) * 2 : 8192;
  auto* slots = static_cast<TrieEntry*>(mem_alloc(cap * sizeof(TrieEntry)));
  if (!slots) return false;
  for (uint64_t i = 0; g_trace.stacks.trie.slots && i <= g_trace.stacks.trie.mask; ++i) {
    const TrieEntry& e = g_trace.stacks.trie.slots[i];
    if (!e.id) continue;
    for (uint64_t j = e.key & (cap - 1);; j = (j + 1) & (cap - 1)) {
      if (!slots[j].id) {
        slots[j] = e;
        break;
      }
    }
  }
  mem_free(g_trace.stacks.trie.slots);
  g_trace.stacks.trie.slots = slots;
  g_trace.stacks.trie.mask = cap - 1;
  return true;
}

// The id of the child of `parent` whose path key is `key`, or 0.
uint32_t trie_find(uint32_t parent, uint64_t key) {
  if (!g_trace.stacks.trie.slots) return 0;
  for (uint64_t i = key & g_trace.stacks.trie.mask;; i = (i + 1) & g_trace.stacks.trie.mask) {
    const TrieEntry& e = g_trace.stacks.trie.slots[i];
    if (!e.id) return 0;
    if (e.key == key && e.parent == parent) return e.id;
  }
}

bool trie_add(uint32_t parent, uint64_t key, uint32_t id) {
  if ((g_trace.stacks.trie.used + 1) * 2 > (g_trace.stacks.trie.slots ? g_trace.stacks.trie.mask + 1 : 0) && !trie_grow()) return false;
  for (uint64_t i = key & g_trace.stacks.trie.mask;; i = (i + 1) & g_trace.stacks.trie.mask) {
    TrieEntry& e = g_trace.stacks.trie.slots[i];
    if (!e.id) {
      e = TrieEntry{key, parent, id};
      ++g_trace.stacks.trie.used;
      return true;
    }
  }
}

// First sight of a stack (under stacks_mutex): create its missing nodes and define them.
// `path`: the calling thread's last path (may be null), used and updated.
uint32_t insert_stack(Stream* s, void* const* ips, int n, uint64_t hash, TriePath* path) {
  uint32_t node = 0;
  uint64_t key = kRootKey;
  int i = n - 1;  // ips are leaf first; the trie goes root first
  if (path && n > kTriePathMax) path->n = 0;
  if (path && path->n) {
    // The outer frames this stack shares with the thread's last new stack have their nodes.
    int common = 0;
    const int limit = n < path->n ? n : path->n;
    while (common < limit && path->ip[common] == reinterpret_cast<uint64_t>(ips[n - 1 - common])) ++common;
    if (common) {
      node = path->node[common - 1];
      key = path->key[common - 1];
      i = n - 1 - common;
    }
  }
  // Every level's slot is fetched before the first is probed: the keys follow from the
  // addresses alone, and each probe of a large table is a cache miss (as is the slot a new
  // node is written to, the same one).
  if (g_trace.stacks.trie.slots) {
    uint64_t k = key;
    for (int j = i; j >= 0; --j) {
      k = child_key(k, reinterpret_cast<uint64_t>(ips[j]));
      __builtin_prefetch(&g_trace.stacks.trie.slots[k & g_trace.stacks.trie.mask], 1);
    }
  }
  for (; i >= 0; --i) {
    const uint64_t child_k = child_key(key, reinterpret_cast<uint64_t>(ips[i]));
    const uint32_t child = trie_find(node, child_k);
    if (!child) break;
    node = child;
    key = child_k;
    if (path && n <= kTriePathMax) {
      path->node[n - 1 - i] = node;
      path->key[n - 1 - i] = key;
      path->ip[n - 1 - i] = reinterpret_cast<uint64_t>(ips[i]);
    }
  }
  if (i >= 0) {
    const uint32_t parent = node;
    const uint32_t first = g_trace.stacks.next_id;
    const uint32_t count = static_cast<uint32_t>(i + 1);
    // Static: we hold stacks_mutex. (count <= --max-depth <= 1024)
    static uint64_t frames[1100];
    static uint8_t buf[1 + fmt::kLengthSlot + 3 * wire::kMaxVarint + 1100 * wire::kMaxVarint];
    MEMTIDE_CHECK(count <= sizeof frames / sizeof frames[0]);
    for (uint32_t k = 0; i >= 0; --i, ++k) {
      const uint64_t ip = reinterpret_cast<uint64_t>(ips[i]);
      key = child_key(key, ip);
      if (!trie_add(node, key, g_trace.stacks.next_id)) {
        if (path) path->n = 0;
        return 0;
      }
      node = g_trace.stacks.next_id++;
      if (path && n <= kTriePathMax) {
        path->node[n - 1 - i] = node;
        path->key[n - 1 - i] = key;
        path->ip[n - 1 - i] = ip;
      }
      frames[k] = ip;
    }
    const size_t len = fmt::encode_stack_def(buf, sizeof buf, fmt::StackDef{first, parent, count, frames});
    if (!len || !append_stack_record(s, buf, len)) {
      if (path) path->n = 0;
      return 0;
    }
  }
  if (path) path->n = n <= kTriePathMax ? n : 0;
  index_insert(hash, node);
  return node;
}

}  // namespace

namespace {
inline bool is_own_frame(const void* ip) {
  const auto a = reinterpret_cast<uintptr_t>(ip);
  return a >= recording.own_lo && a < recording.own_hi;
}
}  // namespace

uint32_t stack_id(ThreadState* ts, Stream* s, void* const* ips, int n) {
  // The stack fast_backtrace just stored, if these are its return addresses: a stack found
  // again (the same frames from the same start) has the id it was given last time.
  KeptStack* kept = nullptr;
  if (ts && ts->memo.kept_for_id) {
    UnwindMemo& m = ts->memo;
    if (ips >= m.kept_for_id_ips && ips <= m.kept_for_id_ips + m.kept_for_id_n) {
      kept = m.kept_for_id;
      MEMTIDE_CHECK(kept->n > 0 && kept->n <= kKeptFrames && m.kept_for_id_n == kept->n);
      const int skip = static_cast<int>(ips - m.kept_for_id_ips);
      if (m.kept_for_id_known && kept->id_skip == skip && kept->id_n == n) {
        m.kept_for_id = nullptr;
        return kept->id;
      }
      kept->has_id = false;
      kept->id_skip = skip;
      kept->id_n = n;
      kept->id_own_known = recording.own_range_known;
    }
    m.kept_for_id = nullptr;
  }
  if (n <= 0) {
    if (kept) kept->has_id = true, kept->id = 0;
    return 0;
  }
  uint64_t hash = XXH3_64bits(ips, static_cast<size_t>(n) * sizeof(void*));
  if (hash == 0) hash = 1;
  StackCacheEntry* ce = nullptr;
  if (ts) {
    ce = &ts->cache[hash % kStackCacheSize];
    if (ce->hash == hash) {
      if (kept) {
        kept->id = ce->id;
        kept->has_id = true;
      }
      return ce->id;
    }
  }
  uint32_t id = index_find(hash);
  if (!id) {
    // The frames of the recorder's interposers inside a new stack (dlopen's, whose real
    // function allocates) are left out of its definition: the program called the function they
    // stand for. The index keeps the hash of the frames as captured, so the same stack found
    // again has the same id.
    void* const* def = ips;
    int def_n = n;
    if (recording.own_range_known) {
      int own = 0;
      for (int i = 0; i < n; ++i) own += is_own_frame(ips[i]);
      if (own && own < n) {
        auto** kept = static_cast<void**>(__builtin_alloca(static_cast<size_t>(n) * sizeof(void*)));
        def_n = 0;
        for (int i = 0; i < n; ++i)
          if (!is_own_frame(ips[i])) kept[def_n++] = ips[i];
        def = kept;
      }
    }
    pthread_mutex_lock(&stacks_mutex);
    id = index_find(hash);
    if (!id) id = insert_stack(s, def, def_n, hash, ts ? &ts->path : nullptr);
    pthread_mutex_unlock(&stacks_mutex);
  }
  if (ce && id) *ce = StackCacheEntry{hash, id};
  if (kept && id) {
    kept->id = id;
    kept->has_id = true;
  }
  return id;
}

}  // namespace memtide::rec
