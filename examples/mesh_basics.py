# A 2 x 2 mesh on 4 localities: the groups along each axis, a collective on
# each, and a jit function whose gradient runs on a group.
# Run: build/tessera run -n 4 examples/mesh_basics.py
import numpy as np

import tessera
import tessera.distributed as dist

mesh = dist.Mesh(data=2, tensor=2)  # the product must be the number of localities
r = dist.rank()
print(
    f"rank {r}: coords {mesh.coords}, tensor group {list(mesh.group('tensor').members)}, "
    f"data group {list(mesh.group('data').members)}"
)

x = np.full(3, float(r))
tp = mesh.group("tensor")
dp = mesh.group("data")
s = dist.all_reduce(x, group=tp)  # ranks 0+1 and 2+3: [1 1 1] or [5 5 5]
g = dist.all_gather(np.array([r]), group=dp)  # ranks 0,2 and 1,3: [0 2] or [1 3]
assert (s == sum(k for k in tp.members)).all() and list(g) == list(dp.members)

w = np.array([1.0, 2.0, 3.0])


@tessera.jit
def loss(v):
    # Summed over the tensor group; the gradient rule all-reduces on it too.
    return np.sum(w * dist.all_reduce(v * v, group=tp))


dv = tessera.grad(loss)(x)  # d(sum of both members' losses)/dv = 2 * 2 * w * v
assert np.allclose(dv, 4.0 * w * x), dv
print(f"rank {r}: ok")
