"""tessera.distributed.Mesh and groups in one process (no mpirun): a mesh of
size 1, its groups of one member, collectives on them returning their input
(eager, in jit, and their gradients), and the errors. The 4-rank cases are
tests/distributed/mesh_groups.py, mesh_errors.py and mesh_mismatch.py."""

import numpy as np
import pytest

import tessera
import tessera.distributed as dist


def test_mesh_of_one_locality():
    mesh = dist.Mesh()
    assert mesh.shape == {"data": 1, "pipeline": 1, "tensor": 1}
    assert mesh.coords == {"data": 0, "pipeline": 0, "tensor": 0}
    for axis in ("data", "pipeline", "tensor"):
        g = mesh.group(axis)
        assert isinstance(g, dist.Group) and g.axis == axis
        assert g.members == (0,) and g.rank == 0 and g.size == 1
        assert mesh.size(axis) == 1 and mesh.rank(axis) == 0
        assert dist.rank(group=g) == 0 and dist.size(group=g) == 1
    # Each mesh makes groups of its own.
    assert int(dist.Mesh().group("data")) != int(mesh.group("data"))
    assert repr(mesh) == "Mesh(data=1, tensor=1, pipeline=1)"


def test_collectives_on_a_group_of_one_return_their_input():
    g = dist.Mesh(tensor=1).group("tensor")
    x = np.arange(6.0).reshape(3, 2) - 2.0
    np.testing.assert_array_equal(dist.all_reduce(x, group=g), x)
    np.testing.assert_array_equal(dist.all_reduce(x, op="mean", group=g), x)
    np.testing.assert_array_equal(dist.all_reduce(x, op="max", group=g), x)
    np.testing.assert_array_equal(dist.broadcast(x, group=g), x)
    np.testing.assert_array_equal(dist.all_gather(x, axis=1, group=g), x)
    np.testing.assert_array_equal(dist.reduce_scatter(x, group=g), x)
    np.testing.assert_array_equal(dist.gather(x, group=g), x)
    np.testing.assert_array_equal(dist.scatter(x, group=g), x)
    np.testing.assert_array_equal(dist.all_to_all(x, group=g), x)
    dist.barrier(group=g)


def test_jit_and_gradients_with_a_group():
    g = dist.Mesh().group("data")
    w = np.array([1.0, -2.0, 3.0])

    @tessera.jit
    def f(x):
        return np.sum(dist.all_reduce(w * x, group=g) * dist.all_gather(x, group=g))

    x = np.array([0.5, 1.5, -1.0])
    assert float(f(x)) == pytest.approx(float(np.sum(w * x * x)))
    np.testing.assert_allclose(tessera.grad(f)(x), 2.0 * w * x)

    @tessera.jit
    def h(x):
        return np.sum(dist.reduce_scatter(x * x, op="mean", group=g)) + dist.rank(group=g)

    np.testing.assert_allclose(tessera.grad(h)(x), 2.0 * x)


def test_gradient_bucket_on_a_group_of_one():
    g = dist.Mesh().group("data")

    @tessera.jit
    def f(w, x):
        return np.sum(tessera.grad_bucket(w, "one", 0, 1, group=g) * x)

    x = np.array([2.0, -1.0])
    np.testing.assert_array_equal(tessera.grad(f)(np.ones(2), x), x)


def test_bad_meshes_and_groups():
    with pytest.raises(
        ValueError,
        match=r"^\[mesh\] data=2 x tensor=1 x pipeline=1 makes 2 "
        r"localities, but this program runs on 1",
    ):
        dist.Mesh(data=2)
    with pytest.raises(
        ValueError, match=r"^\[mesh\] size of axis 'pipeline' must be a positive " r"int, got -1"
    ):
        dist.Mesh(pipeline=-1)
    with pytest.raises(
        ValueError, match=r"^\[mesh\] size of axis 'data' must be a positive int, " r"got True"
    ):
        dist.Mesh(data=True)
    mesh = dist.Mesh()
    with pytest.raises(ValueError, match=r"^\[mesh\] no axis 'rows'"):
        mesh.rank("rows")
    with pytest.raises(TypeError, match=r"^\[barrier\] argument 'group' must be a group"):
        dist.barrier(group=1.5)
    with pytest.raises(
        ValueError, match=r"^\[all_gather\] argument 'group' is 12345, which is no " r"group"
    ):
        dist.all_gather(np.ones(2), group=12345)
    with pytest.raises(
        IndexError, match=r"^\[gather\] argument 'root' is 1 but ranks of group " r"tensor are 0..0"
    ):
        dist.gather(np.ones(2), root=1, group=mesh.group("tensor"))
    with pytest.raises(
        ValueError, match=r"^\[recv\] needs another locality, but group data has " r"one member"
    ):
        dist.recv(0, group=mesh.group("data"))
