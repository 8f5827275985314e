# A job that runs until it is stopped: small data-parallel steps (an all-reduce
# of gradients and an update) on every rank, for the tests that pull a cable
# or kill the launcher. Prints "training" on every rank once all have started.
import time

import numpy as np

import tessera.distributed as td

w = np.zeros(1000)
td.barrier()
print("training", flush=True)
while True:
    grad = np.full(1000, td.rank() + 1.0)
    w -= 0.001 * td.all_reduce(grad, op="mean")
    time.sleep(0.01)
