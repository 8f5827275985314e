"""tessera.distributed.pipe_send / pipe_recv eagerly from Python on 2 ranks: both ranks
send 8 MB first, then receive (a send that waited for its receiver would hang here); a
message of another shape than ``like`` is a ValueError naming both stages."""

import numpy as np

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
print("ok")
