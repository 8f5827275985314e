"""Helpers shared by the distributed test scripts: spans of hand-made tilings,
tiles of whole arrays, and gradient programs."""

import numpy as np

from tessera import _core


def tile_of(a, span):
    """The part of the whole array a inside span ([(lo, hi)] per axis)."""
    return np.ascontiguousarray(a[tuple(slice(lo, hi) for lo, hi in span)])


def program(params, body, argnums, name):
    """value_and_grad of `body` with respect to the parameters at argnums
    (just the value for no argnums), compiled as `name`.tsl."""
    if not argnums:
        return _core.Program(f"define(f, {params}, {body})\nf", name + ".tsl")
    nums = ", ".join(map(str, argnums))
    text = (f"define(loss, {params}, {body})\n"
            f"define(f, {params}, value_and_grad(loss, [{nums}])({params}))\nf")
    return _core.Program(text, name + ".tsl")


def spans_along(shape, axis, sizes, n):
    """Spans over n localities giving locality q the extent of (q, extent) in
    `sizes`, laid out along `axis` in the order of `sizes`; every other axis
    whole."""
    spans = [None] * n
    at = 0
    for q, extent in sizes:
        box = [(0, e) for e in shape]
        box[axis] = (at, at + extent)
        spans[q] = box
        at += extent
    assert at == shape[axis] and None not in spans
    return spans


def splits(extent, n):
    """Ways to split `extent` indices over n localities, as (name, [(locality,
    size)]): "even" (numpy.array_split sizes, in locality order), and with more
    than one locality "uneven, empty" (2 on the first, the rest on the last,
    none between) and "reversed, empty" (laid out from the last locality to
    the first, locality n // 2 empty). Feed the sizes to spans_along."""
    even = [(q, extent // n + (q < extent % n)) for q in range(n)]  # numpy.array_split
    out = [("even", even)]
    if n > 1:
        lopsided = [0] * n
        lopsided[0], lopsided[-1] = 2, extent - 2
        out.append(("uneven, empty", list(enumerate(lopsided))))
        sizes, left = {}, extent
        for q in reversed(range(n)):
            sizes[q] = 0 if q == n // 2 else (left if q == 0 else min(left, 1 + q % 3))
            left -= sizes[q]
        out.append(("reversed, empty", [(q, sizes[q]) for q in reversed(range(n))]))
    return out
