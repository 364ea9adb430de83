// DenseArena: where LiveMap (live_map.h) keeps its dense pages' records, a few KiB each and
// two sizes. Made one after another in chunks of 2 MiB mapped on their own and in huge pages
// where the system allows them: from malloc, each 4 KiB of records was a page fault (the kernel
// time of a replay of 10 M live blocks was most of its growth over a replay of 10 K), and the
// records of a sweep's pages sit one after another. A freed record waits on its size's free
// list for the next; the chunks go back to the system with the arena (LiveMap::clear).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

namespace memtide::analysis {

class DenseArena {
 public:
  static constexpr std::size_t kChunk = std::size_t{2} << 20;

  DenseArena() = default;
  DenseArena(const DenseArena&) = delete;
  DenseArena& operator=(const DenseArena&) = delete;
  ~DenseArena() { clear(); }

  // A record of `bytes` of size class `cls` (0 or 1; each class one size).
  void* allocate(unsigned cls, std::size_t bytes) {
    if (void* p = free_[cls]) {
      free_[cls] = *static_cast<void**>(p);
      return p;
    }
    bytes = (bytes + 63) / 64 * 64;
    if (static_cast<std::size_t>(end_ - next_) < bytes) new_chunk();
    return std::exchange(next_, next_ + bytes);
  }
  void deallocate(unsigned cls, void* p) {
    *static_cast<void**>(p) = free_[cls];
    free_[cls] = p;
  }
  std::size_t bytes() const { return chunks_.size() * kChunk; }
  void clear() {
    for (void* c : chunks_) munmap(c, kChunk);
    chunks_.clear();
    next_ = end_ = nullptr;
    free_[0] = free_[1] = nullptr;
  }

 private:
  // A 2 MiB-aligned chunk (so that it can be one huge page): twice that mapped, the rest unmapped.
  void new_chunk() {
    void* m = mmap(nullptr, 2 * kChunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    char* const base = static_cast<char*>(m);
    char* const c = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(base) + kChunk - 1) & ~(kChunk - 1));
    if (c > base) munmap(base, static_cast<std::size_t>(c - base));
    if (c + kChunk < base + 2 * kChunk) munmap(c + kChunk, static_cast<std::size_t>(base + 2 * kChunk - (c + kChunk)));
    madvise(c, kChunk, MADV_HUGEPAGE);  // (advice: refused or ignored, the chunk works the same)
    chunks_.push_back(c);
    next_ = c;
    end_ = c + kChunk;
  }

  std::vector<void*> chunks_;
  char* next_ = nullptr;
  char* end_ = nullptr;
  void* free_[2] = {nullptr, nullptr};
};

}  // namespace memtide::analysis
