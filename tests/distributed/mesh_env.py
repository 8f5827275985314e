# tessera.distributed.mesh() under `tessera run -n 4 --mesh data=2,tensor=2`:
# the launcher's TESSERA_MESH, the coordinates and groups of the documented
# order (tensor innermost: r = (data * p + pipeline) * t + tensor), made once.
import os

import numpy as np

import tessera.distributed as dist

assert os.environ["TESSERA_MESH"] == "data=2,tensor=2,pipeline=1", os.environ["TESSERA_MESH"]
mesh = dist.mesh()
assert dist.mesh() is mesh  # cached: one mesh per job
r = dist.rank()
assert mesh.shape == {"data": 2, "pipeline": 1, "tensor": 2}, mesh.shape
expected = {"data": r // 2, "pipeline": 0, "tensor": r % 2}
assert mesh.coords == expected, (r, mesh.coords, expected)
groups = {
    "tensor": [[0, 1], [0, 1], [2, 3], [2, 3]][r],
    "data": [[0, 2], [1, 3], [0, 2], [1, 3]][r],
    "pipeline": [r],
}
for axis, members in groups.items():
    g = mesh.group(axis)
    assert list(g.members) == members, (r, axis, g)
    assert g.rank == members.index(r), (r, axis, g)
# The groups work: a sum over the tensor group and a gather over the data group.
s = dist.all_reduce(np.array([float(r)]), group=mesh.group("tensor"))
assert s[0] == sum(groups["tensor"]), (r, s)
got = dist.all_gather(np.array([r]), group=mesh.group("data"))
assert list(got) == groups["data"], (r, got)
print(f"rank {r}: ok")
