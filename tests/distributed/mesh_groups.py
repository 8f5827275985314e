# Groups of a mesh under `tessera run -n 4`: every collective on each axis
# of the meshes 2x2, 4x1 and 1x4 (data x tensor) against NumPy computed from
# what every rank contributes (eager and inside @tessera.jit); gradients of
# all_reduce, all_gather and reduce_scatter on a group against the gradient
# of the sum of every rank's loss; collectives on the two tensor groups of
# the 2x2 mesh at once. Prints "ok" on every rank.
import numpy as np

import tessera
import tessera.distributed as dist

R, N = dist.rank(), dist.size()
assert N == 4, N


def contribution(r, rows=5, cols=3):
    """What rank r contributes: different on every rank, known to all."""
    return np.arange(rows * cols, dtype=np.float64).reshape(rows, cols) * (r + 1) + 10.0 * r


def expected_members(data, tensor, axis, r):
    # World rank = data_coord * tensor + tensor_coord (pipeline size 1).
    if axis == "tensor":
        return [r // tensor * tensor + t for t in range(tensor)]
    if axis == "data":
        return [d * tensor + r % tensor for d in range(data)]
    return [r]


def split(x, parts):
    return np.array_split(x, parts, axis=0)


def check_collectives(mesh, axis):
    g = mesh.group(axis)
    members = list(g.members)
    me = members.index(R)
    n = len(members)
    assert g.rank == me and g.size == n, (g, me, n)
    assert dist.rank(group=g) == me and dist.size(group=g) == n
    assert mesh.rank(axis) == me and mesh.size(axis) == n
    xs = [contribution(k) for k in members]
    x = contribution(R)

    np.testing.assert_array_equal(dist.all_reduce(x, group=g), sum(xs))
    np.testing.assert_allclose(dist.all_reduce(x, op="mean", group=g), sum(xs) / n)
    np.testing.assert_array_equal(dist.all_reduce(x, op="max", group=g), np.max(xs, axis=0))
    np.testing.assert_array_equal(
        dist.all_reduce(-x, op="min", group=g), np.min([-v for v in xs], axis=0)
    )
    root = n - 1
    np.testing.assert_array_equal(dist.broadcast(x, root=root, group=g), xs[root])
    # Extents that differ along the joined axis: rank k gives k + 1 rows.
    mine = np.full((R + 1, 2), float(R))
    np.testing.assert_array_equal(
        dist.all_gather(mine, group=g),
        np.concatenate([np.full((k + 1, 2), float(k)) for k in members]),
    )
    np.testing.assert_array_equal(
        dist.all_gather(mine.T, axis=1, group=g),
        np.concatenate([np.full((2, k + 1), float(k)) for k in members], axis=1),
    )
    np.testing.assert_array_equal(dist.reduce_scatter(x, group=g), split(sum(xs), n)[me])
    gathered = dist.gather(mine, root=0, group=g)
    if me == 0:
        np.testing.assert_array_equal(
            gathered, np.concatenate([np.full((k + 1, 2), float(k)) for k in members])
        )
    else:
        np.testing.assert_array_equal(gathered, mine)
    np.testing.assert_array_equal(dist.scatter(x, root=root, group=g), split(xs[root], n)[me])
    # all_to_all: part j of member k's x goes to member j.
    got = dist.all_to_all(x, group=g)
    np.testing.assert_array_equal(got, np.concatenate([split(v, n)[me] for v in xs]))
    dist.barrier(group=g)
    if n > 1:
        dist.send(x, (me + 1) % n, tag=7, group=g)
        np.testing.assert_array_equal(dist.recv((me - 1) % n, tag=7, group=g), xs[(me - 1) % n])

    # 512 KiB: the engine's ring all-reduce on the group's channel; float32
    # halves of it agreed together are coalesced.
    big = np.arange(65536, dtype=np.float64) * (R + 1)
    np.testing.assert_array_equal(
        dist.all_reduce(big, group=g), np.arange(65536.0) * sum(k + 1 for k in members)
    )
    np.testing.assert_array_equal(
        dist.reduce_scatter(big, group=g),
        split(np.arange(65536.0) * sum(k + 1 for k in members), n)[me],
    )

    # The same inside a jit function: the group is captured as a constant.
    @tessera.jit
    def jitted(v):
        return dist.all_reduce(v * 2.0, group=g), dist.all_gather(v, group=g), dist.rank(group=g)

    s, gath, rk = jitted(x)
    np.testing.assert_array_equal(s, 2.0 * sum(xs))
    np.testing.assert_array_equal(gath, np.concatenate(xs))
    assert int(rk) == me


def check_gradients(mesh, axis):
    g = mesh.group(axis)
    members = list(g.members)
    me = members.index(R)
    n = len(members)
    w = np.linspace(-1.0, 1.0, 15).reshape(5, 3)

    def weights(k):
        return np.cos(np.arange(15.0).reshape(5, 3) + k)

    # loss_k = sum(c_k * all_reduce(w * x_k)): d(sum over k of loss_k)/dx_r
    # is w * (sum over members of c_k).
    @tessera.jit
    def loss_sum(x, c):
        return np.sum(c * dist.all_reduce(w * x, group=g))

    @tessera.jit
    def loss_mean(x, c):
        return np.sum(c * dist.all_reduce(w * x, op="mean", group=g))

    x = contribution(R)
    cs = [weights(k) for k in members]
    np.testing.assert_allclose(tessera.grad(loss_sum)(x, weights(R)), w * sum(cs))
    np.testing.assert_allclose(tessera.grad(loss_mean)(x, weights(R)), w * sum(cs) / n)

    # all_gather: member r's x is rows of every member's output.
    @tessera.jit
    def loss_gather(x, c):
        return np.sum(c * dist.all_gather(x * x, group=g))

    xr = np.arange(R + 1.0).reshape(R + 1, 1) + 1.0
    sizes = [k + 1 for k in members]
    at = sum(sizes[:me])

    def cg(k):
        return np.sin(np.arange(sum(sizes), dtype=np.float64).reshape(-1, 1) + k)

    total = sum(cg(k) for k in members)
    np.testing.assert_allclose(
        tessera.grad(loss_gather)(xr, cg(R)), 2.0 * xr * total[at : at + R + 1]
    )

    # reduce_scatter: every member's x reaches every part.
    @tessera.jit
    def loss_rs(x, c):
        return np.sum(c * dist.reduce_scatter(x, group=g))

    parts = [len(p) for p in split(np.zeros(5), n)]

    def cr(k):
        return np.cos(np.arange(parts[members.index(k)] * 3.0).reshape(-1, 3) + k)

    np.testing.assert_allclose(
        tessera.grad(loss_rs)(x, cr(R)), np.concatenate([cr(k) for k in members])
    )


def check_bucket(mesh, axis):
    # A gradient bucket of two parameters summed over the group in one
    # all_reduce from the backward pass.
    g = mesh.group(axis)
    members = list(g.members)

    @tessera.jit
    def loss(w1, w2, x, c):
        a = tessera.grad_bucket(w1, "mesh", 0, 2, group=g)
        b = tessera.grad_bucket(w2, "mesh", 1, 2, group=g)
        return np.sum(c * (a * x)) + np.sum(c * (2.0 * b * x))

    def c_of(k):
        return np.cos(np.arange(15.0).reshape(5, 3) + k)

    w = np.ones((5, 3))
    dw1, dw2 = tessera.grad(loss, argnums=(0, 1))(w, w, contribution(R), c_of(R))
    total = sum(c_of(k) * contribution(k) for k in members)
    np.testing.assert_allclose(dw1, total)
    np.testing.assert_allclose(dw2, 2.0 * total)


def check_concurrent(mesh):
    # Both tensor groups of the 2x2 mesh run collectives at the same time,
    # on different data, many of them in flight: each gets its own results.
    g = mesh.group("tensor")
    members = list(g.members)
    futures = [dist.all_reduce(np.full(4, float(R * 100 + i)), group=g) for i in range(50)]
    for i, got in enumerate(futures):
        np.testing.assert_array_equal(got, np.full(4, float(sum(k * 100 + i for k in members))))

    @tessera.jit
    def many(v):
        a = dist.all_reduce(v, group=g)
        b = dist.all_gather(v, group=g)
        c = dist.reduce_scatter(np.concatenate([v, v]), group=g)
        return a, b, c

    # Collectives on both of this rank's groups in flight at once.
    dp = mesh.group("data")

    @tessera.jit
    def both(v):
        return dist.all_reduce(v, group=g), dist.all_reduce(v * 10.0, group=dp), dist.all_reduce(v)

    v = np.arange(6.0) + R
    on_tp, on_dp, on_world = both(v)
    np.testing.assert_array_equal(on_tp, sum(np.arange(6.0) + k for k in members))
    np.testing.assert_array_equal(on_dp, sum(10.0 * (np.arange(6.0) + k) for k in dp.members))
    np.testing.assert_array_equal(on_world, sum(np.arange(6.0) + k for k in range(N)))

    @tessera.jit
    def coalesced(v):
        return [dist.all_reduce(v * float(i), group=g) for i in range(8)]

    for i, got in enumerate(coalesced(v.astype(np.float32))):
        np.testing.assert_array_equal(got, sum(np.arange(6.0) + k for k in members) * i)

    a, b, c = many(v)
    vs = [np.arange(6.0) + k for k in members]
    np.testing.assert_array_equal(a, sum(vs))
    np.testing.assert_array_equal(b, np.concatenate(vs))
    np.testing.assert_array_equal(c, split(np.concatenate([sum(vs), sum(vs)]), 2)[members.index(R)])


for data, tensor in [(2, 2), (4, 1), (1, 4)]:
    mesh = dist.Mesh(data=data, tensor=tensor)
    assert mesh.shape == {"data": data, "pipeline": 1, "tensor": tensor}, mesh.shape
    assert mesh.coords == {"data": R // tensor, "pipeline": 0, "tensor": R % tensor}, mesh.coords
    for axis in ("data", "tensor", "pipeline"):
        assert list(mesh.group(axis).members) == expected_members(data, tensor, axis, R), (
            axis,
            mesh,
        )
        check_collectives(mesh, axis)
        check_gradients(mesh, axis)
        check_bucket(mesh, axis)
    if data == 2:
        check_concurrent(mesh)
    # World collectives still work between groups' ones.
    np.testing.assert_array_equal(dist.all_reduce(np.ones(2)), np.full(2, 4.0))

# A 3-axis mesh: the coordinates, tensor innermost, then pipeline, then data.
mesh = dist.Mesh(data=1, tensor=2, pipeline=2)
assert mesh.coords == {"data": 0, "pipeline": R // 2, "tensor": R % 2}, mesh.coords
assert list(mesh.group("pipeline").members) == [R % 2, R % 2 + 2]
np.testing.assert_array_equal(
    dist.all_reduce(np.array([float(R)]), group=mesh.group("pipeline")), [float(R % 2 + R % 2 + 2)]
)
dist.barrier()
print("ok")
