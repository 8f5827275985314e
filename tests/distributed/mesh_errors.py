# Bad meshes and groups under `tessera run -n 4`: every rank gets a clear
# ValueError or TypeError and can go on. Prints "ok" on every rank.
import numpy as np
import pytest

import tessera.distributed as dist

R, N = dist.rank(), dist.size()

with pytest.raises(
    ValueError,
    match=r"^\[mesh\] data=3 x tensor=2 x pipeline=1 makes 6 localities, "
    r"but this program runs on 4 \(the product",
):
    dist.Mesh(data=3, tensor=2)
with pytest.raises(
    ValueError,
    match=r"^\[mesh\] data=1 x tensor=1 x pipeline=1 makes 1 localities, "
    r"but this program runs on 4",
):
    dist.Mesh()
with pytest.raises(
    ValueError, match=r"^\[mesh\] size of axis 'tensor' must be a positive int, got 0"
):
    dist.Mesh(data=4, tensor=0)
with pytest.raises(
    ValueError, match=r"^\[mesh\] size of axis 'data' must be a positive int, got 2.0"
):
    dist.Mesh(data=2.0, tensor=2)
# Different meshes on different ranks (each product right): every rank is told.
with pytest.raises(
    ValueError,
    match=r"^\[mesh\] the localities ask for different meshes: rank 0: "
    r"data=4, pipeline=1, tensor=1; rank 1: data=2, pipeline=1, tensor=2; rank 2: "
    r"data=2, pipeline=1, tensor=2; rank 3: data=2, pipeline=1, tensor=2$",
):
    if R == 0:
        dist.Mesh(data=4)
    else:
        dist.Mesh(data=2, tensor=2)

mesh = dist.Mesh(data=2, tensor=2)
with pytest.raises(ValueError, match=r"^\[mesh\] no axis 'model': the axes are"):
    mesh.group("model")
with pytest.raises(TypeError, match=r"^\[all_reduce\] argument 'group' must be a group"):
    dist.all_reduce(np.ones(2), group="tensor")
with pytest.raises(ValueError, match=r"^\[all_reduce\] argument 'group' is 99, which is no group"):
    dist.all_reduce(np.ones(2), group=99)
with pytest.raises(
    IndexError, match=r"^\[broadcast\] argument 'root' is 2 but ranks of group tensor are 0..1"
):
    dist.broadcast(np.ones(2), root=2, group=mesh.group("tensor"))
with pytest.raises(
    ValueError, match=r"^\[send\] needs another locality, but group pipeline has one member"
):
    dist.send(np.ones(2), 0, group=mesh.group("pipeline"))
# Still usable after the errors.
np.testing.assert_array_equal(
    dist.all_reduce(np.ones(2), group=mesh.group("tensor")), np.full(2, 2.0)
)
dist.barrier()
print("ok")
