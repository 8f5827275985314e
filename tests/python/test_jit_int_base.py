"""int(s, base) in tessera.jit, and Python-int arithmetic past int64 (issue 31),
each run by CPython and by tessera.jit on the same arguments.

- ``int(s, base)`` and ``int(s, base=b)``: CPython's parse (bases 0 and 2..36,
  blanks around, one sign, 0x/0o/0b prefixes, single underscores between digits,
  Unicode's decimal digits and blanks, the digit limit of
  sys.get_int_max_str_digits()); the same int, or the same exception class with
  CPython's message at the user's file:line. A value past int64, which CPython
  gives as a big int, is an OverflowError naming the string.
- One-argument ``int(s)`` takes the same parse in base 10.
- ``x * 3``, ``x << 62``, ``-x`` ... past int64: an OverflowError (it was a
  ValueError) with the same message at the same line from native loop code,
  the loop interpreter and the general evaluation, at 1 and 2 threads, in
  ``range`` and ``tessera.prange`` loops.
"""

import random
import sys

import numpy as np
import pytest
from jit_check import PATHS, loop_log_lines, run_script

import tessera

INT64 = range(-(2**63), 2**63)
HERE = "test_jit_int_base.py"


def parse(s, b):
    return int(s, b)


def parse_kw(s, b):
    return int(s, base=b)


def parse_one(s):
    return int(s)


JIT = {f: tessera.jit(f) for f in (parse, parse_kw, parse_one)}


def python_outcome(f, *args):
    try:
        return f(*args)
    except Exception as e:  # noqa: BLE001 - any of CPython's exceptions is the answer
        return e


def assert_as_python(f, *args):
    """tessera.jit(f)(*args) gives CPython's int, CPython's exception (class and
    message) at f's line, or, for an int past int64, the OverflowError naming it."""
    want = python_outcome(f, *args)
    where = f"(at {HERE}:{f.__code__.co_firstlineno + 1})"
    if isinstance(want, int) and want in INT64:
        got = JIT[f](*args)
        assert got == want and type(got) is int, (args, got, want)
        return
    with pytest.raises(Exception) as got:
        JIT[f](*args)
    if isinstance(want, Exception):
        assert type(got.value) is type(want), (args, got.value, want)
        assert str(got.value) == f"{want} {where}", (args, str(got.value), str(want))
    else:  # CPython's big int
        base = f", {args[1]}" if len(args) > 1 else ""
        assert type(got.value) is OverflowError, (args, got.value)
        assert str(got.value) == (f"int({args[0]!r}{base}) does not fit in the 64-bit integers of "
                                  f"a jit function (Python would give a big integer) {where}")


# ---------------------------------------------------------------- int(s, base) by case

CASES = [
    ("ff", 16), ("FF", 16), ("0xff", 16), ("0XfF", 0), ("ff", 0), ("0x", 16), ("0x_1", 16),
    ("0x__1", 16), ("0x1_", 16), ("0b1", 16), ("0b1", 2), ("0b1", 0), ("0B_1_0", 0), ("0b2", 0),
    ("0o17", 8), ("0O17", 0), ("0o17", 10), ("017", 8), ("017", 0), ("0", 0), ("00", 0),
    ("0_0", 0), ("-0", 0), ("+000", 0), ("01", 0), ("0_1", 0), ("0_x1", 0), ("-0x80", 0),
    ("z", 36), ("Zz", 36), ("z", 35), ("10", 2), ("12", 2), ("777", 7), ("1_0", 3), ("_1", 10),
    ("1_", 10), ("1__2", 10), ("+_1", 10), ("-_1", 16), ("", 10), (" ", 16), ("-", 10),
    ("+", 2), ("+-1", 10), ("- 1", 10), ("1 2", 10), (" \t\n\x0b\x0c\r-42\r\n ", 10),
    ("\x1c5", 10), ("5\x1f", 10), ("1\x00", 10), ("1.5", 10), ("1e3", 10), ("١٢", 10),
    ("١٠", 16), ("٠x1f", 16), ("٠b1", 0), ("\u3000 7\x85", 10), ("\u2028-9\u00a0", 36),
    ("5\u00b2", 10), ("é", 16), ("٣x", 10), ("z" * 300, 10), ("-" + "y" * 250, 33),
    ("12", False), ("0x10", False), ("5", True), ("5", 1), ("5", 37), ("5", -1), ("5", -(2**40)),
    ("5", 2**62), ("9" * 19, 10), ("9223372036854775807", 10), ("9223372036854775808", 10),
    ("-9223372036854775808", 10), ("-9223372036854775809", 0), ("ffffffffffffffff", 16),
    ("-8000000000000000", 16), ("0x7fff_ffff_ffff_ffff", 0), ("99999999999999999999x", 10),
    ("1" * 4300, 10), ("1" * 4301, 10), ("0" * 5000, 0), ("0" * 5000 + "x", 10),
    ("0" * 5000 + "__1", 10), ("0" * 5000 + "1", 16), ("1" * 5000, 2), ("1" * 5000, 3),
    # (up to 12 ASCII digits of the base take a shorter path: its ends and what leaves it)
    ("z" * 12, 36), ("Zz" * 6, 36), ("z" * 13, 36), ("f" * 12, 16), ("f" * 12 + "g", 16),
    ("9" * 12, 9), ("1" * 12 + "٣", 10), ("a_b", 16), ("ab ", 16), ("0", 7), ("-z", 36),
]


@pytest.mark.parametrize("f", [parse, parse_kw], ids=["positional", "keyword"])
def test_int_with_a_base_as_python(f):
    for s, b in CASES:
        assert_as_python(f, s, b)


def _digits(v: int, base: int) -> str:
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    m, out = abs(v), ""
    while True:
        m, d = divmod(m, base)
        out = alphabet[d] + out
        if m == 0:
            return ("-" if v < 0 else "") + out


def test_int64_ends_in_every_base():
    # each base's own overflow check: the last values that fit and the first that do not
    prefixes = {2: "0b", 8: "0o", 16: "0x"}
    for b in range(2, 37):
        for v in (2**63 - 1, 2**63, 2**63 + b, -(2**63), -(2**63) - 1, 2**64, -(2**62), b**20):
            s = _digits(v, b)
            assert_as_python(parse, s, b)
            assert_as_python(parse, s.upper(), b)
            if b in prefixes:
                p = s.replace("-", "-" + prefixes[b]) if v < 0 else prefixes[b] + s
                assert_as_python(parse, p, b)
                assert_as_python(parse, p, 0)


def test_random_strings_as_python():
    rng = random.Random(31)
    alphabet = "0123456789abfxXoObBzZ_+- \t\u3000١٣"
    bases = [0, 2, 3, 8, 10, 16, 36]
    for _ in range(1500):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 7)))
        assert_as_python(parse, s, rng.choice(bases))


def test_the_base_and_the_string_are_checked_as_python():
    for b in (np.int64(16), np.uint8(16), np.int32(0), np.array(16), 2.0, None, "16", [16],
              np.float32(16.0)):
        assert_as_python(parse, "12", b)
    for x in (5, 5.0, None, [1], (1,), True, np.int64(5), np.zeros(2)):
        assert_as_python(parse, x, 10)
        assert_as_python(parse, x, 1)  # the base is checked first


def base_in_a_literal():
    return int("ff", 16) + int("0o17", base=0) + int("-1_0", 2)


def literal_too_big():
    return int("f" * 17, 16)


def missing_string():
    return int(base=2)


def three_arguments(s):
    return int(s, 2, 3)


def bad_keyword(s):
    return int(s, bse=2)


def both_ways(s):
    return int(s, 2, base=2)


def test_calls_python_refuses_and_literals():
    assert tessera.jit(base_in_a_literal)() == base_in_a_literal()
    for f, args in ((literal_too_big, ()), (missing_string, ()), (three_arguments, ("1",)),
                    (bad_keyword, ("1",)), (both_ways, ("1",))):
        want = python_outcome(f, *args)
        with pytest.raises(Exception) as got:
            tessera.jit(f)(*args)
        where = f"(at {HERE}:{f.__code__.co_firstlineno + 1})"
        if isinstance(want, Exception):
            assert type(got.value) is type(want) and str(got.value) == f"{want} {where}"
        else:
            assert type(got.value) is OverflowError and "Python would give a big" in str(got.value)


def test_the_digit_limit_is_pythons_when_translated():
    def limited(s):
        return int(s, 10)

    before = sys.get_int_max_str_digits()
    try:
        sys.set_int_max_str_digits(1000)
        jit = tessera.jit(limited)
        with pytest.raises(ValueError, match=r"Exceeds the limit \(1000 digits\).*has 1001 digits"):
            jit("0" * 1001)
        assert jit("0" * 1000) == 0
        sys.set_int_max_str_digits(0)  # no limit
        assert tessera.jit(limited)("0" * 9000 + "7") == 7
    finally:
        sys.set_int_max_str_digits(before)


# ---------------------------------------------------------------- one-argument int(s)


def test_int_of_a_string_in_base_10_as_python():
    # (1 to 18 ASCII digits take a shorter path: its ends and what leaves it)
    for s in ("7", "x", "٣", "42", "007", "9" * 18, "9" * 19, "12a", "12٣", "1_2", "12 ", "-12",
              " 7 ", "1_000", "0x1", "-0", "١٢٣", "\u3000-5\x85", "\x1c5", "5 5", "",
              "9223372036854775807", "9223372036854775808", "-9223372036854775809",
              "99999999999999999999x", "1" * 4301, "z" * 300):
        assert_as_python(parse_one, s)


# ---------------------------------------------------------------- in loops, on every path


def sum_hex(words):
    total = 0
    for w in words:
        total += int(w, 16)
    return total


def parse_rows(rows, base):
    out = []
    for i in range(len(rows)):
        out.append(int(rows[i], base=base) * 2 + i)
    return out


def digit_sums(n):
    t = 0
    for k in range(n):
        for c in str(k):
            t += int(c)
    return t


LOOP_CASES = [
    (sum_hex, (["ff", " -0x10 ", "7_f"],)),
    (sum_hex, (["ff", "fg", "1"],)),
    (sum_hex, (["7fffffffffffffff", "1"],)),
    (sum_hex, (["1" * 17],)),
    (parse_rows, (["101", "0b11", "-1_1"], 2)),
    (parse_rows, (["12", "0x12", "0o12", "0b1"], 0)),
    (parse_rows, (["12", "012"], 0)),
    (parse_rows, (["1"], 99)),
    (digit_sums, (300,)),
]

_LOOP_SCRIPT = """
import sys; sys.path.insert(0, {here!r})
import tessera, test_jit_int_base as t
for threads in (1, 2):
    for f, args in t.LOOP_CASES:
        try:
            print(f.__name__, repr(tessera.jit(f, threads=threads)(*args)))
        except Exception as e:
            print(f.__name__, type(e).__name__, str(e))
"""


def _as_python(cases):
    """What the loop script prints, as CPython gives it (an int past int64 is
    tessera's OverflowError, told apart by its message)."""
    lines = []
    for f, args in cases:
        r = python_outcome(f, *args)
        if isinstance(r, Exception):
            line = f.__code__.co_firstlineno + _raising_line(f)
            lines.append(f"{f.__name__} {type(r).__name__} {r} (at {HERE}:{line})")
        elif isinstance(r, int) and r not in INT64:
            lines.append(f"{f.__name__} OverflowError")
        else:
            lines.append(f"{f.__name__} {r!r}")
    return lines


def _raising_line(f):
    return {sum_hex: 3, parse_rows: 3}[f]


def test_in_loops_as_python_on_every_path():
    want = _as_python(LOOP_CASES) * 2  # threads 1 and 2
    for mode, env in PATHS.items():
        out, _ = run_script(_LOOP_SCRIPT, **env)
        got = [ln if " OverflowError " not in ln else ln.split(" OverflowError ")[0]
               + " OverflowError" for ln in out.splitlines()]
        assert got == want, (mode, out)
        # int()'s own ("int('11111111111111111', 16) does not fit ...") or the sum's
        over = [ln for ln in out.splitlines() if " OverflowError " in ln]
        assert any("does not fit in the 64-bit integers of a jit function" in ln for ln in over)
        assert any("[add] integer overflow: 9223372036854775807 + 1" in ln for ln in over)
        line = f"(at {HERE}:{sum_hex.__code__.co_firstlineno + 3})"
        assert all("Python would give a big integer" in ln and ln.endswith(line)
                   for ln in over), over


# ---------------------------------------------------------------- overflow past int64


def triple(n):
    acc = 1
    for i in range(n):
        acc = acc * 3
    return acc


def doubled(n):
    acc = 1
    for i in range(n):
        acc = acc << 1
    return acc


def fourth_powers(n):
    acc = 0
    for i in range(n):
        acc += i * i * i * i
    return acc


def parallel_fourth_powers(n):
    acc = 0
    for i in tessera.prange(n):
        acc += i * i * i * i
    return acc


def parallel_triple(n):
    acc = 1
    for _ in tessera.prange(n):
        acc *= 3
    return acc


OVERFLOW_CASES = [(triple, (30,)), (triple, (50,)), (doubled, (62,)), (doubled, (63,)),
                  (fourth_powers, (1000,)), (fourth_powers, (100000,)),
                  (parallel_fourth_powers, (1000,)), (parallel_fourth_powers, (100000,)),
                  (parallel_triple, (39,)), (parallel_triple, (40,))]

_OVERFLOW_SCRIPT = """
import sys; sys.path.insert(0, {here!r})
import tessera, test_jit_int_base as t
for threads in (1, 2):
    for f, args in t.OVERFLOW_CASES:
        try:
            print(f.__name__, repr(tessera.jit(f, threads=threads)(*args)))
        except ValueError as e:
            print(f.__name__, "ValueError", str(e))
        except OverflowError as e:
            print(f.__name__, "OverflowError", str(e))
"""
NOTE = "does not fit in int64 (Python would give a big integer; tessera's ints are int64)"


def _first_overflow(f, n):
    """The step of f's loop (run here in Python, each operation checked) whose
    operands fit in int64 and whose result does not: '[op] ... a sym b'."""
    powers = f in (fourth_powers, parallel_fourth_powers)
    acc = 0 if powers else 1
    for i in range(n):
        if powers:
            steps = [("multiply", "*", i, i), ("multiply", "*", i * i, i),
                     ("multiply", "*", i * i * i, i), ("iadd", "+", acc, i**4)]
        elif f is doubled:
            steps = [("left_shift", "<<", acc, 1)]
        else:
            steps = [("multiply" if f is triple else "imul", "*", acc, 3)]
        for name, sym, a, b in steps:
            r = a << b if sym == "<<" else (a * b if sym == "*" else a + b)
            if r not in INT64:
                return f"[{name}] integer overflow: {a} {sym} {b}"
        acc = r
    return None


def test_overflow_is_an_overflow_error_on_every_path():
    want = []
    for f, args in OVERFLOW_CASES:
        r = f(*args)
        line = f.__code__.co_firstlineno + 3
        want.append(f"{f.__name__} {r!r}" if r in INT64 else
                    f"{f.__name__} OverflowError {_first_overflow(f, *args)} {NOTE} "
                    f"(at {HERE}:{line})")
    for mode, env in PATHS.items():
        out, log = run_script(_OVERFLOW_SCRIPT, **env, TESSERA_CACHE_DIR="0")
        assert out.splitlines() == want * 2, (mode, out, want)  # threads 1 and 2
        if mode == "native":  # (<< has no native code: doubled's loop is interpreted)
            for f in (triple, fourth_powers, parallel_fourth_powers, parallel_triple):
                assert loop_log_lines(log, f, "native code compiled"), (f.__name__, log)


def add(a, b):
    return a + b


def subtract(a, b):
    return a - b


def multiply(a, b):
    return a * b


def floor_divide(a, b):
    return a // b


def power(a, b):
    return a ** b


def left_shift(a, b):
    return a << b


def negative(a):
    return -a


def absolute(a):
    return abs(a)


def test_scalar_overflow_is_an_overflow_error():
    big, low = 2**62, -(2**63)
    cases = [(add, "+", big, big), (subtract, "-", low, 1), (multiply, "*", 2**32, 2**31),
             (floor_divide, "//", low, -1), (power, "**", 3, 40), (left_shift, "<<", 3, 62)]
    for f, sym, a, b in cases:
        assert tessera.jit(f)(a // 4, 2) == f(a // 4, 2)  # in range: Python's value
        assert f(a, b) not in INT64  # Python's big int
        with pytest.raises(OverflowError) as e:
            tessera.jit(f)(a, b)
        where = f"(at {HERE}:{f.__code__.co_firstlineno + 1})"
        assert str(e.value) == f"[{f.__name__}] integer overflow: {a} {sym} {b} {NOTE} {where}"
        assert not isinstance(e.value, ValueError)
    for f, name in ((negative, "negative"), (absolute, "abs")):
        assert tessera.jit(f)(low + 1) == f(low + 1)
        with pytest.raises(OverflowError) as e:
            tessera.jit(f)(low)
        where = f"(at {HERE}:{f.__code__.co_firstlineno + 1})"
        assert str(e.value) == f"[{name}] integer overflow: {name} of {low} {NOTE} {where}"
