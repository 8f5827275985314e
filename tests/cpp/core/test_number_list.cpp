// Lists of numbers held unboxed (NumberList): every item reads back as the
// Value it stands for, of its kind; the first access as Values writes them
// out once (also from several threads at once) and the Values are the list
// from then on; np.array of one copies the bits with NumPy's dtype.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "tessera/core/value.hpp"

using namespace tessera;

namespace {

uint64_t nlist_bits(double f) {
  uint64_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// The same item: kind, dtype of a NumPy scalar, and value.
void nlist_expect_same(const Value& got, const Value& want) {
  ASSERT_EQ(got.kind(), want.kind());
  if (want.is_array()) {
    EXPECT_EQ(got.as_array().ndim(), 0);
    EXPECT_EQ(got.as_array().dtype(), want.as_array().dtype());
    EXPECT_EQ(got.as_array().get_double(0), want.as_array().get_double(0));
  } else {
    EXPECT_TRUE(got.equals(want));
  }
}

struct NlistCase {
  NumberKind kind;
  std::vector<uint64_t> bits;
  std::vector<Value> want;
  DType dtype;
};

std::vector<NlistCase> nlist_cases() {
  std::vector<NlistCase> cases;
  cases.push_back({NumberKind::py_int, {0, 5, static_cast<uint64_t>(-7)},
                   {Value(int64_t{0}), Value(int64_t{5}), Value(int64_t{-7})}, DType::int64});
  cases.push_back({NumberKind::py_float, {nlist_bits(0.5), nlist_bits(-0.0)},
                   {Value(0.5), Value(-0.0)}, DType::float64});
  cases.push_back({NumberKind::py_bool, {1, 0}, {Value(true), Value(false)}, DType::bool_});
  cases.push_back({NumberKind::np_float64, {nlist_bits(2.25)}, {Value(Array::scalar(2.25))},
                   DType::float64});
  cases.push_back({NumberKind::np_int64, {static_cast<uint64_t>(-3)},
                   {Value(Array::scalar_int(-3))}, DType::int64});
  cases.push_back({NumberKind::np_float32, {nlist_bits(1.5)},
                   {Value(Array::scalar(1.5, DType::float32))}, DType::float32});
  cases.push_back({NumberKind::np_int32, {static_cast<uint64_t>(-9)},
                   {Value(Array::scalar(-9.0, DType::int32))}, DType::int32});
  cases.push_back({NumberKind::np_bool, {1}, {Value(Array::scalar_bool(true))}, DType::bool_});
  return cases;
}

}  // namespace

TEST(NumberList, ItemsReadBackAsTheirKind) {
  for (const NlistCase& c : nlist_cases()) {
    const Value v = Value::number_list(c.kind, c.bits);
    ASSERT_TRUE(v.is_list());
    EXPECT_FALSE(v.is_tuple());
    ASSERT_NE(v.number_items(), nullptr);
    ASSERT_EQ(v.list_size(), c.want.size());
    for (size_t i = 0; i < c.want.size(); ++i) nlist_expect_same(v.list_item(i), c.want[i]);
    EXPECT_NE(v.number_items(), nullptr);  // reads one at a time write nothing out
  }
}

TEST(NumberList, AsListWritesOutOnceForGood) {
  const NumberListStats before = number_list_stats();
  for (const NlistCase& c : nlist_cases()) {
    const Value v = Value::number_list(c.kind, c.bits);
    const List& items = v.as_list();
    ASSERT_EQ(items.size(), c.want.size());
    for (size_t i = 0; i < items.size(); ++i) nlist_expect_same(items[i], c.want[i]);
    EXPECT_EQ(v.number_items(), nullptr);
    EXPECT_EQ(&v.as_list(), &items);
    EXPECT_EQ(v.list_size(), c.want.size());
    nlist_expect_same(v.list_item(0), c.want[0]);
  }
  const NumberListStats after = number_list_stats();
  EXPECT_EQ(after.made - before.made, nlist_cases().size());
  EXPECT_EQ(after.written_out - before.written_out, nlist_cases().size());
}

TEST(NumberList, ChangedThroughUniqueListTheValuesCount) {
  Value v = Value::number_list(NumberKind::py_int, {1, 2, 3});
  Value shared = v;
  EXPECT_EQ(v.unique_list(), nullptr);  // held twice: no change in place
  shared = Value();
  List* items = v.unique_list();
  ASSERT_NE(items, nullptr);
  (*items)[1] = Value(2.5);
  items->push_back(Value("four"));
  EXPECT_EQ(v.number_items(), nullptr);
  ASSERT_EQ(v.list_size(), 4u);
  EXPECT_TRUE(v.list_item(1).equals(Value(2.5)));
  EXPECT_TRUE(v.list_item(3).equals(Value("four")));
}

TEST(NumberList, WrittenOutByThreadsAtOnce) {
  std::vector<uint64_t> bits(5000);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = i * 3;
  for (int round = 0; round < 20; ++round) {
    const Value v = Value::number_list(NumberKind::py_int, bits);
    std::vector<int64_t> sums(4, 0);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < sums.size(); ++t) {
      threads.emplace_back([&, t] {
        int64_t s = 0;
        if (t % 2 == 0) {
          for (const Value& x : v.as_list()) s += x.as_int();
        } else {
          for (size_t i = 0; i < v.list_size(); ++i) s += v.list_item(i).as_int();
        }
        sums[t] = s;
      });
    }
    for (auto& th : threads) th.join();
    for (int64_t s : sums) EXPECT_EQ(s, 3 * 4999 * 5000 / 2);
  }
}

TEST(NumberList, ToArrayHasNumPysDtype) {
  for (const NlistCase& c : nlist_cases()) {
    const Value v = Value::number_list(c.kind, c.bits);
    const Array a = to_array(v, "test");
    EXPECT_NE(v.number_items(), nullptr);  // copied from the bits
    EXPECT_EQ(a.dtype(), c.dtype);
    ASSERT_EQ(a.size(), static_cast<int64_t>(c.want.size()));
    const Value general = Value(List(c.want));
    const Array b = to_array(general, "test");
    EXPECT_EQ(b.dtype(), a.dtype());
    for (int64_t i = 0; i < a.size(); ++i) EXPECT_EQ(a.get_double(i), b.get_double(i));
  }
  const Array empty = to_array(Value::number_list(NumberKind::py_int, {}), "test");
  EXPECT_EQ(empty.dtype(), DType::float64);  // np.array([]) is float64
  EXPECT_EQ(empty.size(), 0);
}
