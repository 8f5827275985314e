// Python's semantics for Python values (lists, tuples, strings, dicts, None):
// the rules the arithmetic and comparison primitives follow when no operand is
// an array (list + list concatenates, [0] * 3 repeats, [1, 2] == [1, 2] is one
// bool), and the helpers behind `in`, unpacking, iteration, indexing of lists,
// tuples, strings and dicts, and the list and dict methods.
//
// Where an operand is an array NumPy's rules apply instead (array + list is
// elementwise): these helpers are only for values Python itself would handle.
#pragma once

#include "tessera/core/value.hpp"
#include "tessera/kernels/elementwise.hpp"

namespace tessera {

// True when a binary operator on a and b follows Python's rules: neither is
// an array (or tiled array) and one is not a number (a list, tuple, string,
// dict, None, ...). Two numbers keep the scalar rules; anything with an
// array keeps NumPy's.
bool python_operands(const Value& a, const Value& b);

// a + b: list + list, tuple + tuple and str + str concatenate; other pairs
// raise TypeError with Python's message. Named `op` in errors. For `x += v`
// on lists as well.
Value sequence_add(const Value& a, const Value& b, const char* op = "add");
// x += v as Python's: a list extends with the items of any iterable v
// (xs += (1, 2), xs += "ab"); tuples and strings concatenate as sequence_add.
Value sequence_inplace_add(const Value& a, const Value& b, const char* op = "iadd");
// a * b with one a list, tuple or string and the other an int (or bool):
// repetition (a count <= 0 gives an empty one); other pairs raise TypeError.
Value sequence_multiply(const Value& a, const Value& b, const char* op = "multiply");
// Lists of numbers held unboxed (NumberList): `seq * n` of a list of
// Python numbers of one kind (64 items or more) or of such a list, and
// a + b of two lists of one kind of numbers, one held unboxed. False:
// not so (the lists of Values then).
bool repeat_numbers(const Value& seq, int64_t n, Value& out);
bool join_numbers(const Value& a, const Value& b, Value& out);
// `[1] + [0] * n`: the unboxed list (a if take_a, else b) that only this
// call holds, with room, takes the other's items in place into `out`.
bool join_numbers_into_temporary(Value& a, Value& b, bool take_a, Value& out);
// Python's a OP b for a comparison op (equal, not_equal, less, ...) on
// python_operands: == is structural (a tuple never equals a list), ordering
// is lexicographic for strings, lists and tuples, TypeError otherwise.
Value python_compare(BinaryOp op, const Value& a, const Value& b, const char* opname);
// Python's a == b as a bool (elements that are arrays compare elementwise and
// must then give one truth value, as in Python).
bool python_equal(const Value& a, const Value& b, const char* op = "equal");

// Python's `item in container`: a key of a dict, a substring of a string, an
// element of a list or tuple; for an array NumPy's (container == item).any().
bool python_contains(const Value& container, const Value& item, const char* op = "contains");

// What a for loop over v visits, as something indexable by 0..len-1: lists,
// tuples and arrays themselves, a dict's keys, a string's characters.
// TypeError for values that are not iterable (numbers, None, 0-d arrays).
Value iteration_items(const Value& v, const char* op = "iterate");

// container[indices...] for a list, tuple, string or dict (d[a, b] looks up
// the tuple key (a, b)); KeyError / IndexError / TypeError as in Python.
Value sequence_getitem(const Value& container, const List& indices, const char* op = "getitem");
// A dict's key for `key` as Python hashes it (NumPy scalars as Python's, a
// tuple's items too); TypeError naming `op` for an unhashable one.
Value python_dict_key(const Value& key, const char* op);
// container[index] = value for a list (int or slice index) or a dict (any
// hashable key): the new container (values are never changed in place).
Value sequence_setitem(const Value& container, const Value& value, const List& indices,
                       const char* op = "setitem");

}  // namespace tessera
