# Gradients through tiled arrays under `tessera run -n N`: programs mixing
# conv1d_d on time tiles (kernel 3, dilation 2), bias_add and + with plain
# arrays, activations, sum and mean (over everything, along time, along
# channels), and products of tiled and plain matrices, against the
# single-process gradient of the same program on the whole arrays, which every
# rank computes itself from the same seeded inputs. The value of a tiled
# program is one global value (the same on every rank, not N times it); a
# tiled parameter's gradient is tiled like it, a plain one's is the whole
# gradient on every rank. Time tiles even, uneven with empty ones, and out of
# locality order; rows uneven and empty. Prints "ok".
import numpy as np

import tessera
import tessera.distributed as td
from tessera import _core

import tiling_cases  # tests/distributed/tiling_cases.py
from tiling_cases import program, tile_of

r, n = td.rank(), td.size()
BATCH, STEPS, CHANNELS, FILTERS = 2, 13, 3, 4
CONV = "padding='{p}', dilation=2"


def spans_along(shape, axis, sizes):
    return tiling_cases.spans_along(shape, axis, sizes, n)


def tiled(a, spans, name="user"):
    return _core.TiledArray(tile_of(a, spans[r]), a.shape, spans, name)


def tiling_name(tiling, axis):
    """Even tiles go by the name of their axis ('columns' is axis 1, time in
    (batch, steps, channels)), so that results have the same kind on one
    locality as on N; the others by spans."""
    return ("rows", "columns")[axis] if tiling == "even" else "user"


def check(got, want, what, tiled_args):
    """got from the tiled program, want from the whole arrays."""
    (value, grads), (want_value, want_grads) = got, want
    # One global value, the same on every rank.
    np.testing.assert_allclose(value, want_value, rtol=1e-12, atol=1e-12, err_msg=what + ": value")
    every = td.all_gather(np.atleast_1d(np.asarray(value, dtype=np.float64)))
    assert (every == every[0]).all(), (what, every)
    for k, (g, w) in enumerate(zip(grads, want_grads)):
        arg = tiled_args.get(k)
        label = f"{what}: gradient {k}"
        if arg is None:
            assert not isinstance(g, _core.TiledArray), (label, g)
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=label)
            # The same whole gradient on every rank (no factor N, no partial sums).
            every = td.all_gather(np.asarray(g, dtype=np.float64).reshape(1, -1))
            assert (every == every[0]).all(), label
        else:
            assert isinstance(g, _core.TiledArray), (label, g)
            assert g.spans == arg.spans and g.shape == arg.shape, (label, g.spans, arg.spans)
            np.testing.assert_allclose(g.tile, tile_of(w, arg.spans[r]), rtol=1e-10, atol=1e-12, err_msg=label)


rng = np.random.default_rng(11)
x = rng.normal(size=(BATCH, STEPS, CHANNELS))
w = rng.normal(size=(3, CHANNELS, FILTERS))
w2 = rng.normal(size=(3, FILTERS, 2))
b = rng.normal(size=FILTERS)
steps_valid = STEPS - 4
u = rng.normal(size=(BATCH, STEPS, CHANNELS))

# (name, parameters, body with {conv}, argnums, plain arguments after x).
# {conv} is conv1d_d in the tiled program and conv1d in the whole one.
conv_cases = [
    ("bias_add, relu, sum times plain weights", "x, w, b, q",
     "sum(relu(bias_add({conv}(x, w, " + CONV.format(p="same") + "), b)) * q)",
     [0, 1, 2, 3], [w, b, rng.normal(size=(STEPS, FILTERS))]),
    ("+ plain bias, tanh, mean times a number", "x, w, c, s",
     "mean(tanh({conv}(x, w, " + CONV.format(p="causal") + ") + c) * s)",
     [0, 1, 2, 3], [w, rng.normal(size=(1, FILTERS)), 0.7]),
    ("valid, sum along time, then plain", "x, w, b",
     "mean(sum(relu(bias_add({conv}(x, w, " + CONV.format(p="valid") + "), b)), axis=1) ** 2)",
     [0, 1, 2], [w, b]),
    ("mean along time with keepdims", "x, w, q",
     "sum(mean({conv}(x, w, " + CONV.format(p="same") + "), axis=1, keepdims=true) * q)",
     [0, 1, 2], [w, rng.normal(size=(BATCH, 1, FILTERS))]),
    ("sum along channels stays tiled", "x, w, q",
     "sum(exp(0.2 * sum({conv}(x, w, " + CONV.format(p="same") + "), axis=2)) * q)",
     [0, 1, 2], [w, rng.normal(size=(BATCH, STEPS))]),
    ("two convolutions, mean", "x, w, b, w2",
     "mean(sigmoid({conv}(relu(bias_add({conv}(x, w, " + CONV.format(p="same") + "), b)), w2, "
     + CONV.format(p="same") + ")))",
     [0, 1, 2, 3], [w, b, w2]),
    ("max over everything", "x, w",
     "max({conv}(x, w, " + CONV.format(p="causal") + "))", [0, 1], [w]),
    ("a tiled parameter without gradient", "x, w, v",
     "sum(relu({conv}(x, w, " + CONV.format(p="same") + ")))", [0, 1, 2], [w, "v"]),
    ("only the plain parameters", "x, w, b",
     "sum(softplus(bias_add({conv}(x, w, " + CONV.format(p="same") + "), b)))", [1, 2], [w, b]),
    # Overlapped tiles: each copy of a halo step has its own cotangent, and
    # the plain c gets the sum over every copy.
    ("overlap_d, + plain, relu, conv", "x, w, c",
     "sum({conv}(relu({overlap} + c), w, " + CONV.format(p="same") + ") ** 2)", [0, 1, 2],
     [w, rng.normal(size=CHANNELS)]),
]

cases = 0
for name, params, body, argnums, rest in conv_cases:
    overlap = "overlap_d(x, 3, " + CONV.format(p="same") + ")"
    dist = program(params, body.format(conv="conv1d_d", overlap=overlap), argnums, "tiled_grad_" + str(cases))
    whole = program(params, body.format(conv="conv1d", overlap="x"), argnums, "whole_grad_" + str(cases))
    whole_args = [x] + [u if isinstance(a, str) else a for a in rest]
    want_value, want_grads = whole.run(whole_args)
    for tiling, sizes in tiling_cases.splits(STEPS, n):
        spans = spans_along(x.shape, 1, sizes)
        xt = tiled(x, spans, tiling_name(tiling, 1))
        args = [xt] + [tiled(u, spans, tiling_name(tiling, 1)) if isinstance(a, str) else a for a in rest]
        tiled_args = {argnums.index(k): args[k] for k in range(len(args))
                      if k in argnums and isinstance(args[k], _core.TiledArray)}
        check(dist.run(args), (want_value, want_grads), f"{name}, time tiles {tiling}", tiled_args)
        cases += 1
        if name == "a tiled parameter without gradient":
            v_grad = dist.run(args)[1][2]
            assert not v_grad.tile.any() and v_grad.tile.shape == tile_of(u, spans[r]).shape

# Matrix products: tiled by rows times plain or replicated, plain times tiled
# by columns, tiled along the contracted axis on both sides (dot_d and @),
# vectors. (array, axis) is tiled along axis, (array, None) replicated.
X = rng.normal(size=(7, 5))
W = rng.normal(size=(5, 3))
A = rng.normal(size=(4, 7))
V = rng.normal(size=5)
dot_cases = [
    ("rows @ plain + plain", "x, w, c, q", "sum(tanh(x @ w + c) * q)", [0, 1, 2, 3],
     [(X, 0), W, rng.normal(size=3), rng.normal(size=(7, 3))]),
    ("dot_d(rows, plain vector)", "x, v", "sum(sin(dot_d(x, v)))", [0, 1], [(X, 0), V]),
    ("rows @ replicated", "x, w", "mean(relu(x @ w))", [0, 1], [(X, 0), (W, None)]),
    ("plain @ columns", "a, y", "mean(cos(a @ y))", [0, 1], [A, (X, 1)]),
    ("columns @ rows", "x, y", "sum((x @ y) ** 2)", [0, 1], [(X, 1), (W, 0)]),
    ("vector @ vector", "v, z", "(v @ z) ** 2", [0, 1], [(V, 0), (W[:, 0].copy(), 0)]),
    # The compiler makes matmul_tn of transpose(x) @ y.
    ("transpose(rows) @ rows", "x, y, w", "sum(sin(transpose(x) @ (y * w)))", [0, 1, 2],
     [(X, 0), (A.T.copy(), 0), rng.normal(size=4)]),
    ("matmul_tn(rows, rows)", "x, y", "sum(matmul_tn(x, y) ** 2)", [0, 1], [(X, 0), (A.T.copy(), 0)]),
]
for name, params, body, argnums, spec in dot_cases:
    dist = program(params, body, argnums, "tiled_dot_" + str(cases))
    whole = program(params, body.replace("dot_d(", "matmul("), argnums, "whole_dot_" + str(cases))
    whole_args = [s[0] if isinstance(s, tuple) else s for s in spec]
    want = whole.run(whole_args)
    extent = next(s[0].shape[s[1]] for s in spec if isinstance(s, tuple))

    def make(s, sizes, tiling):
        if not isinstance(s, tuple):
            return s
        if s[1] is None:
            return tiled(s[0], [[(0, e) for e in s[0].shape]] * n, "replicated")
        return tiled(s[0], spans_along(s[0].shape, s[1], sizes), tiling_name(tiling, s[1]))

    for tiling, sizes in tiling_cases.splits(extent, n):
        args = [make(s, sizes, tiling) for s in spec]
        tiled_args = {argnums.index(k): a for k, a in enumerate(args) if isinstance(a, _core.TiledArray)}
        check(dist.run(args), want, f"{name}, tiles {tiling}", tiled_args)
        cases += 1

# From Python: tessera.grad of a jit function taking a tiled array.


@tessera.jit
def spatial_loss(x, w, b, q):
    h = tessera.relu(tessera.bias_add(tessera.conv1d_d(x, w, padding="same", dilation=2), b))
    return np.sum(np.mean(h, axis=1) * q)


@tessera.jit
def whole_loss(x, w, b, q):
    h = tessera.relu(tessera.bias_add(tessera.conv1d(x, w, padding="same", dilation=2), b))
    return np.sum(np.mean(h, axis=1) * q)


q = rng.normal(size=(BATCH, FILTERS))
want_value, want_grads = tessera.value_and_grad(whole_loss, argnums=(0, 1, 2, 3))(x, w, b, q)
for tiling, sizes in tiling_cases.splits(STEPS, n):
    xt = tiled(x, spans_along(x.shape, 1, sizes), tiling_name(tiling, 1))
    got = tessera.value_and_grad(spatial_loss, argnums=(0, 1, 2, 3))(xt, w, b, q)
    check(got, (want_value, want_grads), f"jit, time tiles {tiling}", {0: xt})
    cases += 1

# The two conventions side by side: sum(x) of a tiled x is one global value
# (gradient 1 per element); all_reduce(sum(local_tile(x))) has the same value
# on every rank, but the collective counts every rank's copy of its result as
# a loss of its own (gradient N per element).
xt = tiled(x, spans_along(x.shape, 1, tiling_cases.splits(STEPS, n)[-1][1]), "user")
one = program("x", "sum(x * x)", [0], "global_loss").run([xt])
copies = program("x", "all_reduce(sum(local_tile(x) * local_tile(x)))", [0], "collective_loss").run([xt])
np.testing.assert_allclose(copies[0], one[0], rtol=1e-12)
np.testing.assert_allclose(one[1][0].tile, 2 * xt.tile, rtol=1e-12)
np.testing.assert_allclose(copies[1][0].tile, 2 * n * xt.tile, rtol=1e-12)

td.barrier()
assert cases == (len(conv_cases) + len(dot_cases) + 1) * len(tiling_cases.splits(STEPS, n)), cases
print("ok")
