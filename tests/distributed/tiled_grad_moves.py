# Gradients through the primitives that move tiled arrays, under `tessera run
# -n N`: retile_d (rows -> columns -> rows, like another tiled array, to and
# from 'replicated', through overlapping spans and from overlapped tiles),
# transpose_d and all_gather_d, against the single-process gradient of the
# same computation on the whole arrays, which every rank computes itself from
# the same seeded inputs. The value must be the same on every rank; a tiled
# parameter's gradient is tiled like it (for overlapped tiles: the copies'
# cotangents add up to the whole gradient), a plain one's is the whole
# gradient, the same on every rank. Rows even, uneven with empty tiles, and
# out of locality order (tiling_cases.py). Prints "ok".
import numpy as np

import tessera
import tessera.distributed as td
from tessera import _core

import tiling_cases  # tests/distributed/tiling_cases.py
from tiling_cases import program, tile_of

r, n = td.rank(), td.size()
ROWS, COLS = 7, 5


def tiled(a, spans, name):
    return _core.TiledArray(tile_of(a, spans[r]), a.shape, spans, name)


def along(a, axis, tiling, sizes):
    """a tiled along axis: named by its axis when even (so that results have
    the same kind on one locality as on N), else by spans."""
    name = ("rows", "columns")[axis] if tiling == "even" else "user"
    return tiled(a, tiling_cases.spans_along(a.shape, axis, sizes, n), name)


def replicated(a):
    return tiled(a, [[(0, e) for e in a.shape]] * n, "replicated")


def widened(spans, shape, halo):
    """Each nonempty span grown by `halo` rows on both sides (inside the array):
    overlapping spans."""
    out = []
    for box in spans:
        (lo, hi), rest = box[0], list(box[1:])
        if hi > lo:
            lo, hi = max(0, lo - halo), min(shape[0], hi + halo)
        out.append([(lo, hi)] + rest)
    return out


def overlapped(a, tiling, sizes, halo=1):
    spans = widened(tiling_cases.spans_along(a.shape, 0, sizes, n), a.shape, halo)
    return tiled(a, spans, "overlapped")


def whole_of_copies(g):
    """The cotangents of every copy of an overlapped tiled gradient added up
    into the whole array (every rank gets the same)."""
    tiles = td.all_gather(g.tile.reshape(-1))
    out, at = np.zeros(g.shape), 0
    for box in g.spans:
        size = int(np.prod([hi - lo for lo, hi in box]))
        out[tuple(slice(lo, hi) for lo, hi in box)] += tiles[at:at + size].reshape([hi - lo for lo, hi in box])
        at += size
    return out


def same_everywhere(a, label):
    every = td.all_gather(np.atleast_1d(np.asarray(a, dtype=np.float64)).reshape(1, -1))
    assert (every == every[0]).all(), (label, every)


def check(got, want, what, args, argnums):
    (value, grads), (want_value, want_grads) = got, want
    np.testing.assert_allclose(value, want_value, rtol=1e-12, atol=1e-12, err_msg=what + ": value")
    same_everywhere(value, what + ": value on every rank")
    for k, (g, w) in enumerate(zip(grads, want_grads)):
        arg, label = args[argnums[k]], f"{what}: gradient {k}"
        if not isinstance(arg, _core.TiledArray):
            assert not isinstance(g, _core.TiledArray), (label, g)
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=label)
            same_everywhere(g, label)
            continue
        assert isinstance(g, _core.TiledArray), (label, g)
        assert g.spans == arg.spans and g.shape == arg.shape and g.tiling == arg.tiling, (label, g, arg)
        if arg.tiling == "overlapped":
            # Only the copy that was read gets an element's cotangent: a copy
            # counted twice would show here.
            np.testing.assert_allclose(whole_of_copies(g), w, rtol=1e-10, atol=1e-12, err_msg=label)
        else:
            np.testing.assert_allclose(g.tile, tile_of(w, arg.spans[r]), rtol=1e-10, atol=1e-12, err_msg=label)
        if arg.tiling == "replicated":
            same_everywhere(g.tile, label)


rng = np.random.default_rng(5)
X = rng.normal(size=(ROWS, COLS))
Y = rng.normal(size=(ROWS, COLS))
W = rng.normal(size=(COLS, 3))
Q = rng.normal(size=(ROWS, 3))
QX = rng.normal(size=(ROWS, COLS))
A = rng.normal(size=(4, COLS))
B = rng.normal(size=(ROWS, 2))
row_splits = tiling_cases.splits(ROWS, n)
col_splits = tiling_cases.splits(COLS, n)

# (name, parameters, tiled body, whole body, argnums, arguments). An argument
# is a plain value or (how, array): the array tiled by how(array, tiling,
# sizes, k), k the index of the tiling in row_splits; the whole program gets
# the array itself.
R = lambda a, t, s, k: along(a, 0, t, s)                                # rows
C = lambda a, t, s, k: along(a, 1, *col_splits[k])                     # columns, split the same way
NEXT = lambda a, t, s, k: along(a, 0, *row_splits[(k + 1) % len(row_splits)])  # rows split otherwise
REP = lambda a, t, s, k: replicated(a)
OVL = lambda a, t, s, k: overlapped(a, t, s)
# This locality's span of rows widened by 2 (the spans overlap): a tiling for
# retile_d (the whole program ignores it).
WIDE = lambda a, t, s, k: widened(tiling_cases.spans_along(a.shape, 0, s, n), a.shape, 2)[r]
C5 = rng.normal(size=COLS)

cases = [
    ("rows -> columns -> rows", "x, w, q",
     'sum(tanh(retile_d(retile_d(x * 2.0, "columns") + 1.0, "rows") @ w) * q)',
     "sum(tanh((x * 2.0 + 1.0) @ w) * q)", [0, 1], [(R, X), W, Q]),
    ("columns -> rows -> replicated", "x, w",
     'sum(sin(retile_d(retile_d(x, "rows"), "replicated") @ w))', "sum(sin(x @ w))", [0, 1], [(C, X), W]),
    ("retile_d like another tiled array", "x, y, q",
     "sum(exp(0.3 * retile_d(x, y)) * y * q)", "sum(exp(0.3 * x) * y * q)", [0, 1], [(R, X), (NEXT, Y), QX]),
    ("replicated -> rows", "x, q", 'sum(tanh(retile_d(x, "rows")) * q)', "sum(tanh(x) * q)", [0],
     [(REP, X), QX]),
    ("rows -> replicated -> rows", "x, c", 'sum(retile_d(retile_d(x, "replicated") * c, "rows") ** 2)',
     "sum((x * c) ** 2)", [0, 1], [(R, X), C5]),
    # Overlapping target spans: every copy of a shared row is an input of its
    # own; back to rows, each row is read from one copy.
    ("rows -> overlapping spans -> rows", "x, s, q", 'sum(retile_d(tanh(retile_d(x, s)), "rows") * q)',
     "sum(tanh(x) * q)", [0], [(R, X), (WIDE, X), QX]),
    ("overlapped -> rows", "x, q", 'sum(retile_d(x, "rows") ** 2 * q)', "sum(x ** 2 * q)", [0],
     [(OVL, X), QX]),
    ("overlapped -> replicated", "x, w", 'sum(cos(retile_d(x, "replicated") @ w))', "sum(cos(x @ w))",
     [0, 1], [(OVL, X), W]),
    ("transpose_d(columns) @ plain", "x, b", "sum(sin(transpose_d(x) @ b))", "sum(sin(transpose(x) @ b))",
     [0, 1], [(C, X), B]),
    ("plain @ transpose_d(rows)", "a, x", "mean(cos(a @ transpose_d(x)))", "mean(cos(a @ transpose(x)))",
     [0, 1], [A, (R, X)]),
    ("all_gather_d(rows) @ plain", "x, w, q", "sum(tanh(all_gather_d(x * 1.5) @ w) * q)",
     "sum(tanh((x * 1.5) @ w) * q)", [0, 1, 2], [(R, X), W, Q]),
    ("all_gather_d(columns)", "x", "sum(all_gather_d(exp(x)) ** 2)", "sum(exp(x) ** 2)", [0], [(C, X)]),
    ("all_gather_d(replicated)", "x, w", "sum(sin(all_gather_d(x) @ w))", "sum(sin(x @ w))", [0, 1],
     [(REP, X), W]),
    ("all_gather_d(overlapped)", "x, q", "sum(all_gather_d(x) ** 3 * q)", "sum(x ** 3 * q)", [0],
     [(OVL, X), QX]),
    ("all_gather_d(transpose_d(retile_d(rows, columns)))", "x, q",
     'mean(all_gather_d(transpose_d(retile_d(x, "columns"))) * transpose(q))',
     "mean(transpose(x) * transpose(q))", [0], [(R, X), QX]),
]

checked = 0
for name, params, body, whole_body, argnums, spec in cases:
    dist = program(params, body, argnums, f"moves_{checked}")
    whole = program(params, whole_body, argnums, f"whole_{checked}")
    whole_args = [s[1] if isinstance(s, tuple) else s for s in spec]
    want = whole.run(whole_args)
    for k, (tiling, sizes) in enumerate(row_splits):
        args = [s[0](s[1], tiling, sizes, k) if isinstance(s, tuple) else s for s in spec]
        check(dist.run(args), want, f"{name}, rows {tiling}", args, argnums)
        checked += 1

# From Python: a jit function moving a tiled parameter around.


@tessera.jit
def moved_loss(x, w, q):
    y = td.retile_d(td.retile_d(x, "columns") * 0.5, "rows")
    return np.sum(np.tanh(td.all_gather_d(td.transpose_d(td.transpose_d(y))) @ w) * q)


@tessera.jit
def whole_loss(x, w, q):
    return np.sum(np.tanh((x * 0.5) @ w) * q)


want = tessera.value_and_grad(whole_loss, argnums=(0, 1))(X, W, Q)
for tiling, sizes in row_splits:
    xt = along(X, 0, tiling, sizes)
    got = tessera.value_and_grad(moved_loss, argnums=(0, 1))(xt, W, Q)
    check(got, want, f"jit, rows {tiling}", [xt, W, Q], [0, 1])
    checked += 1

td.barrier()
assert checked == (len(cases) + 1) * len(row_splits), checked
print("ok")
