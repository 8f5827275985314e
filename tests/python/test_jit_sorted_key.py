"""sorted(xs, key=lambda ...) in jit functions (docs/runtime.md, "Native loops",
sorted with a key): the keys' comprehension calls the lambda inline on the
fast path (a lambda reading nothing around it is the same code over any
frame), and the merge is the primitive sort_order, with the same comparisons
as the library's merge sort before it. Python's order, stable (reverse too),
tuple keys, negation, strings, and Python's errors: a key raising, keys that
cannot be ordered (TypeError with the file:line of the sorted() call).
Against plain Python, and with native code, the loop interpreter and the
general evaluation at 1 and 2 threads."""

import pytest
from jit_check import cases_script, loop_log_lines, run_on_every_path, same_as_python

import tessera


def by_count_then_word(counts):
    # bench/published_kernels.py's word_frequency's sort
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def by_negation(xs):
    return sorted(xs, key=lambda x: -x)


def by_remainder_stable(xs):
    # equal keys keep their first order (reverse too)
    return sorted(xs, key=lambda x: x % 3), sorted(xs, key=lambda x: x % 3, reverse=True)


def by_abs_floats(xs):
    return sorted(xs, key=lambda x: abs(x))


def by_length(words):
    return sorted(words, key=lambda w: len(w))


def keys_of_mixed_kinds(xs):
    return sorted(xs, key=lambda x: x if x > 0 else str(x))  # TypeError


def key_raising(xs):
    return sorted(xs, key=lambda x: 10 // x)  # ZeroDivisionError for a 0


def sort_in_a_loop(xs, m):
    t = 0
    for k in range(m):
        t += sorted(xs, key=lambda x: (x - k) % 5)[0] * (k + 1)
    return t


_WORDS = {"the": 5, "fox": 2, "dog": 2, "a": 3, "cat": 2, "lazy": 1, "and": 3}
CASES = [(by_count_then_word, (_WORDS,)), (by_count_then_word, ({},)),
         (by_negation, ([3, -1, 4, 1, -5, 9, 2, 6],)), (by_negation, ([],)),
         (by_negation, ([2.5, -1.0, 2.5, 0.0],)), (by_remainder_stable, (list(range(12)),)),
         (by_abs_floats, ([-2.5, 1.0, -1.0, 0.5, -0.5],)),
         (by_length, (["ccc", "a", "bb", "", "dd"],)), (sort_in_a_loop, ([4, 9, 1, 7, 3], 6))]
RAISING = [(keys_of_mixed_kinds, ([2, -1, 3],)), (key_raising, ([1, 2, 0, 5],))]


@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_same_as_python(f, args, threads):
    got = same_as_python(f, *args)
    if isinstance(got, list) and got and not isinstance(got[0], tuple):
        assert [type(x) for x in got] == [type(x) for x in f(*args)]


def test_incomparable_keys_are_a_type_error_at_the_sorted_line(threads):
    with pytest.raises(TypeError, match=r"not supported between instances of 'str' and 'int'"):
        keys_of_mixed_kinds([2, -1, 3])
    with pytest.raises(TypeError, match=r"test_jit_sorted_key.py:\d+"):
        tessera.jit(keys_of_mixed_kinds)([2, -1, 3])


def test_a_key_raising_is_its_error_at_its_line(threads):
    xs = [1, 2, 0, 5]
    with pytest.raises(ZeroDivisionError, match=r"test_jit_sorted_key.py:\d+"):
        tessera.jit(key_raising)(xs)
    assert xs == [1, 2, 0, 5]


def test_sort_order_primitive():
    # the merge alone: stable, reverse stable, Python's comparisons
    @tessera.jit
    def order(keys, reverse):
        return tessera.sort_order(keys, reverse)

    assert order([3, 1, 2, 1], False) == [1, 3, 2, 0]
    assert order([3, 1, 2, 1], True) == [0, 2, 1, 3]
    assert order([(1, "b"), (1, "a"), (0, "z")], False) == [2, 1, 0]
    assert order([], False) == []


_SCRIPT = cases_script("test_jit_sorted_key", "t.CASES + t.RAISING")


def test_native_interpreter_and_general_print_the_same():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "ZeroDivisionError" in native and "TypeError" in native
    # The keys' comprehension calls the lambda inline (before: "the function
    # closes over a frame the loop cannot see", and the general evaluation).
    for f in (by_negation, by_count_then_word, by_length):
        assert not loop_log_lines(log, f, "closes over a frame the loop cannot see"), log
        assert not loop_log_lines(log, f, "a function called inline is another one now"), log
    assert loop_log_lines(log, by_negation, "native code compiled"), log
    # A lambda reading the caller's variable still needs its frame: the general path's.
    assert loop_log_lines(log, sort_in_a_loop, "closes over a frame the loop cannot see"), log
