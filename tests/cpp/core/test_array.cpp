#include <gtest/gtest.h>

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

TEST(Array, LargeBuffersAreRecycled) {
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
