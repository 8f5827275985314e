#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "tessera/core/array.hpp"
#include "tessera/core/value.hpp"

using namespace tessera;

TEST(Array, ShapeAndSize) {
  Array a(DType::float32, {2, 3});
  EXPECT_EQ(a.size(), 6);
  EXPECT_EQ(a.ndim(), 2);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.raw()) % 64, 0u);
  EXPECT_EQ(shape_str(a.shape()), "(2, 3)");
  EXPECT_EQ(shape_str({5}), "(5,)");
  EXPECT_EQ(shape_str({}), "()");
}

TEST(Array, Printing) {
  Array a = Array::from_vector<double>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(a.str(), "[[1. 2.]\n [3. 4.]]");
  Array b = Array::from_vector<double>({0.5, 1.25, -3});
  EXPECT_EQ(b.str(), "[ 0.5   1.25 -3.  ]");
  Array c = Array::from_vector<int64_t>({1, -20, 300});
  EXPECT_EQ(c.str(), "[  1 -20 300]");
  Array d = Array::from_vector<bool>({true, false});
  EXPECT_EQ(d.str(), "[ True False]");
  EXPECT_EQ(Array(DType::float64, {0}).str(), "[]");
  EXPECT_EQ(Array::scalar(2.5).str(), "2.5");
}

TEST(Array, ResultTypeFollowsNep50) {
  Value f32 = Array(DType::float32, {2});
  Value i64 = Array(DType::int64, {2});
  Value b = Array(DType::bool_, {2});
  EXPECT_EQ(result_type(f32, Value(1.5)), DType::float32);
  EXPECT_EQ(result_type(i64, Value(1.5)), DType::float64);
  EXPECT_EQ(result_type(b, Value(int64_t{1})), DType::int64);
  EXPECT_EQ(result_type(i64, f32), DType::float64);
  EXPECT_EQ(result_type(Value(int64_t{1}), Value(2.0)), DType::float64);
}

TEST(Array, SmallBuffersAreRecycledPerThreadAndStayIntact) {
  // A freed small block comes back to the next array of its size class on
  // the same thread.
  const void* first;
  {
    Array a(DType::float32, {1024});
    first = a.raw();
  }
  Array b(DType::float32, {1000});  // 4,000 bytes: the same 4 KiB class
  EXPECT_EQ(b.raw(), first);
  // Many sizes, on several threads, freed on other threads than the one
  // that made them: every block aligned, and no array's data changed by
  // another's.
  constexpr int kThreads = 4, kArrays = 300;
  std::vector<std::vector<Array>> made(kThreads);
  auto fill = [&](int t) {
    for (int i = 0; i < kArrays; ++i) {
      int64_t n = 1 + (i * 37 + t * 11) % 9000;  // up to 72 KB: small classes and beyond
      Array a(DType::float64, {n});
      double* d = a.data<double>();
      for (int64_t k = 0; k < n; ++k) d[k] = t * 1e6 + i * 1e3 + static_cast<double>(k % 997);
      made[t].push_back(a);
      if (i % 3 == 0) made[t].pop_back();  // freed at once, on this thread
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(fill, t);
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    int i = 0;
    for (const Array& a : made[t]) {
      while (i % 3 == 0) ++i;  // the ones freed at once
      EXPECT_EQ(reinterpret_cast<uintptr_t>(a.raw()) % 64, 0u);
      const double* d = a.data<double>();
      bool intact = true;
      for (int64_t k = 0; k < a.size(); ++k) {
        intact = intact && d[k] == t * 1e6 + i * 1e3 + static_cast<double>(k % 997);
      }
      EXPECT_TRUE(intact) << "thread " << t << " array " << i;
      ++i;
    }
  }
  // Freed here, on the main thread (its lists take what fits, the rest is freed).
  made.clear();
}

TEST(Array, LargeBuffersAreRecycled) {
  if (memory_stats().cache_limit == 0) GTEST_SKIP() << "no block cache (TESSERA_CACHE_BYTES=0)";
  const void* first;
  {
    Array a(DType::float32, {1024, 1024});
    first = a.raw();
  }
  Array b(DType::float32, {1024, 1024});
  EXPECT_EQ(b.raw(), first);  // the freed block came back
  Array c(DType::float32, {1024, 1024});
  EXPECT_NE(c.raw(), b.raw());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c.raw()) % 64, 0u);
}

TEST(Array, CacheServesSlightlySmallerRequests) {
  if (memory_stats().cache_limit == 0) GTEST_SKIP() << "no block cache (TESSERA_CACHE_BYTES=0)";
  { Array big(DType::float32, {4 << 20}); }  // 16 MiB live once: room under the high water
  release_cached_blocks();
  const void* first;
  {
    Array a(DType::float32, {1000, 1000});  // 4 MB
    first = a.raw();
  }
  const size_t cached = memory_stats().cached;
  EXPECT_GE(cached, size_t{4000000});
  EXPECT_LT(cached, size_t{4000000} + (size_t{64} << 10));
  {
    Array b(DType::float32, {1000, 960});  // 4% smaller: takes the cached block
    EXPECT_EQ(b.raw(), first);
    EXPECT_EQ(memory_stats().cached, 0u);
  }
  EXPECT_EQ(memory_stats().cached, cached);  // the whole block went back
  {
    Array c(DType::float32, {1000, 500});  // half the size: not worth the block
    EXPECT_NE(c.raw(), first);
    EXPECT_EQ(memory_stats().cached, cached);
  }
  release_cached_blocks();
  EXPECT_EQ(memory_stats().cached, 0u);
}

// Of several cached blocks of one size, a request takes the one freed last
// (still in cache), not the one freed first.
TEST(Array, CacheServesTheBlockFreedLast) {
  if (memory_stats().cache_limit == 0) GTEST_SKIP() << "no block cache (TESSERA_CACHE_BYTES=0)";
  { Array big(DType::float32, {8 << 20}); }  // 32 MiB live once: room under the high water
  release_cached_blocks();
  const void *older, *newer;
  {
    Array a(DType::float32, {1000, 1000}), b(DType::float32, {1000, 1000});
    older = a.raw();
    newer = b.raw();
    a = Array();  // freed first
  }               // b freed last
  Array c(DType::float32, {1000, 1000});
  EXPECT_EQ(c.raw(), newer);
  Array d(DType::float32, {1000, 1000});
  EXPECT_EQ(d.raw(), older);
  release_cached_blocks();
}

TEST(Array, CacheStaysUnderTheHighWaterMark) {
  if (memory_stats().cache_limit == 0) GTEST_SKIP() << "no block cache (TESSERA_CACHE_BYTES=0)";
  release_cached_blocks();
  { Array a(DType::float32, {1000, 1000}); }  // kept: 4 MB
  ASSERT_GT(memory_stats().cached, 0u);
  MemoryStats m = memory_stats();
  ASSERT_LE(m.live + m.cached, m.high_water);
  // A request no kept block serves, big enough to set a new high water mark:
  // the kept block goes back to malloc rather than sit beside it.
  const int64_t n = static_cast<int64_t>(m.high_water - m.live) / 4 + (1 << 20);
  {
    Array big(DType::float32, {n});
    EXPECT_EQ(memory_stats().cached, 0u);
  }
  // Freed at the mark: kept again (live + kept = the mark).
  m = memory_stats();
  EXPECT_GT(m.cached, 0u);
  EXPECT_LE(m.live + m.cached, m.high_water);
  release_cached_blocks();
}

TEST(Array, MemoryStatsCountLiveBytes) {
  const MemoryStats before = memory_stats();
  reset_peak_memory();
  {
    Array a(DType::float64, {1 << 20});  // 8 MiB
    Array b(DType::float64, {1 << 19});  // 4 MiB
    EXPECT_EQ(memory_stats().live, before.live + (size_t{12} << 20));
  }
  EXPECT_EQ(memory_stats().live, before.live);
  EXPECT_GE(memory_stats().peak_live, before.live + (size_t{12} << 20));
  reset_peak_memory();
  EXPECT_EQ(memory_stats().peak_live, memory_stats().live);
  // Views and wrapped memory own nothing.
  std::vector<double> outside(1 << 20);
  Array w = Array::wrap(DType::float64, {1 << 20}, outside.data(), nullptr);
  EXPECT_EQ(memory_stats().live, before.live);
}
