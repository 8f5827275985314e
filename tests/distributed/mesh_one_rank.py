# Rank 1 calls an all_reduce on its tensor group (ranks 0 and 1) that rank 0
# never calls: rank 1 fails as soon as rank 0 finishes, naming the group.
import numpy as np

import tessera.distributed as dist

mesh = dist.Mesh(data=2, tensor=2)
if dist.rank() == 1:
    dist.all_reduce(np.arange(3.0), group=mesh.group("tensor"))
