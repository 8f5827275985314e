"""Python's semantics for Python values under @tessera.jit: lists are lists,
tuples are tuples, unpacking checks its length, None, strings with format
specs, dicts.  Every construct runs as plain Python and under jit
(jit_check.check compares type, shape, dtype and values); every error is
checked for its kind, its message and the user's file:line."""

import inspect
import re

import numpy as np
import pytest
from jit_check import check

import tessera


def line_of(func, marker="# HERE"):
    """The file line of ``func``'s source that holds ``marker``."""
    lines, start = inspect.getsourcelines(func)
    for i, text in enumerate(lines):
        if marker in text:
            return start + i
    raise AssertionError(f"no {marker} in {func.__name__}")


def raises_at(exc, func, *args, message):
    """``func`` under jit raises ``exc`` with ``message`` at its # HERE line."""
    where = re.escape(f"(at test_jit_pyvalues.py:{line_of(func)})")
    with pytest.raises(exc, match=message + ".*" + where):
        tessera.jit(func)(*args)


# --------------------------------------------------------------------------- lists


def list_add(a, b):
    return a + b


def list_repeat(n):
    return [0] * n, n * [0], [1, 2] * 0, (1, 2) * n, [[0]] * 2


def array_and_list(x):
    return x + [1, 2, 3], [1, 2, 3] * x, x * 2


def list_in(xs, v):
    return v in xs, v not in xs, v in (1, 2), "b" in "abc", "b" in {"b": 1}, 3 in {"b": 1}


def list_slices(xs):
    return xs[1:], xs[::-1], xs[-2], xs[1:-1:2], xs[:0]


def list_comprehensions(xs):
    return [x * x for x in xs if x % 2], [c for c in "hey"], [(i, x) for i, x in enumerate(xs)]


def list_methods(xs):
    ys = list(xs)
    ys.append(4)
    ys.insert(0, -1)
    ys.insert(-1, 9)
    last = ys.pop()
    first = ys.pop(0)
    ys.reverse()
    ys.extend((7, 7))
    ys.remove(7)
    n = ys.count(7)
    i = ys.index(7)
    return ys, last, first, n, i, len(ys)


def list_clear(xs):
    ys = list(xs)
    ys.clear()
    return ys, xs


def list_compare(a, b):
    return a == b, a != b, a < b, a <= b, a > b, a >= b


def tuple_and_list_differ():
    return (1, 2) == [1, 2], [1, 2] == [1, 2], (1, 2) == (1, 2)


def test_list_plus_list_concatenates():
    assert tessera.jit(list_add)([1, 2], [3]) == [1, 2, 3]
    check(list_add, [1, 2], [3])
    check(list_add, (1,), (2, 3))
    check(list_add, "ab", "cd")
    check(list_add, [[1], "a"], [None])


def test_list_times_int_repeats():
    check(list_repeat, 3)
    check(list_repeat, 0)
    check(list_repeat, -1)


def test_an_array_operand_keeps_numpy_rules():
    check(array_and_list, np.array([1.0, 2.0, 3.0]))


def test_in_and_not_in():
    check(list_in, [1, 2, 3], 2)
    check(list_in, [1, 2, 3], 5)
    check(list_in, ["a", (1, 2)], (1, 2))
    check(list_in, ["a", (1, 2)], [1, 2])


def test_slicing_lists_tuples_and_strings():
    check(list_slices, [1, 2, 3, 4, 5])
    check(list_slices, (1, 2, 3, 4, 5))
    check(list_slices, "hello")


def test_comprehensions():
    check(list_comprehensions, [1, 2, 3, 4])


def test_list_methods():
    check(list_methods, [1, 2, 3])
    check(list_methods, (5,))
    check(list_clear, [1, 2])


def test_list_and_tuple_comparisons():
    for a, b in (([1, 2], [1, 2]), ([1, 2], [1, 3]), ([1], [1, 0]), ((2,), (1, 5)), ("ab", "b")):
        check(list_compare, a, b)
    check(tuple_and_list_differ)


def list_plus_int(xs):
    return xs + 1  # HERE


def list_lt_int(xs):
    return xs < 1  # HERE


def list_index_missing(xs):
    return xs.index(99)  # HERE


def list_pop_empty():
    xs = []
    return xs.pop()  # HERE


def list_remove_missing(xs):
    xs.remove(42)  # HERE
    return xs


def list_times_float(xs):
    return xs * 1.5  # HERE


def in_int(x):
    return 1 in x  # HERE


def list_minus_list(xs):
    return xs - xs  # HERE


def percent_format(n, x, s):
    return (
        "%d items" % n,
        "%5.2f|%-6s|%+d|%05d|%x|%#o|%e|%g|%%|%r|%c|%.2s|%i" % (x, s, n, n, n, n, x, x, s, 65, s, x),
        "%(a)s-%(b)5.1f" % {"a": s, "b": x},
        "%s" % [1, "a"],
        "%*d" % (4, n),
    )


def percent_too_many(n):
    return "%d" % (n, n)  # HERE


def percent_too_few(n):
    return "%d %d" % (n,)  # HERE


def list_index_tuple(xs):
    return xs[0, 1]  # HERE


def list_index_out_of_range(xs):
    return xs[5]  # HERE


def test_list_errors_are_pythons():
    raises_at(TypeError, list_plus_int, [1], message=r'can only concatenate list \(not "int"\) to list')
    raises_at(TypeError, list_lt_int, [1], message="'<' not supported between instances of 'list' and 'int'")
    raises_at(ValueError, list_index_missing, [1], message="99 is not in list")
    raises_at(IndexError, list_pop_empty, message="pop from empty list")
    raises_at(ValueError, list_remove_missing, [1], message=r"list.remove\(x\): x not in list")
    raises_at(TypeError, list_times_float, [1], message="can't multiply sequence by non-int of type 'float'")
    raises_at(TypeError, in_int, 3, message="argument of type 'int' is not iterable")
    raises_at(TypeError, list_index_tuple, [1], message="list indices must be integers or slices, not tuple")
    raises_at(IndexError, list_index_out_of_range, [1], message="list index 5 out of range")
    raises_at(TypeError, list_minus_list, [1], message="unsupported operand type\\(s\\) for -: 'list' and 'list'")
    raises_at(TypeError, percent_too_many, 3, message="not all arguments converted during string formatting")
    raises_at(TypeError, percent_too_few, 3, message="not enough arguments for format string")
    check(percent_too_many, 3)
    check(percent_too_few, 3)
    # The same functions fail in plain Python with the same kinds.
    for f, args in ((list_plus_int, ([1],)), (list_lt_int, ([1],)), (list_times_float, ([1],)), (list_minus_list, ([1],))):
        check(f, *args)


def pop_in_expression(xs):
    return [1].pop()  # HERE


def insert_in_expression(xs):
    return xs.insert(0, 1)  # HERE


def test_unsupported_list_constructs_name_the_construct_and_line():
    with pytest.raises(tessera.UnsupportedError, match=r"\.pop\(\) on something other than a variable"):
        tessera.jit(pop_in_expression)([1])
    with pytest.raises(
        tessera.UnsupportedError,
        match=rf"method \.insert\(\) inside an expression.*test_jit_pyvalues.py:{line_of(insert_in_expression)}",
    ):
        tessera.jit(insert_in_expression)([1])


# --------------------------------------------------------------------------- tuples


def tuple_index(x, i, j):
    idx = i, j
    return x[idx], x[(1, 2)], x[[1, 2]], x[i, j]


def tuple_index_with_slice(x):
    idx = (slice(0, 2), 1)
    return x[idx]


def tuples_returned(x):
    return [(1, 2), [3]], {"k": (4,)}, x.shape, [x.shape], divmod(7, 2), tuple([1, 2])


def tuple_from_zip(a, b):
    return [p for p in zip(a, b)], [e for e in enumerate(a, 1)]


def test_a_tuple_index_is_multidimensional():
    x = np.arange(12).reshape(3, 4)
    r = tessera.jit(tuple_index)(x, 1, 2)
    assert r[0] == 6 and r[1] == 6
    check(tuple_index, x, 1, 2)
    check(tuple_index_with_slice, x)


def test_tuples_come_back_as_tuples_even_nested():
    check(tuples_returned, np.ones((2, 3)))
    r = tessera.jit(tuples_returned)(np.ones((2, 3)))
    assert type(r[0][0]) is tuple and type(r[3][0]) is tuple


def test_zip_elements_are_tuples():
    check(tuple_from_zip, [1, 2], ["a", "b"])


# --------------------------------------------------------------------------- unpacking


def unpack_two(v):
    a, b = v  # HERE
    return a, b


def unpack_three(v):
    a, b, c = v  # HERE
    return a, b, c


def unpack_nested(v):
    (a, b), c = v
    return a, b, c


def unpack_rows(x):
    n, d = x.shape
    first, second = x
    return n, d, first, second


def unpack_dict_and_string(d, s):
    k1, k2 = d
    c1, c2 = s
    return k1, k2, c1, c2


def test_unpacking_checks_its_length():
    check(unpack_two, [1, 2])
    check(unpack_nested, [(1, 2), 3])
    check(unpack_rows, np.arange(6.0).reshape(2, 3))
    check(unpack_dict_and_string, {"a": 1, "b": 2}, "xy")
    raises_at(ValueError, unpack_two, np.ones(3), message=r"too many values to unpack \(expected 2\)")
    raises_at(ValueError, unpack_two, [1, 2, 3], message=r"too many values to unpack \(expected 2\)")
    raises_at(
        ValueError, unpack_three, [1, 2], message=r"not enough values to unpack \(expected 3, got 2\)"
    )
    raises_at(TypeError, unpack_two, 5, message="'int' object is not iterable")
    # Plain Python raises the same kinds.
    check(unpack_two, [1, 2, 3])
    check(unpack_three, [1, 2])


# --------------------------------------------------------------------------- None


def none_tests(x):
    a = not None
    b = x is None
    c = x is not None
    d = None == None  # noqa: E711
    e = "yes" if x else "no"
    f = not x
    return a, b, c, d, e, f


def none_in_list(xs):
    return [v is None for v in xs], None in xs, xs == [None, 1]


def test_none_behaves_as_in_python():
    check(none_tests, None)
    check(none_tests, 0)
    check(none_tests, 3)
    check(none_tests, [])
    check(none_tests, "")
    check(none_in_list, [None, 1])


def not_of_array(x):
    return not x  # HERE


def test_not_of_an_array_is_pythons():
    check(not_of_array, np.array([0.0]))
    raises_at(ValueError, not_of_array, np.ones(3), message="truth value of an array")


# --------------------------------------------------------------------------- strings


def string_ops(s, n):
    return s + "!", s * n, n * s, str(n), str(1.5), str(None), str(True), str([1, "a"]), str((1,))


def string_compare(a, b):
    return a == b, a != b, a < b, a in b, len(a), a[0], a[-1:], [c for c in a]


def fstrings(x, n, s):
    return (
        f"{x:.4f}|{n:5d}|{s:>10}|{x:e}|{n:,}|{s!r}|{x=}|{s:^9}|{n:#x}|{x:+.2%}|{n:08.3f}",
        f"{x:{n}.{n}f}|{s!s:<4}|{n!r}|{x}|{n}|{s}|{None}|{[1, 'a']}",
    )


def format_builtin(v, spec):
    return format(v, spec), f"{v:{spec}}"


def test_printf_style_formatting():
    check(percent_format, 7, 3.14159, "abc")
    check(percent_format, -12, -0.5, "x")


def test_string_operations():
    check(string_ops, "ab", 3)
    check(string_compare, "ab", "abc")
    check(string_compare, "b", "abc")
    check(string_compare, "h\u00e9llo", "h\u00e9llo")


FORMAT_CASES = [
    (3.14159265, ".4f"), (3.14159265, ".2e"), (1234567.891, ","), (1234567.891, ",.2f"),
    (0.000123456, ""), (1e16, ""), (1e-5, ""), (0.1, ""), (-0.0, ""), (2.5, ".0f"), (1.5, ".0"),
    (123.0, ".3"), (12.0, ".3"), (0.5, "%"), (1e100, "g"), (123456.0, "g"), (1234567.0, "g"),
    (1.0, "#.3g"), (float("inf"), "010"), (float("nan"), "E"), (-0.001, "z.2f"), (3.14159, "^10.3f"),
    (-3.14159, "010.3f"), (1234.5, "012,.2f"), (1234.5, "_.1f"), (2.0, "#.0f"), (1 / 3, ".17g"),
    (42, ""), (42, "5d"), (42, "*^7"), (-42, "=+8"), (-42, "08"), (255, "#X"), (5, "08b"),
    (1234567, "_"), (1234, "010,"), (0xDEADBEEF, "#_x"), (65, "c"), (42, ".2f"), (42, "e"),
    (True, ""), (True, ">5"), (False, "d"), ("hi", ">10"), ("hi", "*^7"), ("hello", "10.3s"),
    ("ab", "05"), ("h\u00e9", ">4"), ("x", "\u00e9>3"), (None, ""), ([1, "a", None], ""),
    ((1,), ""), ({"a": 1.5}, ""), (5, "<05"), ("ab", ">05"), (5.5, "^08"), (-5, "<06"),
    (1234, "<010,"), (12, "x<05"), (-0.0, "+"), (1e-7, ".3"), (0.0, "g"), (255, "_b"),
]


@pytest.mark.parametrize("value,spec", FORMAT_CASES)
def test_format_specs_match_python(value, spec):
    check(format_builtin, value, spec)


def test_fstrings_match_python():
    check(fstrings, 3.14159265, 3, "abc")
    check(fstrings, -2.5, 12, "h\u00e9")


def test_format_of_numpy_scalars():
    check(format_builtin, np.float32(0.1), ".10f")
    check(format_builtin, np.int64(7), "03d")


def print_formatted(x, n):
    print(f"loss {x:.4f} step {n:5d}", None, True, (1,), [0.5, "a"])
    return n


def test_print_uses_pythons_str(capfd):
    print_formatted(1.0 / 3.0, 7)  # plain Python first
    expected = capfd.readouterr().out
    tessera.jit(print_formatted)(1.0 / 3.0, 7)
    assert capfd.readouterr().out == expected


def bad_float_code(x):
    return f"{x:d}"  # HERE


def bad_spec(x):
    return f"{x:abc}"  # HERE


def spec_on_none(x):
    return f"{x:>5}"  # HERE


def spec_on_array(x):
    return f"{x:.2f}"  # HERE


def string_lt_int(s):
    return s < 1  # HERE


def string_plus_int(s):
    return s + 1  # HERE


def in_string_int(s):
    return 1 in s  # HERE


def ascii_conversion(s):
    return f"{s!a}"  # HERE


def test_string_errors_are_pythons():
    raises_at(ValueError, bad_float_code, 1.5, message="Unknown format code 'd' for object of type 'float'")
    raises_at(ValueError, bad_spec, 1.5, message="Invalid format specifier 'abc' for object of type 'float'")
    raises_at(TypeError, spec_on_none, None, message="unsupported format string passed to NoneType.__format__")
    raises_at(
        TypeError, spec_on_array, np.ones(2), message="unsupported format string passed to numpy.ndarray.__format__"
    )
    raises_at(TypeError, string_lt_int, "a", message="'<' not supported between instances of 'str' and 'int'")
    raises_at(TypeError, string_plus_int, "a", message=r'can only concatenate str \(not "int"\) to str')
    raises_at(TypeError, in_string_int, "a", message="'in <string>' requires string as left operand, not int")
    for f, args in ((bad_float_code, (1.5,)), (spec_on_none, (None,)), (string_lt_int, ("a",))):
        check(f, *args)
    with pytest.raises(
        tessera.UnsupportedError, match=rf"!a conversion.*test_jit_pyvalues.py:{line_of(ascii_conversion)}"
    ):
        tessera.jit(ascii_conversion)("s")


# --------------------------------------------------------------------------- dicts


def dict_read(d):
    return d["a"], d.get("zz", -1), d.get("zz"), "a" in d, "zz" not in d, len(d), d


def dict_iterate(d):
    keys = []
    for k in d:
        keys.append(k)
    total = 0
    for k, v in d.items():
        total += v
    return keys, total, list(d.keys()), list(d.values()), list(d.items()), [k + "!" for k in d]


def dict_update_and_return(d):
    e = {"a": 0, "new": [1, 2]}
    e.update(d)
    e.update([("t", (1, 2))])
    v = e.pop("a")
    w = e.pop("missing", "dflt")
    return e, v, w, e == {"new": [1, 2], "b": 2, "t": (1, 2)}


def dict_tuple_keys(d):
    return d[1, 2], d[(1, 2)], (1, 2) in d


def test_dicts_read_and_iterate():
    d = {"a": 1, "b": 2}
    check(dict_read, d)
    check(dict_iterate, d)
    check(dict_update_and_return, {"b": 2})
    check(dict_tuple_keys, {(1, 2): "pair"})


def dict_missing(d):
    return d["zz"]  # HERE


def dict_unhashable(d):
    return d[[1]]  # HERE


def test_dict_errors_are_pythons():
    raises_at(KeyError, dict_missing, {"a": 1}, message="key 'zz' is not in the dict")
    raises_at(TypeError, dict_unhashable, {"a": 1}, message="unhashable type: 'list'")


def dict_write(d):
    d["k"] = 5
    return d


def list_write(xs):
    xs[0] = 9
    return xs


def test_subscript_assignment_into_lists():
    check(list_write, [1, 2])


def test_subscript_assignment_into_dicts():
    check(dict_write, {"a": 1})


# --------------------------------------------------------------------------- more builtins and methods


def str_format_method(x, n, s):
    return "{} and {:.3f} | {n:>4} {s!r}".format(n, x, n=n, s=s), "{{literal}}".format()


def str_format_mixed_numbering(x):
    return "{} {0}".format(x)


def str_format_missing_argument(x):
    return "{} {}".format(x)


def copies(xs, d, x):
    ys = xs.copy()
    ys.append(0)
    e = d.copy()
    e.update({"z": 1})
    y = x.copy()
    return xs, ys, d, e, y


def min_max_of_python_values(a, b):
    return max(a, b), min(a, b)


def aug_add_lists(xs, s):
    xs += [3]
    s += "!"
    return xs, s


def test_str_format_method():
    check(str_format_method, 2.0 / 3.0, 7, "ab")
    check(str_format_mixed_numbering, 1)  # ValueError in both
    check(str_format_missing_argument, 1)  # IndexError in both


def test_copy_of_lists_and_dicts_stays_a_list_or_dict():
    check(copies, [1, 2], {"a": 1}, np.arange(3.0))


def test_min_max_of_strings_lists_and_tuples():
    check(min_max_of_python_values, "abc", "abd")
    check(min_max_of_python_values, [1, 2], [1, 2, 0])
    check(min_max_of_python_values, (3,), (2, 9))


def test_augmented_add_of_lists_and_strings():
    check(aug_add_lists, [1, 2], "a")


def nonzero_index(x):
    idx = np.nonzero(x > 2)
    return x[idx], x[np.where(x > 2)], idx, [np.nonzero(x)]


def test_nonzero_gives_a_tuple_index():
    check(nonzero_index, np.arange(6.0).reshape(2, 3))


def _random_spec(rng, kind):
    s = ""
    if rng.random() < 0.3:
        if rng.random() < 0.5:
            s += rng.choice("*x0 ")
        s += rng.choice("<>^=")
    for chars, p in (("+- ", 0.3), ("z", 0.1), ("#", 0.2), ("0", 0.2)):
        if rng.random() < p:
            s += rng.choice(chars)
    if rng.random() < 0.5:
        s += str(rng.randint(0, 20))
    if rng.random() < 0.2:
        s += rng.choice(",_")
    if rng.random() < 0.5:
        s += "." + str(rng.randint(0, 20))
    if rng.random() < 0.8:
        s += rng.choice({"i": "bcdoxXneEfFgG%", "f": "eEfFgGn%", "s": "s"}[kind])
    return s


def _random_value(rng, kind):
    if kind == "i":
        return rng.choice([0, 1, -1, 7, 255, -1234567, 2**40, rng.randint(-(10**9), 10**9)])
    if kind == "f":
        return rng.choice(
            [0.0, -0.0, 0.5, 1 / 3, -2.5, 1e16, 1e-7, 123456.789, 9.5, 0.05, 1e300, 5e-324,
             float("inf"), float("nan"), rng.uniform(-1e6, 1e6),
             rng.uniform(-1, 1) * 10 ** rng.randint(-20, 20)]
        )
    return rng.choice(["", "a", "hello", "h\u00e9llo"])


def test_format_matches_python_on_random_specs():
    import random

    rng = random.Random(15)
    jf = tessera.jit(format_builtin)
    mismatches = []
    for _ in range(1500):
        kind = rng.choice("ifs")
        v, spec = _random_value(rng, kind), _random_spec(rng, kind)
        try:
            expected = ("ok", format(v, spec))
        except Exception as e:  # noqa: BLE001 - the kind must match
            expected = ("error", type(e).__name__)
        try:
            got = ("ok", jf(v, spec)[0])
        except Exception as e:  # noqa: BLE001
            got = ("error", type(e).__name__)
        if got != expected:
            mismatches.append((v, spec, expected, got))
    assert not mismatches, mismatches[:10]


def string_methods(s, sep):
    return (
        s.split(), s.split(sep), s.split(sep, 1), s.split(None, 1), s.strip(), s.strip(" x"),
        s.lstrip(), s.rstrip("y "), s.upper(), s.lower(), s.startswith("x"), s.endswith(("y", " ")),
        s.replace(sep, "+"), s.replace(sep, "", 1), s.find(sep), s.find("zz"), sep.join(s.split()),
        "-".join(["a", "b"]), "".join(("c",)), s.replace("", "|"),
    )


def join_non_strings(xs):
    return ",".join(xs)  # HERE


def unicode_split_strip(s):
    return s.split(), s.strip(), s.split(None, 1), s.strip("\u00e9 ")


def upper_non_ascii(s):
    return s.upper()  # HERE


def test_string_methods():
    for s, sep in ((" x,a b,,c  y ", ","), ("", ","), ("xy", "y"), ("\tx y\n", " ")):
        check(string_methods, s, sep)
    check(unicode_split_strip, "\u00e9\u00a0a\u2003b\u3000 c\u00e9 ")
    raises_at(ValueError, upper_non_ascii, "\u00e9", message="changing the case of non-ASCII text is not supported")
    raises_at(TypeError, join_non_strings, ["a", 1], message="sequence item 1: expected str instance, int found")
    check(join_non_strings, ["a", 1])


# ------------------------------------------------------------ map()


def test_map_with_a_numpy_function_unpacks_as_python():
    def f(lat1, lon1, lat2, lon2):
        lat1, lon1, lat2, lon2 = map(np.radians, (lat1, lon1, lat2, lon2))
        return np.sin(lat2 - lat1) + np.cos(lon2 - lon1)

    rng = np.random.default_rng(3)
    check(f, *(rng.uniform(-90, 90, 5) for _ in range(4)))


def test_map_with_a_lambda_and_several_iterables():
    def f(xs, ys):
        return list(map(lambda a, b: a * b + 1, xs, ys)), sum(map(abs, [-1, 2, -3]))

    check(f, [1, 2, 3], [4, 5, 6])


def test_map_without_an_iterable_is_unsupported():
    def f(xs):
        return list(map(abs))

    with pytest.raises(tessera.UnsupportedError, match=r"map\(\)"):
        tessera.jit(f)([1])


def test_np_degrees_and_radians():
    check(lambda x: (np.degrees(x), np.radians(x)), np.linspace(-3, 3, 7))


def test_appends_in_a_loop_extend_in_place_but_lists_stay_values():
    # xs.append(x) in a loop extends the list in place when nothing else
    # holds it (linear time); a list another variable holds is copied first,
    # so that one keeps its value (lists are values, docs/python.md).
    def build(n):
        xs = []
        for i in range(n):
            xs.append(i * i)
        return xs

    check(build, 5000)

    def aliased(n):
        xs = [1]
        ys = xs
        for i in range(n):
            xs.append(i)
        return xs, ys

    # Python changes both names' list; a jit function's lists are values: refused
    # (_aliases.py) rather than giving ([1, 0, 1, 2], [1]).
    with pytest.raises(tessera.UnsupportedError, match="name one object"):
        tessera.jit(aliased)(3)


def test_tolist_and_item_give_python_numbers():
    # As NumPy's: Python int/float/bool/complex elements, not NumPy scalars.
    def f(x, y, z, b, c):
        return x.tolist(), y.tolist(), z.tolist(), x[0].item(), y.sum().item(), b.tolist(), c.item()

    args = (np.arange(3), np.array([[1.5, 2.0]], np.float32), np.array([1, 2], np.uint8),
            np.array([True, False]), np.array([1 + 2j]))
    got = tessera.jit(f)(*args)
    want = f(*args)
    assert got == want

    def types(v):
        return [types(e) for e in v] if isinstance(v, list) else type(v)

    assert types(list(got)) == types(list(want))

    def two(x):
        return x.item()

    with pytest.raises(ValueError, match="size 1"):
        tessera.jit(two)(np.arange(2))


def test_builtin_min_and_max_of_several_values_are_pythons():
    # The object itself (min(2, 3.5) is 2), NaN ordered as Python orders it,
    # each argument evaluated once; arrays of several elements are an error.
    def f(a, b):
        return (min(2, 3.5), max(2, 3.5), min(a, b), max(a, b, 0.5), min(float("nan"), 1.0),
                min(1.0, float("nan")), min(3, 1, 2), max(True, 0))

    check(f, 1.5, 0.25)

    def arrays(x, y):
        return min(x, y)

    check(arrays, np.arange(3.0), np.ones(3))  # ValueError in both
    check(arrays, np.arange(1.0), np.ones(1))  # one element each: fine
