// One suite of three tests: Reuse and Grow free what they allocate, Evict leaks one buffer
// (pool_evict drops the last pointer to it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

struct Pool {
  void* slot = nullptr;
};

// Takes a new buffer for the slot; the one it held is forgotten, never freed.
__attribute__((noinline)) void pool_evict(Pool& pool, std::size_t n) {
  void* buffer = std::malloc(n);
  std::memset(buffer, 0x5a, n);
  pool.slot = buffer;
}

}  // namespace

TEST(PoolTest, Reuse) {
  void* a = std::malloc(64);
  ASSERT_NE(a, nullptr);
  std::free(a);
  void* b = std::malloc(64);
  ASSERT_NE(b, nullptr);
  std::free(b);
}

TEST(PoolTest, Grow) {
  std::vector<int> v;
  for (int i = 0; i < 1000; ++i) v.push_back(i);
  EXPECT_EQ(v.size(), 1000u);
}

TEST(PoolTest, Evict) {
  Pool pool;
  pool_evict(pool, 48);
  pool_evict(pool, 48);
  EXPECT_NE(pool.slot, nullptr);
  std::free(pool.slot);
}
