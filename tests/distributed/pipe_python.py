"""tessera.distributed.pipe_send / pipe_recv eagerly from Python on 2 ranks: both ranks
send 8 MB first, then receive (a send that waited for its receiver would hang here); a
message of another shape than ``like`` is a ValueError naming both stages; from a program,
pipe_send(copy=false) sends the program's array itself (no second buffer of its size), the
default a copy, and both messages arrive whole."""

import numpy as np

import tessera
import tessera.distributed as dist

r = dist.rank()
other = 1 - r
big = np.arange(1 << 20, dtype=np.float64) + r
dist.pipe_send(big, other, 3)
got = dist.pipe_recv(other, 3, like=big)
np.testing.assert_array_equal(got, np.arange(1 << 20, dtype=np.float64) + other)

dist.pipe_send(big[:4], other, 4)
try:
    dist.pipe_recv(other, 4, like=np.zeros(3))
    raise AssertionError("a message of shape (4,) was taken for (3,)")
except ValueError as e:
    assert str(e) == (
        f"[pipe_recv] stage {r} expected float64 (3,) from stage {other} with tag 4, "
        f"but stage {other} sent float64 (4,)"
    ), str(e)

# copy=false: the message holds x (8 MiB, made by tessera) instead of a copy of it: the peak
# of live bytes while the program sends it is 8 MiB lower than with the default copy. The receiver takes each message only after the barrier, so a copy could not
# be freed before the peak.
n = 1 << 20
x = tessera.Program("lambda(n, arange(n) * 0.5)").run([n])  # a tessera array, not NumPy's
send = tessera.Program("lambda(x, to, copy, block(define(s, pipe_send(x, to, 11, copy=copy)), "
                       "sum(x)))")
peaks = {}
for copy in (False, True):
    before = tessera.memory_stats()["live_bytes"]
    tessera.reset_peak_memory()
    send.run([x, other, copy])
    peaks[copy] = tessera.memory_stats()["peak_live_bytes"] - before
    dist.barrier()
    got = dist.pipe_recv(other, 11)
    np.testing.assert_array_equal(got, np.arange(n) * 0.5)
assert peaks[True] - peaks[False] == n * 8, (
    f"pipe_send's copy added {peaks[True] - peaks[False]} bytes to the peak, not {n * 8} "
    f"(peaks {peaks})")
print("ok")
