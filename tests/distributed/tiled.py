# Tiled arrays from Python under `tessera run -n N`: the eager functions of
# tessera.distributed and the same calls inside @tessera.jit functions, against
# NumPy on the whole arrays (every rank draws the same global inputs). Checks
# each rank's tile and spans as well as the gathered whole; prints "ok".
import numpy as np

import tessera
import tessera.distributed as td

r, n = td.rank(), td.size()
rng = np.random.default_rng(0)
A = rng.normal(size=(7, 5))  # uneven over 2, 3, 4 ranks
S = rng.normal(size=(3, 4))  # an empty tile over 4 ranks
W = rng.normal(size=(5, 3))


def bounds(m):
    """Every rank's [start, stop) of an extent m split like numpy.array_split."""
    sizes = [len(p) for p in np.array_split(np.arange(m), n)]
    starts = np.cumsum([0] + sizes)
    return [(int(starts[k]), int(starts[k + 1])) for k in range(n)]


def rows_of(g):
    b, e = bounds(g.shape[0])[r]
    return g[b:e]


def cols_of(g):
    b, e = bounds(g.shape[1])[r]
    return g[:, b:e]


# Eager: annotate_d gives a handle with this rank's tile and every span.
t = td.annotate_d(rows_of(A))
assert isinstance(t, tessera._core.TiledArray), type(t)
assert t.shape == (7, 5) and t.locality == r and t.tiling == "rows", (t.shape, t.locality, t.tiling)
assert t.spans == [((b, e), (0, 5)) for b, e in bounds(7)], t.spans
np.testing.assert_array_equal(t.tile, rows_of(A))
np.testing.assert_array_equal(td.all_gather_d(t), A)

# retile_d moves only what each rank needs: its tile is the NumPy slice.
c = td.retile_d(t, "columns")
assert c.tiling == "columns" and c.spans == [((0, 7), (b, e)) for b, e in bounds(5)], c.spans
np.testing.assert_array_equal(c.tile, cols_of(A))
np.testing.assert_array_equal(td.retile_d(c, "replicated").tile, A)
e = td.retile_d(td.annotate_d(rows_of(S)), "columns")
np.testing.assert_array_equal(e.tile, cols_of(S))
assert e.tile.shape == (3, bounds(4)[r][1] - bounds(4)[r][0])

# Constructors: the tile is this rank's part of the local draw.
rd = td.random_d((6, 4), "columns", seed=3, dtype=np.float32)
whole = tessera.call_primitive("random_uniform", [[6, 4]], {"seed": 3, "dtype": "float32"})
np.testing.assert_array_equal(rd.tile, cols_of(whole))
np.testing.assert_array_equal(td.all_gather_d(rd), whole)
cd = td.constant_d(1.5, (5, 2))
np.testing.assert_array_equal(cd.tile, rows_of(np.full((5, 2), 1.5)))
np.testing.assert_allclose(td.dot_d(t, W).tile, rows_of(A @ W), rtol=1e-12)
np.testing.assert_allclose(td.dot_d(c, td.annotate_d(rows_of(W))), A @ W, rtol=1e-12)
np.testing.assert_array_equal(td.transpose_d(t).tile, rows_of(A).T)


@tessera.jit
def standardize(x, w):
    mu = np.mean(x, axis=0)  # along the tiled axis: a plain array, one all_reduce
    centered = x - mu  # tiled minus a broadcast plain array: tiled
    scale = np.sqrt(np.sum(centered * centered, axis=0) / x.shape[0])
    z = centered / scale
    return [td.all_gather_d(z), np.argmax(x, axis=1), z.max(), x @ w, x.T, np.sum(x > 0.0)]


got = standardize(t, W)
want = (A - A.mean(axis=0)) / A.std(axis=0)
np.testing.assert_allclose(got[0], want, rtol=1e-10)
assert isinstance(got[1], tessera._core.TiledArray) and got[1].tiling == "rows"
np.testing.assert_array_equal(got[1].tile, rows_of(np.argmax(A, axis=1)))
np.testing.assert_allclose(got[2], want.max(), rtol=1e-12)
np.testing.assert_allclose(got[3].tile, rows_of(A @ W), rtol=1e-12)
assert got[4].tiling == "columns" and got[4].shape == (5, 7)
np.testing.assert_array_equal(got[4].tile, rows_of(A).T)
assert int(got[5]) == int(np.sum(A > 0))


@tessera.jit
def make_and_reduce(seed):
    # The tessera.distributed functions inside a jit function are primitives.
    x = td.random_d([9, 4], "columns", distribution="normal", seed=seed)
    y = td.retile_d(x, "rows")
    return [td.all_gather_d(y), np.argmin(y), np.min(x, axis=0), td.rank(), td.size()]


got = make_and_reduce(5)
whole = tessera.call_primitive("random_normal", [[9, 4]], {"seed": 5})
np.testing.assert_array_equal(got[0], whole)
assert int(got[1]) == int(np.argmin(whole))
# Along the untiled axis the result stays tiled, without communication.
assert got[2].tiling == "rows" and got[2].shape == (4,), got[2]
np.testing.assert_array_equal(got[2].tile, cols_of(whole).min(axis=0))
assert (got[3], got[4]) == (r, n)

# A tiling that does not cover the array is a ValueError naming the spans.
try:
    td.annotate_d(np.zeros((1, 3)), spans=[[2 * r, 2 * r + 1], [0, 3]], shape=[2 * n, 3])
except ValueError as error:
    assert "the tiling does not cover the array of shape" in str(error), error
    assert "locality 0 [0:1, 0:3]" in str(error), error
else:
    raise AssertionError("annotate_d accepted a tiling with holes")
td.barrier()
print("ok")
