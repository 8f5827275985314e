# Ranks 0 and 2 call an all_reduce on the data axis of a 2x2 mesh while
# their tensor peers (1 and 3) call the same line on the tensor axis: every
# rank fails within seconds with the mismatch error naming both sides,
# instead of hanging.
import numpy as np

import tessera.distributed as dist

R = dist.rank()
mesh = dist.Mesh(data=2, tensor=2)
axis = "data" if R % 2 == 0 else "tensor"
dist.all_reduce(np.arange(3.0), group=mesh.group(axis))
dist.barrier()
print("no error")
