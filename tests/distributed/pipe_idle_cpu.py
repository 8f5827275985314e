"""A rank that waits long for a message leaves the cores to the others, also when ranks
outnumber cores (run with TESSERA_WAIT=yield, the mode tessera picks then): the progress
thread yields between polls only for a while after its last progress, then sleeps between
polls, so a pipeline stage in its bubble does not take a turn of the run queue at every
scheduling point. Rank 1 sleeps WAIT seconds before it sends; rank 0's CPU time (every
thread) while it waits must stay below a third of the wait (a thread yielding through the
whole wait on an otherwise idle core takes all of it)."""

import time

import numpy as np

import tessera.distributed as dist

WAIT = 1.5
r = dist.rank()
x = np.arange(8, dtype=np.float32)
dist.barrier()
if r == 1:
    time.sleep(WAIT)
    dist.pipe_send(x, 0, 11)
else:
    wall, cpu = time.perf_counter(), time.process_time()
    got = dist.pipe_recv(1, 11, like=x)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    np.testing.assert_array_equal(got, x)
    assert wall > 0.8 * WAIT, f"the receive did not wait: {wall:.3f} s"
    assert cpu < wall / 3, (f"rank 0 used {cpu:.3f} s of CPU while waiting {wall:.3f} s for a "
                            "message (TESSERA_WAIT=yield)")
dist.barrier()
print("ok")
