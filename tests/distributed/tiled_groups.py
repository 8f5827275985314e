# Tiled arrays on the groups of a mesh under `tessera run -n 4` (data=2 x
# tensor=2): arrays tiled over the data group (world ranks 0, 2 or 1, 3: not
# consecutive, so point-to-point messages must go to the members' world
# ranks) and over the tensor group, side by side. Every rank draws the same
# global inputs; each group's arrays are checked against NumPy on the whole:
# tiles and spans, all_gather_d, retile_d (point to point inside the group),
# reductions along the tiled axis (a collective on the group), dot_d summing
# partial products (one all_reduce on the group), random_d, conv1d_d with its
# halo exchange, and gradients through a tiled program; the two tensor
# groups' arrays differ (each group holds its own data); mixing groups is an
# error naming both. Prints "ok" on every rank.
import numpy as np

import tessera
import tessera.distributed as td
from tessera import _core

R, N = td.rank(), td.size()
assert N == 4, N
mesh = td.Mesh(data=2, tensor=2)


def bounds(m, n):
    sizes = [len(p) for p in np.array_split(np.arange(m), n)]
    starts = np.cumsum([0] + sizes)
    return [(int(starts[k]), int(starts[k + 1])) for k in range(n)]


def check_group(axis):
    g = mesh.group(axis)
    me, n = g.rank, g.size
    # Each group's own data: the tensor groups {0, 1} and {2, 3} differ.
    seed = 100 + min(g.members)
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(7, 5))
    W = rng.normal(size=(5, 3))
    b, e = bounds(7, n)[me]
    t = td.annotate_d(A[b:e], group=g)
    assert t.group == int(g) and t.locality == me, (axis, t.group, t.locality)
    assert t.spans == [((lo, hi), (0, 5)) for lo, hi in bounds(7, n)], (axis, t.spans)
    assert f"of group '{axis}'" in repr(t), repr(t)
    np.testing.assert_array_equal(td.all_gather_d(t), A)
    # retile_d: point to point among the members (by world rank).
    c = td.retile_d(t, "columns")
    cb, ce = bounds(5, n)[me]
    np.testing.assert_array_equal(c.tile, A[:, cb:ce])
    assert c.group == int(g)
    # Reductions along the tiled axis: one collective on the group.
    np.testing.assert_allclose(tessera.call_primitive("sum", [t], {"axis": 0}), A.sum(0),
                               rtol=1e-12)
    np.testing.assert_allclose(tessera.call_primitive("max", [c]), A.max(), rtol=0)
    # Partial products summed over the group.
    wt = td.annotate_d(W[cb:ce], group=g)
    np.testing.assert_allclose(td.dot_d(c, wt), A @ W, rtol=1e-12)
    np.testing.assert_allclose(td.dot_d(t, W).tile, (A @ W)[b:e], rtol=1e-12)
    # Elementwise: the tile of the result, the group kept.
    s = tessera.call_primitive("add", [t, t])
    assert s.group == int(g)
    np.testing.assert_array_equal(s.tile, 2 * A[b:e])
    # random_d: the member's part of the local draw.
    rd = td.random_d((6, 4), "columns", seed=3, group=g)
    whole = tessera.call_primitive("random_uniform", [[6, 4]], {"seed": 3})
    lo, hi = bounds(4, n)[me]
    np.testing.assert_array_equal(rd.tile, whole[:, lo:hi])
    cd = td.constant_d(2.0, (5, 2), group=g)
    assert cd.spans == [((lo, hi), (0, 2)) for lo, hi in bounds(5, n)], cd.spans
    # conv1d_d on time tiles: the halo comes from the group's neighbour.
    x = rng.normal(size=(2, 11, 3))
    w = rng.normal(size=(3, 3, 2))
    tb, te = bounds(11, n)[me]
    xt = td.annotate_d(x[:, tb:te], "columns", group=g)
    got = td.all_gather_d(tessera.call_primitive("conv1d_d", [xt, w], {"padding": "same"}))
    want = tessera.call_primitive("conv1d", [x, w], {"padding": "same"})
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # A gradient through a tiled program: the tile's gradient is the slice of
    # the whole gradient, the plain parameter's the whole one.
    prog = _core.Program(
        "define(loss, x, w, sum(tanh(dot_d(x, w))))\n"
        "define(f, x, w, value_and_grad(loss, [0, 1])(x, w))\nf", "tiled_groups.tsl")
    value, (gx, gw) = prog.run([t, W])
    np.testing.assert_allclose(value, np.tanh(A @ W).sum(), rtol=1e-12)
    d = 1 - np.tanh(A @ W) ** 2
    np.testing.assert_allclose(gx.tile, (d @ W.T)[b:e], rtol=1e-10)
    np.testing.assert_allclose(gw, A.T @ d, rtol=1e-10)
    return t


td_ = check_group("tensor")
dd_ = check_group("data")
# Both groups' arrays at once in one program: each runs on its own group.
both = _core.Program("define(f, a, b, list(sum(a), sum(b)))\nf", "both.tsl")
sa, sb = both.run([td_, dd_])
np.testing.assert_allclose(sa, td.all_gather_d(td_).sum(), rtol=1e-12)
np.testing.assert_allclose(sb, td.all_gather_d(dd_).sum(), rtol=1e-12)

# Mixing groups: an error naming both operands and their groups.
try:
    tessera.call_primitive("add", [td_, dd_])
except ValueError as e:
    msg = str(e)
    assert "tiled over different groups" in msg and "group 'tensor'" in msg \
        and "group 'data'" in msg, msg
else:
    raise AssertionError("adding arrays tiled over different groups did not fail")
try:
    td.dot_d(td_, td.transpose_d(dd_))
except ValueError as e:
    assert "tiled over different groups" in str(e), str(e)
else:
    raise AssertionError("dot_d of arrays tiled over different groups did not fail")
# A TiledArray handle made on a group: one span per member.
h = _core.TiledArray(np.zeros((1, 2)), (2, 2), [((0, 1), (0, 2)), ((1, 2), (0, 2))],
                     group=mesh.group("tensor"))
assert h.locality == mesh.group("tensor").rank
try:
    _core.TiledArray(np.zeros((1, 2)), (2, 2), [((0, 1), (0, 2))] * 3, group=mesh.group("tensor"))
except ValueError as e:
    assert "one span per locality of the group 'tensor' (2), got 3" in str(e), str(e)
else:
    raise AssertionError("wrong span count accepted")
print("ok")
