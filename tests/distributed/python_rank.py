# tessera.distributed from Python under `tessera run`: rank(), size() and
# eager collectives; prints "ok" on every rank.
import numpy as np

import tessera.distributed as td

r, n = td.rank(), td.size()
assert 0 <= r < n, (r, n)
np.testing.assert_array_equal(td.all_reduce(np.arange(3.0) + r), n * np.arange(3.0) + n * (n - 1) / 2)
np.testing.assert_array_equal(td.broadcast(np.full(2, float(r)), root=n - 1), np.full(2, n - 1.0))
gathered = td.all_gather(np.full(r + 1, float(r)))
np.testing.assert_array_equal(gathered, np.concatenate([np.full(k + 1, float(k)) for k in range(n)]))
td.barrier()
print("ok")
