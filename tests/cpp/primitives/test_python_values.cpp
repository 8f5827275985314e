// The python family: Python's semantics for lists, tuples, strings, dicts and
// None (comparisons, `in`, `not`, unpacking, iteration, list and dict methods)
// and the sequence helpers other primitives call.
#include "tessera/core/error.hpp"
#include "tessera/primitives/python_values.hpp"
#include "test_util.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

Value ints(std::vector<int64_t> v) {
  List l;
  for (int64_t x : v) l.emplace_back(x);
  return Value(std::move(l));
}

Value tup(std::vector<int64_t> v) { return Value::tuple(ints(std::move(v)).as_list()); }

Value dict_ab() {
  Dict d;
  d.set(Value("a"), Value(int64_t{1}));
  d.set(Value("b"), Value(int64_t{2}));
  return Value(std::move(d));
}

TEST(PythonCompare, EqualityIsStructural) {
  EXPECT_TRUE(call("equal", {ints({1, 2}), ints({1, 2})}).as_bool());
  EXPECT_FALSE(call("equal", {ints({1, 2}), ints({1, 3})}).as_bool());
  EXPECT_FALSE(call("equal", {ints({1, 2}), tup({1, 2})}).as_bool());
  EXPECT_TRUE(call("not_equal", {ints({1, 2}), tup({1, 2})}).as_bool());
  EXPECT_TRUE(call("equal", {Value("ab"), Value("ab")}).as_bool());
  EXPECT_FALSE(call("equal", {Value("ab"), Value(int64_t{1})}).as_bool());
  EXPECT_TRUE(call("equal", {Value(), Value()}).as_bool());
  EXPECT_FALSE(call("equal", {Value(), Value(int64_t{0})}).as_bool());
  EXPECT_TRUE(call("equal", {dict_ab(), dict_ab()}).as_bool());
  EXPECT_TRUE(call("equal", {Value(List{Value(1.0), Value("x")}), Value(List{Value(int64_t{1}), Value("x")})})
                  .as_bool());
  // An array operand keeps NumPy's elementwise comparison.
  EXPECT_TRUE(array_eq(call("equal", {ints({1, 2}), i64({1, 3}, {2})}), DType::bool_, {2}, {1, 0}));
}

TEST(PythonCompare, OrderingIsLexicographic) {
  EXPECT_TRUE(call("less", {Value("abc"), Value("abd")}).as_bool());
  EXPECT_TRUE(call("less", {ints({1, 2}), ints({1, 2, 0})}).as_bool());
  EXPECT_TRUE(call("greater", {ints({2}), ints({1, 9})}).as_bool());
  EXPECT_TRUE(call("less_equal", {tup({1, 2}), tup({1, 2})}).as_bool());
  EXPECT_FALSE(call("greater_equal", {Value("a"), Value("b")}).as_bool());
  EXPECT_TRUE(throws_with<TypeError>([] { call("less", {ints({1}), Value(int64_t{1})}); },
                                     "[less] '<' not supported between instances of 'list' and 'int'"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("less", {ints({1}), tup({1})}); },
                                     "'<' not supported between instances of 'list' and 'tuple'"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("greater", {Value(), Value()}); },
                                     "'>' not supported between instances of 'NoneType' and 'NoneType'"));
}

TEST(PythonContains, KeysSubstringsElementsAndArrays) {
  EXPECT_TRUE(call("contains", {dict_ab(), Value("a")}).as_bool());
  EXPECT_FALSE(call("contains", {dict_ab(), Value(int64_t{1})}).as_bool());
  EXPECT_TRUE(call("contains", {Value("hello"), Value("ell")}).as_bool());
  EXPECT_TRUE(call("contains", {ints({1, 2}), Value(2.0)}).as_bool());
  EXPECT_FALSE(call("contains", {ints({1, 2}), Value("1")}).as_bool());
  EXPECT_TRUE(call("contains", {Value(List{tup({1, 2})}), tup({1, 2})}).as_bool());
  EXPECT_FALSE(call("contains", {Value(List{tup({1, 2})}), ints({1, 2})}).as_bool());
  EXPECT_TRUE(call("contains", {i64({1, 2, 3, 4}, {2, 2}), Value(int64_t{4})}).as_bool());
  EXPECT_FALSE(call("contains", {i64({1, 2}, {2}), Value(int64_t{5})}).as_bool());
  EXPECT_TRUE(throws_with<TypeError>([] { call("contains", {Value("abc"), Value(int64_t{1})}); },
                                     "[contains] 'in <string>' requires string as left operand, not int"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("contains", {Value(int64_t{3}), Value(int64_t{1})}); },
                                     "[contains] argument of type 'int' is not iterable"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("contains", {dict_ab(), ints({1})}); },
                                     "[contains] unhashable type: 'list'"));
}

TEST(PythonNot, TruthOfEveryKind) {
  EXPECT_TRUE(call("not_", {Value()}).as_bool());
  EXPECT_TRUE(call("not_", {Value(List{})}).as_bool());
  EXPECT_FALSE(call("not_", {ints({0})}).as_bool());
  EXPECT_TRUE(call("not_", {Value("")}).as_bool());
  EXPECT_FALSE(call("not_", {dict_ab()}).as_bool());
  EXPECT_TRUE(call("not_", {Value(0.0)}).as_bool());
  EXPECT_TRUE(call("not_", {f64({0}, {1})}).as_bool());
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("not_", {f64({0, 1}, {2})}); },
                                                 "[not] the truth value of an array"));
}

TEST(PythonUnpack, ChecksTheCount) {
  EXPECT_TRUE(call("unpack", {ints({1, 2}), Value(int64_t{2})}).equals(ints({1, 2})));
  EXPECT_TRUE(call("unpack", {dict_ab(), Value(int64_t{2})}).equals(Value(List{Value("a"), Value("b")})));
  EXPECT_EQ(call("unpack", {f64({1, 2, 3, 4}, {2, 2}), Value(int64_t{2})}).as_array().shape(),
            (Shape{2, 2}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("unpack", {ints({1, 2, 3}), Value(int64_t{2})}); },
      "[unpack] too many values to unpack (expected 2)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("unpack", {f64({1, 2}, {2}), Value(int64_t{3})}); },
      "[unpack] not enough values to unpack (expected 3, got 2)"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("unpack", {Value(int64_t{1}), Value(int64_t{2})}); },
                                     "[unpack] 'int' object is not iterable"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("unpack", {Array::scalar(1.0), Value(int64_t{2})}); },
                                     "[unpack] iteration over a 0-d array"));
}

TEST(PythonSequences, ConversionsAndIteration) {
  EXPECT_TRUE(call("iterate", {Value("ab")}).equals(Value(List{Value("a"), Value("b")})));
  Value t = call("to_tuple", {ints({1, 2})});
  EXPECT_TRUE(t.is_tuple() && t.equals(tup({1, 2})));
  Value rows = call("to_list", {i64({1, 2, 3, 4}, {2, 2})});
  ASSERT_EQ(rows.as_list().size(), 2u);
  EXPECT_TRUE(array_eq(rows.as_list()[1], DType::int64, {2}, {3, 4}));
  EXPECT_TRUE(array_eq(call("to_list", {i64({5, 6}, {2})}).as_list()[0], DType::int64, {}, {5}));
}

TEST(PythonListMethods, ReturnNewValues) {
  Value popped = call("pop", {ints({1, 2, 3})});
  EXPECT_TRUE(popped.equals(Value::tuple(List{ints({1, 2}), Value(int64_t{3})})));
  EXPECT_TRUE(call("pop", {ints({1, 2, 3}), Value(int64_t{0})})
                  .equals(Value::tuple(List{ints({2, 3}), Value(int64_t{1})})));
  EXPECT_TRUE(throws_with<std::out_of_range>([] { call("pop", {ints({})}); }, "[pop] pop from empty list"));
  EXPECT_TRUE(throws_with<std::out_of_range>([] { call("pop", {ints({1}), Value(int64_t{4})}); },
                                             "[pop] pop index 4 out of range"));
  EXPECT_TRUE(call("insert", {ints({1, 3}), Value(int64_t{1}), Value(int64_t{2})}).equals(ints({1, 2, 3})));
  EXPECT_TRUE(call("insert", {ints({1}), Value(int64_t{-9}), Value(int64_t{0})}).equals(ints({0, 1})));
  EXPECT_TRUE(call("insert", {ints({1}), Value(int64_t{9}), Value(int64_t{2})}).equals(ints({1, 2})));
  EXPECT_EQ(call("index", {ints({5, 6, 5}), Value(int64_t{5}), Value(int64_t{1})}).as_int(), 2);
  EXPECT_EQ(call("index", {Value("h\xc3\xa9llo"), Value("l")}).as_int(), 2);
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("index", {ints({1}), Value(int64_t{7})}); },
                                                 "[index] 7 is not in list"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("index", {Value("abc"), Value("z")}); },
                                                 "[index] substring not found"));
  EXPECT_EQ(call("count", {ints({1, 2, 1}), Value(int64_t{1})}).as_int(), 2);
  EXPECT_EQ(call("count", {Value("aaaa"), Value("aa")}).as_int(), 2);
  EXPECT_TRUE(call("reverse", {ints({1, 2, 3})}).equals(ints({3, 2, 1})));
  EXPECT_TRUE(call("extend", {ints({1}), tup({2, 3})}).equals(ints({1, 2, 3})));
  EXPECT_TRUE(throws_with<TypeError>([] { call("reverse", {tup({1})}); },
                                     "[reverse] argument 'list' must be a list, got tuple"));
}

TEST(PythonDictMethods, ReadAndUpdate) {
  Value d = dict_ab();
  EXPECT_TRUE(call("get", {d, Value("b")}).equals(Value(int64_t{2})));
  EXPECT_TRUE(call("get", {d, Value("z")}).is_nil());
  EXPECT_TRUE(call("get", {d, Value("z"), Value(0.5)}).equals(Value(0.5)));
  EXPECT_TRUE(call("keys", {d}).equals(Value(List{Value("a"), Value("b")})));
  EXPECT_TRUE(call("values", {d}).equals(ints({1, 2})));
  Value items = call("items", {d});
  EXPECT_TRUE(items.as_list()[1].is_tuple());
  Dict other;
  other.set(Value("b"), Value(int64_t{20}));
  other.set(Value("c"), Value(int64_t{3}));
  Value u = call("update", {d, Value(other)});
  EXPECT_TRUE(call("values", {u}).equals(ints({1, 20, 3})));
  Value pairs = call("update", {d, Value(List{Value::tuple(List{Value("z"), Value(int64_t{9})})})});
  EXPECT_TRUE(call("get", {pairs, Value("z")}).equals(Value(int64_t{9})));
  Value p = call("pop", {d, Value("a")});
  EXPECT_TRUE(p.as_list()[1].equals(Value(int64_t{1})));
  EXPECT_EQ(p.as_list()[0].as_dict().items.size(), 1u);
  EXPECT_TRUE(throws_with<KeyError>([&] { call("pop", {d, Value("q")}); }, "[pop] key 'q' is not in the dict"));
  EXPECT_TRUE(call("pop", {d, Value("q"), Value(int64_t{0}), Value(true)}).as_list()[1].equals(Value(int64_t{0})));
  EXPECT_TRUE(throws_with<TypeError>([] { call("get", {ints({1}), Value(int64_t{0})}); },
                                     "[get] argument 'dict' must be a dict, got list"));
}

TEST(PythonSetitem, ListsAndDictsAsValues) {
  Value l = ints({1, 2, 3});
  EXPECT_TRUE(sequence_setitem(l, Value(int64_t{9}), {Value(int64_t{-1})}).equals(ints({1, 2, 9})));
  EXPECT_TRUE(sequence_setitem(l, ints({7, 8, 9}), {Value(Slice{0, 1, {}})}).equals(ints({7, 8, 9, 2, 3})));
  EXPECT_TRUE(sequence_setitem(l, ints({0, 0}), {Value(Slice{{}, {}, 2})}).equals(ints({0, 2, 0})));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { sequence_setitem(l, ints({0}), {Value(Slice{{}, {}, 2})}); },
      "attempt to assign sequence of size 1 to extended slice of size 2"));
  EXPECT_TRUE(throws_with<TypeError>([] { sequence_setitem(tup({1}), Value(int64_t{0}), {Value(int64_t{0})}); },
                                     "'tuple' object does not support item assignment"));
  Value d = sequence_setitem(dict_ab(), Value(int64_t{5}), {Value("c")});
  EXPECT_EQ(d.as_dict().items.size(), 3u);
  EXPECT_TRUE(l.equals(ints({1, 2, 3})));  // the input is unchanged
}

TEST(PythonSequences, HelpersForInPlaceAdd) {
  EXPECT_TRUE(python_operands(ints({1}), ints({2})));
  EXPECT_FALSE(python_operands(ints({1}), f64({2}, {1})));
  EXPECT_FALSE(python_operands(Value(int64_t{1}), Value(2.0)));
  EXPECT_TRUE(sequence_add(ints({1}), ints({2}), "iadd").equals(ints({1, 2})));
  EXPECT_TRUE(throws_with<TypeError>([] { sequence_add(ints({1}), Value("a"), "iadd"); },
                                     "[iadd] can only concatenate list (not \"str\") to list"));
  EXPECT_TRUE(sequence_multiply(Value(int64_t{2}), tup({1}), "imul").equals(tup({1, 1})));
  // list += any iterable extends (Python's list.__iadd__); a tuple concatenates.
  EXPECT_TRUE(sequence_inplace_add(ints({1}), tup({2, 3})).equals(ints({1, 2, 3})));
  EXPECT_TRUE(sequence_inplace_add(ints({}), Value("ab")).equals(Value(List{Value("a"), Value("b")})));
  EXPECT_TRUE(throws_with<TypeError>([] { sequence_inplace_add(ints({1}), Value(int64_t{2})); },
                                     "[iadd] 'int' object is not iterable"));
  EXPECT_TRUE(throws_with<TypeError>([] { sequence_inplace_add(tup({1}), ints({2})); },
                                     "[iadd] can only concatenate tuple (not \"list\") to tuple"));
}

}  // namespace
