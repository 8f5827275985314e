"""FarmHash Fingerprint64 of integers' decimal text as expression text: what
Keras's Hashing (salt=None) computes on integer inputs, through TensorFlow's
tf.strings.to_hash_bucket_fast(tf.strings.as_string(x)), written with the
language's int64 primitives (they wrap, as the hash's unsigned arithmetic
does) so that Hashing compiles into a model with Keras's bins. _hashes.py
has the same algorithm on bytes, eagerly."""

from __future__ import annotations

from .._hashes import _K0, _K1, _K2

__all__: list = []  # a helper of preprocessing.py

_WIDTH = 20  # the longest decimal text of an int64: "-9223372036854775808"


def _signed(v: int) -> str:
    """An unsigned 64-bit constant as the int64 with its bits."""
    return str(v - (1 << 64) if v >= 1 << 63 else v)


class _Writer:
    """Writes the hash's steps as definitions (ctx.define), each used by name."""

    def __init__(self, ctx):
        self.ctx = ctx

    def let(self, expr):
        return self.ctx.define("fh", expr)

    @staticmethod
    def srl(v, s):  # logical shift right
        return f"bitwise_and(right_shift({v}, {s}), {(1 << (64 - s)) - 1})"

    def rot(self, v, s):
        return f"bitwise_or({self.srl(v, s)}, left_shift({v}, {64 - s}))"

    def mix(self, v):
        v = self.let(v)
        return f"bitwise_xor({v}, {self.srl(v, 47)})"

    def len16(self, u, v, mul):
        v = self.let(v)
        a = self.let(self.mix(f"bitwise_xor({u}, {v}) * {mul}"))
        b = self.let(self.mix(f"bitwise_xor({v}, {a}) * {mul}"))
        return f"{b} * {mul}"


def fingerprint_expr(ctx, x: str) -> str:
    """The signed int64 whose bits are Fingerprint64 of str(v) for each int64
    v of the expression x."""
    w = _Writer(ctx)
    k0, k1, k2 = _signed(_K0), _signed(_K1), _signed(_K2)
    x = w.let(f"astype({x}, \"int64\")")
    neg = w.let(f"astype({x} < 0, \"int64\")")
    mag = w.let(f"where({x} < 0, 0 - {x}, {x})")
    digits = w.let("1 + " + " + ".join(f"astype({mag} >= {10 ** k}, \"int64\")"
                                        for k in range(1, 19)))
    n = w.let(f"{digits} + {neg}")
    # the text's bytes, (..., 20): "-" first when negative, the digits, zeros after
    pos = f"arange({_WIDTH})"
    j = w.let(f"{pos} - expand_dims({neg}, -1)")
    power = f"take(asarray([{', '.join(str(10 ** k) for k in range(19))}], \"int64\"), " \
            f"clip(expand_dims({digits}, -1) - 1 - {j}, 0, 18))"
    digit = f"mod(floor_divide(expand_dims({mag}, -1), {power}), 10)"
    text = w.let(f"where(logical_and(expand_dims({neg}, -1) == 1, {pos} == 0), 45, "
                 f"where(logical_and({j} >= 0, {j} < expand_dims({digits}, -1)), "
                 f"48 + {digit}, 0))")

    def fetch(offset, size):  # little-endian, bytes below 128: the sum is the bits
        at = f"clip(expand_dims({offset}, -1) + arange({size}), 0, {_WIDTH - 1})"
        return w.let(f"sum(left_shift(take_along_axis({text}, {at}, axis=-1), "
                     f"arange({size}) * 8), axis=-1)")

    def byte(offset):
        return fetch(offset, 1)

    mul = w.let(f"{k2} + {n} * 2")
    # 1 to 3 bytes
    y = f"{byte('0 * ' + n)} + left_shift({byte(f'right_shift({n}, 1)')}, 8)"
    z = f"{n} + left_shift({byte(f'{n} - 1')}, 2)"
    h1 = f"{w.mix(f'bitwise_xor(({y}) * {k2}, ({z}) * {k0})')} * {k2}"
    # 4 to 7
    h4 = w.len16(f"{n} + left_shift({fetch('0 * ' + n, 4)}, 3)", fetch(f"{n} - 4", 4), mul)
    # 8 to 16
    a = w.let(f"{fetch('0 * ' + n, 8)} + {k2}")
    b = fetch(f"{n} - 8", 8)
    c = f"{w.rot(b, 37)} * {mul} + {a}"
    d = f"({w.rot(a, 25)} + {b}) * {mul}"
    h8 = w.len16(w.let(c), d, mul)
    # 17 to 20 (farmhash's 17 to 32)
    a = w.let(f"{fetch('0 * ' + n, 8)} * {k1}")
    b = fetch(f"0 * {n} + 8", 8)
    c = w.let(f"{fetch(f'{n} - 8', 8)} * {mul}")
    d = f"{fetch(f'{n} - 16', 8)} * {k2}"
    u = f"{w.rot(w.let(f'{a} + {b}'), 43)} + {w.rot(c, 30)} + {d}"
    v = f"{a} + {w.rot(w.let(f'{b} + {k2}'), 18)} + {c}"
    h17 = w.len16(w.let(u), v, mul)
    return (f"where({n} >= 17, {h17}, where({n} >= 8, {h8}, where({n} >= 4, {h4}, "
            f"{h1})))")


def unsigned_mod_expr(h: str, bins: int) -> str:
    """The unsigned 64-bit value of h's bits modulo bins."""
    wrap = (1 << 64) % bins
    return f"where({h} < 0, mod(mod({h}, {bins}) + {wrap}, {bins}), mod({h}, {bins}))"


def cross_expr(ctx, features: list, key: int) -> str:
    """TensorFlow's hashed cross of integer features (HashedCrossing): from
    `key`, each feature's int64 bits chained by FingerprintCat64."""
    w = _Writer(ctx)
    mul = _signed(0xC6A4A7935BD1E995)
    out = str(key)
    for f in features:
        v = w.let(f"astype({f}, \"int64\") * {mul}")
        out = w.let(f"bitwise_xor(bitwise_xor({out}, {mul}), {w.mix(v)} * {mul}) * {mul}")
        out = w.let(f"{w.mix(out)} * {mul}")
        out = w.mix(out)
    return out
