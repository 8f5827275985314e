"""Program text the translator writes for some Python constructs: helper
functions a program includes when it uses them (HELPERS), expansions written
inline at the user's line (INLINE), and the tag that marks the translator's own
errors (ERROR_TAG, RAISABLE: jit.py turns them back into Python's exceptions).
"""

from __future__ import annotations

import re
import secrets

# Small functions in the language that some Python constructs need; a program
# includes only those it uses.
HELPERS = {
    # x.tolist(): nested lists as deep as x (a 0-d array gives its element).
    "__to_list": """define(__to_list, x, if(ndim(x) == 0, item(x), block(
  define(r, list()), define(i, 0), define(n, len(x)),
  while(i < n, block(define(r, append(r, __to_list(getitem(x, i)))), define(i, i + 1))),
  r)))""",
}
HELPER_DEPS: dict = {}


# Expansions written inline, at the user's line (so that an error in them
# names the user's file.py:line); each ``$name`` becomes a fresh temporary.
# ``assert(false, "$EValueError] ...")`` raises that Python exception (jit.py
# turns the failed assertion into it); $E is a tag drawn once per process, so
# that no assert of the user's can be taken for one.
ERROR_TAG = f"[tessera-{secrets.token_hex(8)}:"
HELPERS.update({
    # Python's name of a value's type, for messages.
    "__py_type_name": """define(__py_type_name, x, block(define(t, type(x)),
  if(t == "nil", "NoneType", if(t == "string", "str",
  if(str_endswith(t, " array"), if(ndim(x) == 0, concat("numpy.", str_replace(t, " array", "")),
    "numpy.ndarray"), t)))))""",
})


def _int_raise(s: str, base: str, lim: str, b_text: str) -> str:
    """What __int_parse reported ($r) raised as Python's exception, inline (at the
    user's line); Python's ValueError shows at most 200 characters of repr(s)."""
    return f"""if($r == "overflow",
  assert(false, concat("$EOverflowError] int(", repr({s}), {b_text}, ") does not fit in the ",
    "64-bit integers of a jit function (Python would give a big integer)")),
  if($r == "invalid", assert(false, concat("$EValueError] invalid literal for int() with base ",
    str({base}), ": ", getitem(repr({s}), slice(0, 200, nil)))),
  assert(false, concat("$EValueError] Exceeds the limit (", str({lim}), " digits) for integer ",
    "string conversion: value has ", str($r), " digits; use sys.set_int_max_str_digits() to ",
    "increase the limit"))))"""


# The builtin exceptions a jit function may raise (raise_stmt; jit.py maps them back).
RAISABLE = ("ArithmeticError", "AssertionError", "AttributeError", "Exception",
            "FloatingPointError", "IndexError", "KeyError", "LookupError", "NotImplementedError", "OverflowError", "RuntimeError",
            "TypeError", "ValueError", "ZeroDivisionError")
INLINE = {
    # dict(x): a dict's items (values are not shared: a copy), or an iterable of
    # pairs, each checked as Python checks it (inline: an error names the user's line).
    "py_dict": """block(define($x, $1), if(type($x) == "dict", $x, block(
  define($d, dict()), define($i, 0), define($n, len($x)),
  while($i < $n, block(define($p, getitem($x, $i)),
    if(!contains(list("list", "tuple", "string", "dict"), type($p)),
      assert(false, concat("$ETypeError] cannot convert dictionary update sequence element #",
        str($i), " to a sequence"))),
    if(len($p) != 2, assert(false, concat("$EValueError] dictionary update sequence element #",
      str($i), " has length ", str(len($p)), "; 2 is required"))),
    define($d, setitem($d, getitem($p, 1), getitem($p, 0))), define($i, $i + 1))),
  $d)))""",
    # np.diagonal(x, k, a1, a2): the diagonal k of the plane (a1, a2) as the
    # last axis, as NumPy (a copy; NumPy's view is read-only, and writes
    # through it are refused by the translator as NumPy refuses them).
    # A matrix's own diagonal is the diag primitive (5x faster than the
    # general moveaxis and integer-array index).
    "diagonal": """block(
  define($x, $1), define($k, $2), define($a, $3), define($b, $4),
  if(ndim($x) < 2, assert(false, concat("$EValueError] [$L] diag requires an array of at ",
    "least two dimensions, got a ", str(ndim($x)), "-d array"))),
  if(ndim($x) == 2 && ($a == 0 || $a == -2) && ($b == 1 || $b == -1), diag($x, $k), block(
  define($y, moveaxis($x, list($a, $b), list(-2, -1))),
  define($n, getitem(shape($y), -2)), define($m, getitem(shape($y), -1)),
  define($d, maximum(if($k >= 0, minimum($n, $m - $k), minimum($n + $k, $m)), 0)),
  getitem($y, "...", arange($d) + maximum(0 - $k, 0), arange($d) + maximum($k, 0)))))""",
    # np.random.shuffle(x) / random.shuffle(x) as a statement: an array is
    # shuffled in place along its first axis (every view sees it); a list
    # becomes the list of its items in a random order.
    "shuffle": """block(define($x, $1), if(type($x) == "list", block(
  define($p, permutation(len($x))), define($r, list()), define($i, 0),
  while($i < len($x), block(
    define($r, append($r, getitem($x, item(getitem($p, $i))))), define($i, $i + 1))),
  $r), setitem($x, shuffle($x), "...")))""",
    # The same of a view (x[0], x.T) or a module-level array: written in place;
    # a list there (an item of a list) could not be rebound, so it is refused.
    "shuffle_view": """block(define($x, $1), if(type($x) == "list",
  assert(false, "$EUnsupportedError] $L of a list inside another value is not supported by tessera.jit; assign it to a variable, shuffle that, and store it back"),
  setitem($x, shuffle($x), "...")))""",
    # range's and tessera.prange's bounds: integers, bools or NumPy integer
    # scalars (0-d integer arrays: they have __index__); anything else is
    # Python's TypeError (one primitive: native loop code passes an int through).
    "range_int": """range_index($1, "$L")""",
    # int(x), float(x): a number (NumPy's scalars too); an array of one or more
    # dimensions is NumPy's TypeError.
    "python_number": """block(define($v, $1), if(ndim($v) != 0, assert(false,
  "$ETypeError] only 0-dimensional arrays can be converted to Python scalars")),
  item(astype($v, $2)))""",
    # random.randint(a, b): both ends included; b < a is Python's ValueError.
    "randint": """block(define($a, $1), define($b, $2), if($b < $a, assert(false, concat(
  "$EValueError] [random.randint] empty range: a=", str($a), " is greater than b=", str($b)))),
  item(random_integers($a, $b + 1, list())))""",
    # del xs[a:b:k] of a list: the items the slice does not select, in order (a
    # mask of the selected positions: any step, negative too; a zero step is
    # Python's ValueError); anything but a list is Python's TypeError.
    "del_step": """block(define($x, $1), if(type($x) != "list", assert(false, concat(
  "$ETypeError] '", __py_type_name($x), "' object does not support item deletion"))),
  define($n, len($x)), define($m, setitem(zeros($n, dtype="bool"), true, $2)),
  define($r, list()), define($i, 0),
  while($i < $n, block(if(getitem($m, $i), nil, define($r, append($r, getitem($x, $i)))),
    define($i, $i + 1))),
  $r)""",
    # Python's sum(xs): a list or tuple added left to right as Python adds
    # (py_sum_list); an array over its first axis, 0 (an int) for nothing to add.
    "py_sum": """block(define($x, $1), if(contains(list("list", "tuple"), type($x)),
  block(define($t, 0), define($i, 0), define($n, len($x)),
    while($i < $n, block(define($t, $t + getitem($x, $i)), define($i, $i + 1))), $t),
  if(len($x) == 0, 0, sum($x, axis=0))))""",
    # sum() of a list the translator sees made (a generator, a comprehension,
    # a display): added left to right from 0, as Python adds (its ints stay
    # ints, its floats rounded in Python's order).
    "py_sum_list": """block(define($x, $1), define($t, 0), define($i, 0), define($n, len($x)),
  while($i < $n, block(define($t, $t + getitem($x, $i)), define($i, $i + 1))), $t)""",
    # round(x) without digits: an int for a number, as Python
    "round_int": """block(define($x, $1),
  if(ndim($x) == 0, astype(round($x), "int64"), round($x)))""",
    # an item of np.c_[...]: a 1-d array as a column
    "c_column": """block(define($x, $1), if(ndim($x) == 1, reshape($x, list(-1, 1)), $x))""",
    # x[t] for a tuple t of ints (np.ndindex): one axis per item, as NumPy.
    "index_tuple": """block(define($x, $1), define($t, $2), define($i, 0), define($n, len($t)),
  while($i < $n, block(define($x, getitem($x, getitem($t, $i))), define($i, $i + 1))),
  $x)""",
    # xs.append(v) / xs.extend(ys) on a list read from inside another value
    # (d[k].append(v)): the grown list; anything else is Python's error.
    "list_append": """block(define($l, $1), if(type($l) == "list", append($l, $2),
  assert(false, concat("$EAttributeError] '", __py_type_name($l),
    "' object has no attribute 'append'"))))""",
    "list_extend": """block(define($l, $1), if(type($l) == "list", iadd($l, $2),
  assert(false, concat("$EAttributeError] '", __py_type_name($l),
    "' object has no attribute 'extend'"))))""",
    # A set's sum (sets are dicts of their elements, _sets.py): over its keys
    # in any order, exact for ints; floats would be added in Python's set order.
    "set_sum": """block(define($s, $1),
  define($k, keys($s)), define($t, 0), define($i, 0), define($n, len($k)),
  while($i < $n, block(define($v, getitem($k, $i)),
    if(type($v) == "float", assert(false, concat("$EValueError] [sum] the sum of a set of floats ",
      "depends on Python's set order, which tessera does not reproduce: ",
      "use sum(sorted(s)) (element ", str($v), ")"))),
    define($t, $t + $v), define($i, $i + 1))),
  $t)""",
    # int(s, base), int(s, base=b): Python's checks in Python's order (the base an
    # integer, then its range, then s a string), then __int_parse, whose verdict is
    # raised here, at the user's line, with Python's message. $3 is
    # sys.get_int_max_str_digits() when the function was translated. Up to 12
    # digits of the base (ASCII) and nothing else, which cannot overflow
    # (36**12 < 2**63), are read here, with a third of __int_parse's work.
    "int_base": """block(define($x, $1), define($b, $2), define($t, type($b)),
  if($t == "bool", define($b, if($b, 1, 0)), if($t != "int",
    if(str_endswith($t, " array") && ndim($b) == 0
         && (str_startswith($t, "int") || str_startswith($t, "uint")), define($b, item($b)),
      assert(false, concat("$ETypeError] '", __py_type_name($b),
                           "' object cannot be interpreted as an integer"))))),
  if($b != 0 && ($b < 2 || $b > 36),
    assert(false, "$EValueError] int() base must be >= 2 and <= 36, or 0")),
  if(type($x) != "string",
    assert(false, "$ETypeError] int() can't convert non-string with explicit base")),
  define($n, len($x)), define($r, -1),
  if($b != 0 && $n > 0 && $n < 13, block(define($i, 0), define($v, 0),
    while($i < $n, block(
      define($d, str_find("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                          getitem($x, $i))),
      if($d >= 36, define($d, $d - 26)),
      if($d < 0 || $d >= $b, define($i, $n + 1), block(define($v, $v * $b + $d),
        define($i, $i + 1))))),
    if($i == $n, define($r, $v)))),
  if($r < 0, define($r, __int_parse($x, $b, $3))),
  if(type($r) == "int", $r, INT_RAISE))""".replace(
        "INT_RAISE", _int_raise("$x", "$b", "$3", 'concat(", ", str($b))')),
    # int(s) of a string: the same parse in base 10 (the message names no base).
    # Up to 18 ASCII digits and nothing else (int(c) for c in str(n), int(str(k)))
    # are read here, with a third of __int_parse's work per character and no
    # overflow to check; anything else goes to __int_parse.
    "str_to_int": """block(define($s, $1), define($n, len($s)),
  define($r, if($n == 1, str_find("0123456789", $s), -1)),
  if($r < 0 && $n > 1 && $n < 19, block(define($i, 0), define($v, 0), define($ok, true),
    while($ok && $i < $n, block(define($d, str_find("0123456789", getitem($s, $i))),
      if($d < 0, define($ok, false), block(define($v, $v * 10 + $d), define($i, $i + 1))))),
    if($ok, define($r, $v)))),
  if($r < 0, define($r, __int_parse($s, 10, $2))),
  if(type($r) == "int", $r, INT_RAISE))""".replace("INT_RAISE", _int_raise("$s", "10", "$2", '""')),
    # x.tolist(): __to_list, its argument's kind checked at the user's line; a list,
    # dict, string or None has no such method (Python's AttributeError)
    "to_list": """block(define($x, $1), define($t, type($x)),
  if($t == "list" || $t == "dict" || $t == "string" || $t == "nil" || $t == "tuple",
    assert(false, concat("$EAttributeError] '", __py_type_name($x),
                         "' object has no attribute 'tolist'"))),
  if(ndim($x) == 0, item($x), __to_list($x)))""",
    # random.choice(seq): one item drawn uniformly (an empty sequence is an
    # IndexError, as Python's).
    "choice": """block(define($s, $1), if(len($s) == 0,
  assert(false, "$EIndexError] [random.choice] Cannot choose from an empty sequence"),
  getitem($s, item(random_integers(0, len($s), list())))))""",
}
# A set's min and max: over its keys (an empty set is Python's ValueError).
for _op, _cmp in (("min", "<"), ("max", ">")):
    INLINE[f"set_{_op}"] = f"""block(define($s, $1),
  define($k, keys($s)), define($n, len($k)),
  if($n == 0, assert(false, "$EValueError] {_op}() arg is an empty sequence")),
  define($m, getitem($k, 0)), define($i, 1),
  while($i < $n, block(define($v, getitem($k, $i)), if($v {_cmp} $m, define($m, $v)),
    define($i, $i + 1))),
  $m)"""


# int(s, base) as CPython's PyLong_FromUnicodeObject reads s: blanks around (ASCII's
# " \t\n\v\f\r" and Unicode's; not "\x1c"-"\x1f", which str.isspace() takes but int()
# does not), one sign, a 0x/0o/0b prefix (required by base 0, allowed by its own
# base) and one underscore after it, digits of the base with single underscores
# between them (Unicode's decimal digits, "١٢", count as 0-9), a base-0 number
# with a leading 0 only if it is zero. __int_parse gives the int, or why not:
# "invalid", "overflow" (past int64: accumulated negative, checked before each
# step past the twelfth digit, as 36**12 < 2**63, and only reported for an
# otherwise valid string, as Python would have read it) or, as a string, the count of digits past Python's limit for bases other than
# powers of two. AT(k) is the character at k as int() reads it ("" past the end, a
# non-ASCII one through __int_char) and BLANK whether c is a blank, both written
# into the text (a call of the language's per character doubled int(c)'s time).
_AT = """if({k} >= n, "", block(define(ch, getitem(s, {k})),
  if(ch > "\x7f", __int_char(ch), ch)))"""
_BLANK = """(c != "" && str_find(" \\t\\n\x0b\x0c\\r", c) >= 0)"""
HELPERS["__int_parse"] = """define(__int_parse, s, base, lim, block(
  define(n, len(s)), define(i, 0), define(c, AT(0)),
  while(BLANK, block(define(i, i + 1), define(c, AT(i)))),
  define(neg, false),
  if(c == "+" || c == "-", block(define(neg, c == "-"), define(i, i + 1), define(c, AT(i)))),
  define(b, base), define(zero_only, false), define(c1, AT(i + 1)),
  if(b == 0, if(c != "0", define(b, 10),
    if(c1 == "x" || c1 == "X", define(b, 16), if(c1 == "o" || c1 == "O", define(b, 8),
      if(c1 == "b" || c1 == "B", define(b, 2), block(define(zero_only, true), define(b, 10))))))),
  if(c == "0" && ((b == 16 && (c1 == "x" || c1 == "X")) || (b == 8 && (c1 == "o" || c1 == "O"))
                  || (b == 2 && (c1 == "b" || c1 == "B"))), block(
    define(i, i + 2), define(c, AT(i)),
    if(c == "_", block(define(i, i + 1), define(c, AT(i)))))),
  if(c == "_", "invalid", block(
    define(low, (-9223372036854775807 - 1)), define(rem, low % b),
    define(edge, floor_divide(low, b) + if(rem == 0, 0, 1)),
    define(slack, if(rem == 0, 0, b - rem)),
    define(digits, 0), define(prev, ""), define(r, 0), define(ovf, false), define(bad, false),
    define(go, c != ""),
    while(go, block(
      if(c == "_", if(prev == "_", block(define(bad, true), define(go, false))), block(
        define(d, str_find("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", c)),
        if(d >= 36, define(d, d - 26)),
        if(d < 0 || d >= b, define(go, false), block(define(digits, digits + 1),
          if(digits <= 12, define(r, r * b - d),
            if(ovf || r < edge || (r == edge && d > slack), define(ovf, true),
              define(r, r * b - d))))))),
      if(go, block(define(prev, c), define(i, i + 1), define(c, AT(i)), define(go, c != ""))))),
    if(bad || prev == "_", "invalid",
    if(lim > 0 && digits > lim && b != 2 && b != 4 && b != 8 && b != 16 && b != 32, str(digits),
    if(digits == 0 || (zero_only && (ovf || r != 0)), "invalid", block(
      while(BLANK, block(define(i, i + 1), define(c, AT(i)))),
      if(i < n, "invalid", if(ovf || (!neg && r == low), "overflow", if(neg, r, -r)))))))))))"""
HELPERS["__int_parse"] = re.sub(r"AT\(([^()]*)\)", lambda m: _AT.format(k=m.group(1)),
                               HELPERS["__int_parse"]).replace("BLANK", _BLANK)
HELPER_DEPS["__int_parse"] = ("__int_char",)


def int_parse_helpers() -> None:
    """Adds __int_char, which reads a non-ASCII character as int() does: a Unicode
    decimal digit as its ASCII digit, a Unicode blank as " ", anything else as "?"
    (which no number holds). Its tables come from this Python's own Unicode data,
    made on first use (35 ms): decimal digits come in runs of ten, 0 to 9, and all
    lie below U+20000."""
    if "__int_char" in HELPERS:
        return
    chars = [chr(i) for i in range(0x80, 0x20000)]
    digits = "".join(c for c in chars if c.isdecimal())
    blanks = "".join(c for c in chars if c.isspace())
    HELPERS["__int_char"] = f"""define(__int_char, c, block(define(k, str_find("{digits}", c)),
  if(k >= 0, getitem("0123456789", k % 10), if(str_find("{blanks}", c) >= 0, " ", "?"))))"""

