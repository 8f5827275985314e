# Failure detection stays world-wide with groups: rank 1 stops (SIGSTOP)
# while rank 0 waits for it in an all_reduce on their tensor group, and
# ranks 2 and 3 wait in a world barrier; the failure detector names rank 1
# (run with TESSERA_FAILURE_TIMEOUT=3).
import os
import signal

import numpy as np

import tessera.distributed as dist

R = dist.rank()
mesh = dist.Mesh(data=2, tensor=2)
dist.all_reduce(np.ones(2), group=mesh.group("tensor"))
if R == 1:
    os.kill(os.getpid(), signal.SIGSTOP)
if R in (0, 1):
    dist.all_reduce(np.ones(2), group=mesh.group("tensor"))
dist.barrier()
