# A pattern agreed and cached for 10 steps, then rank 1 calls the same
# all_reduce (max: an order-independent reduction, whose data rides in the cached
# round) with another shape: every rank gets the precise mismatch error
# of the full exchange (naming both ranks' collectives), not a hang or a
# wrong result.
import numpy as np

import tessera.distributed as dist

r = dist.rank()
for step in range(10):
    assert dist.all_reduce(np.ones(3), op="max").tolist() == [1.0] * 3
for step in range(2):
    x = np.ones(4 if (r == 1 and step == 1) else 3)
    dist.all_reduce(x, op="max")
print("no error")
